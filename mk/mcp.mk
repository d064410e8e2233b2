# mk/mcp.mk: the MCP test client's packages (tests/mcp: the official
# @modelcontextprotocol/sdk, pinned in package.json and package-lock.json),
# installed with `npm ci` when node_modules is missing.  make check runs it;
# without npm or a registry tests/e2e/test_mcp.py says it is skipped, and
# tests/e2e/test_mcp_hub.py runs its half without the SDK alone.

MCP_TEST_DIR := tests/mcp

.PHONY: mcp-deps
mcp-deps:
	@if [ ! -d $(MCP_TEST_DIR)/node_modules/@modelcontextprotocol/sdk ]; then \
		if command -v npm >/dev/null 2>&1; then \
			echo "== npm ci in $(MCP_TEST_DIR)"; \
			(cd $(MCP_TEST_DIR) && npm ci --no-audit --no-fund --loglevel=error) || \
				echo "mcp-deps: npm ci failed: tests/e2e/test_mcp.py will be skipped" >&2; \
		else \
			echo "mcp-deps: no npm: tests/e2e/test_mcp.py will be skipped" >&2; \
		fi; \
	fi
