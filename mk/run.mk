# make run: build, then start handoffd in the foreground on a demo spool
# under demo/ (git-ignored) with a freshly generated key and two agents,
# alice and bob: handoffctl mcp speaks for an agent the daemon serves, so
# bob's handoff_send to alice can be tried end to end.
DEMO ?= $(CURDIR)/demo
# Every path it prints is absolute: each line works from any directory.
DEMO_CTL = $(CURDIR)/$(B)/handoffctl

.PHONY: run
run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(DEMO)/keys $(DEMO)/agents/alice $(DEMO)/agents/bob
	@chmod 700 $(DEMO)/keys $(DEMO)/agents/alice $(DEMO)/agents/bob
	@[ -f $(DEMO)/keys/default.key ] || $(B)/handoffctl keygen -o $(DEMO)/keys/default.key
	@printf '%s\n' \
		'; demo configuration written by make run' \
		'[spool]' 'dir = $(DEMO)/spool' 'fsync = yes' 'resume_window = 300' \
		'[keys]' 'default = $(DEMO)/keys/default.key' \
		'[agent alice]' 'state_dir = $(DEMO)/agents/alice' \
		'[agent bob]' 'state_dir = $(DEMO)/agents/bob' \
		'[control]' 'socket = $(DEMO)/control.sock' > $(DEMO)/handoffd.conf
	@$(B)/handoffd -n -c $(DEMO)/handoffd.conf
	@echo
	@echo "In another terminal, hand something to the demo agent 'alice':"
	@echo
	@echo "  $(DEMO_CTL) submit -c $(DEMO)/handoffd.conf --from bob --to alice --reason 'demo handoff'"
	@echo
	@echo "then: $(DEMO_CTL) status -c $(DEMO)/handoffd.conf"
	@echo "      $(DEMO_CTL) consume -c $(DEMO)/handoffd.conf --agent alice"
	@echo
	@echo "The demo agent 'bob' over MCP: handoff_send, as an MCP client calls it:"
	@echo
	@echo "  echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"handoff_send\",\"arguments\":{\"to_agent\":\"alice\",\"reason\":\"demo handoff over MCP\"}}}' | $(DEMO_CTL) mcp -c $(DEMO)/handoffd.conf --agent bob"
	@echo
	@echo "then alice takes it with the consume line above."
	@echo
	@echo "Ctrl-C stops handoffd; rm -rf $(DEMO) resets the demo."
	@echo
	exec $(B)/handoffd -f -c $(DEMO)/handoffd.conf
