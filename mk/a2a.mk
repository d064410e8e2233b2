# mk/a2a.mk: the A2A test client's packages (tests/a2a: the official
# @a2a-js/sdk, pinned in package.json and package-lock.json), installed
# with `npm ci` when node_modules is missing.  make check runs it;
# tests/e2e/test_a2a.py fails without them (HD_A2A_SDK=0 runs its stdlib
# half alone).

A2A_TEST_DIR := tests/a2a

.PHONY: a2a-deps
a2a-deps:
	@if [ ! -d $(A2A_TEST_DIR)/node_modules/@a2a-js/sdk ]; then \
		if command -v npm >/dev/null 2>&1; then \
			echo "== npm ci in $(A2A_TEST_DIR)"; \
			(cd $(A2A_TEST_DIR) && npm ci --no-audit --no-fund --loglevel=error) || \
				echo "a2a-deps: npm ci failed: tests/e2e/test_a2a.py will fail" >&2; \
		else \
			echo "a2a-deps: no npm: tests/e2e/test_a2a.py will fail (HD_A2A_SDK=0 skips its SDK half)" >&2; \
		fi; \
	fi
