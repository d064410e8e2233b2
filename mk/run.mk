# make run: build, then start handoffd in the foreground on a demo spool
# under demo/ (git-ignored) with a freshly generated key and one agent.
DEMO ?= $(CURDIR)/demo
# Every path it prints is absolute: each line works from any directory.
DEMO_CTL = $(CURDIR)/$(B)/handoffctl

.PHONY: run
run: deps
	@$(MAKE) --no-print-directory all
	@mkdir -p $(DEMO)/keys $(DEMO)/agents/alice
	@chmod 700 $(DEMO)/keys $(DEMO)/agents/alice
	@[ -f $(DEMO)/keys/default.key ] || $(B)/handoffctl keygen -o $(DEMO)/keys/default.key
	@printf '%s\n' \
		'; demo configuration written by make run' \
		'[spool]' 'dir = $(DEMO)/spool' 'fsync = yes' 'resume_window = 300' \
		'[keys]' 'default = $(DEMO)/keys/default.key' \
		'[agent alice]' 'state_dir = $(DEMO)/agents/alice' \
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
	@echo "Ctrl-C stops handoffd; rm -rf $(DEMO) resets the demo."
	@echo
	exec $(B)/handoffd -f -c $(DEMO)/handoffd.conf
