# mk/bench.mk: `make bench`, included by the top Makefile.
#
#   make bench                         N=5000 per run, fixed rate 500/s
#   make bench BENCH_N=20000 BENCH_RATE=200
#   make bench BENCH_ARGS='--fsync on --phases rate'
#   make bench TMPDIR=/dev/shm         (temp spools go under $TMPDIR or /tmp)
#   make bench BENCH_SETTLE=0          (do not wait for cheap file creation;
#                                       see bench/README.md)
#
# Always the normal optimised build in build/ (never the sanitized one, even
# with SANITIZE=1 on the command line).  The last line of output is
# "BENCH_JSON {...}"; bench/README.md explains the figures.

BENCH_N    ?= 5000
BENCH_RATE ?= 500
BENCH_SETTLE ?= 90
BENCH_ARGS ?=
BENCH_BUILD := $(CURDIR)/build

bench: deps
	@$(MAKE) --no-print-directory SANITIZE= B=build all
	@python3 $(CURDIR)/bench/bench.py --build $(BENCH_BUILD) \
		--n '$(BENCH_N)' --rate '$(BENCH_RATE)' \
		--settle '$(BENCH_SETTLE)' $(BENCH_ARGS)

# `make bench-verify`: hd_verify per document, HMAC against Ed25519
# (bench/verify_cost.c, in-memory, no daemon).
BENCH_VERIFY_N ?= 20000

$(BENCH_BUILD)/bench/verify_cost: bench/verify_cost.c $(BENCH_BUILD)/libhandoff.a include/handoff.h
	@mkdir -p $(@D)
	$(CC) $(filter-out $(SAN),$(HD_CFLAGS)) -O2 -o $@ $< $(BENCH_BUILD)/libhandoff.a $(PKG_LIBS) -lm

.PHONY: bench-verify
bench-verify: deps
	@$(MAKE) --no-print-directory SANITIZE= B=build all
	@$(MAKE) --no-print-directory SANITIZE= B=build $(BENCH_BUILD)/bench/verify_cost
	@$(BENCH_BUILD)/bench/verify_cost $(BENCH_VERIFY_N)
