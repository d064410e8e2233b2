# mk/stress.mk: the long runs of the robustness harnesses (issue 7).
# Included by the top Makefile.  make check runs the same scripts short.
#
#   make stress                       200 kill cycles, 200 power cuts (and 200 under the
#                                     relay, 200 at the receipts' journal), 10,000 racing items,
#                                     longer faults, 5,000 relayed items through a 3-node
#                                     cluster, 500 receipts of mixed outcomes, 1,000 through
#                                     a 3-node cluster, 10,000,000 doubles printed as
#                                     python3's repr
#   make stress STRESS_CYCLES=1000 STRESS_N=50000 [SANITIZE=1]
#
# Each harness prints its figures; every harness runs even when one fails,
# and the target fails when any did.

STRESS_CYCLES ?= 200
STRESS_N      ?= 10000
STRESS_FAULT_SECONDS ?= 10
STRESS_REPR_N ?= 10000000

STRESS_ENV = HD_BUILD=$(CURDIR)/$(B) HD_SRC=$(CURDIR) SANITIZE=$(SANITIZE) \
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
	UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

.PHONY: stress
stress: deps
	@$(MAKE) --no-print-directory all $(POWERCUTFS) $(CHECKB)
	@rc=0; \
	echo "== stress: canonical reals, $(STRESS_REPR_N) doubles against python3 repr"; \
	$(STRESS_ENV) HD_CANON_REPR_COUNT=$(STRESS_REPR_N) CK_RUN_SUITE=canon CK_RUN_CASE=repr \
		$(CHECKB) || rc=1; \
	echo "== stress: crash, $(STRESS_CYCLES) SIGKILL cycles"; \
	$(STRESS_ENV) HD_CRASH_CYCLES=$(STRESS_CYCLES) HD_CRASH_MAX_RUN=1.5 \
		python3 -B tests/e2e/test_crash.py || rc=1; \
	echo "== stress: crash, fsync = no, $(STRESS_CYCLES) cycles"; \
	$(STRESS_ENV) HD_CRASH_CYCLES=$(STRESS_CYCLES) HD_CRASH_FSYNC=no HD_CRASH_DELAY=0.0005 \
		python3 -B tests/e2e/test_crash.py || rc=1; \
	echo "== stress: races, $(STRESS_N) items, 4 daemons, 4 consumers"; \
	$(STRESS_ENV) HD_RACES_N=$(STRESS_N) HD_RACES_DAEMONS=4 HD_RACES_CONSUMERS=4 \
		python3 -B tests/e2e/test_races.py || rc=1; \
	echo "== stress: faults of $(STRESS_FAULT_SECONDS)s, 50 items each"; \
	$(STRESS_ENV) HD_FAULT_SECONDS=$(STRESS_FAULT_SECONDS) HD_FAULT_ITEMS=50 \
		HD_FAULT_RECOVER_S=$$(( 2 * $(STRESS_FAULT_SECONDS) + 5 )) \
		python3 -B tests/e2e/test_faults.py || rc=1; \
	echo "== stress: relay through a 3-node cluster, 5,000 items, stream leader SIGKILLed"; \
	$(STRESS_ENV) HD_RELAY_CLUSTER_N=5000 python3 -B tests/e2e/test_relay_cluster.py || rc=1; \
	echo "== stress: receipts, 500 relayed handoffs of mixed outcomes"; \
	$(STRESS_ENV) HD_RECEIPT_N=500 python3 -B tests/e2e/test_receipts.py || rc=1; \
	echo "== stress: receipts through a 3-node cluster, 1,000 relayed, stream leader SIGKILLed twice"; \
	$(STRESS_ENV) HD_RECEIPT_CLUSTER_N=1000 python3 -B tests/e2e/test_receipts_cluster.py || rc=1; \
	echo "== stress: power cuts, $(STRESS_CYCLES) cuts (powercutfs, fsync = yes)"; \
	$(STRESS_ENV) HD_POWERCUT_CUTS=$(STRESS_CYCLES) HD_POWERCUT_ENFORCE=1 python3 -B tests/e2e/test_powercut.py || rc=1; \
	echo "== stress: power cuts under the relay, $(STRESS_CYCLES) cuts of either host (powercutfs, fsync = yes)"; \
	$(STRESS_ENV) HD_POWERCUT_CUTS=$(STRESS_CYCLES) HD_POWERCUT_ENFORCE=1 python3 -B tests/e2e/test_powercut_relay.py || rc=1; \
	echo "== stress: power cuts aimed at the receipts' journal, $(STRESS_CYCLES) cuts (powercutfs, fsync = yes)"; \
	$(STRESS_ENV) HD_PC_RECEIPT_CUTS=$(STRESS_CYCLES) HD_POWERCUT_ENFORCE=1 python3 -B tests/e2e/test_powercut_relay_receipts.py || rc=1; \
	echo "== stress: hostile spool"; \
	$(STRESS_ENV) python3 -B tests/e2e/test_hostile.py || rc=1; \
	if [ $$rc -eq 0 ]; then echo "stress: all passed"; else echo "stress: FAILED (see above)"; fi; \
	exit $$rc
