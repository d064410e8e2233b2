# mk/bench.mk: `make bench`, included by the top Makefile.
#
#   make bench                         10,000 items, 3 rounds (5 to 12 min)
#   make bench BENCH_N=20000 BENCH_ROUNDS=5
#   make bench BENCH_BACKLOG=100000    the issue's 100k backlog (longer)
#   make bench BENCH_ARGS='--only burst'
#   make bench BENCH_RELAY_N=2000      (relay phase: items per run; BENCH_RELAY_RATE)
#   make bench BENCH_ARGS="--only hub" BENCH_HUB_N=2000   (the hub against the file drop)
#   make bench TMPDIR=/dev/shm         (temp spools go under $TMPDIR or /tmp)
#   make bench BENCH_TMPFS=/run/x      (the burst_tmpfs phase's tmpfs dir, default /dev/shm)
#   make bench BENCH_STRACE_N=2000     (the syscalls phase: items traced by strace)
#   make bench BENCH_QUOTA=100000      (handoffd with the inbox quota on, counted)
#   make bench BENCH_SETTLE=0          (do not wait for cheap file creation;
#                                       see bench/README.md)
#   make bench-floor                   only build $(B)/bench/floor and hubfloor
#
# Always the normal optimised build in build/ (never the sanitized one, even
# with SANITIZE=1 on the command line).  Runs bench/floor (the reference
# loop) and handoffd alternately on the same items and prints each figure
# as a ratio handoffd/floor.  The last line of output is "BENCH_JSON {...}";
# bench/README.md explains the figures.

BENCH_N       ?= 10000
BENCH_ROUNDS  ?= 3
BENCH_RATE    ?= 200
BENCH_RATE_N  ?= 1000
BENCH_BACKLOG ?= 20000
BENCH_SETTLE  ?= 90
BENCH_SETTLE_US ?= 50
BENCH_TMPFS   ?= /dev/shm
BENCH_STRACE_N ?= 1000
BENCH_QUOTA   ?= 0
BENCH_ARGS    ?=
BENCH_BUILD   := $(CURDIR)/build
FLOOR         := $(B)/bench/floor
HUBFLOOR      := $(B)/bench/hubfloor

.PHONY: bench-floor
bench-floor: $(FLOOR) $(HUBFLOOR)

# bench/ uses the library's private headers (files.h) like the daemon does,
# and its notify.c (READY=1 without libsystemd, as handoffd).
$(B)/bench/%.o: HD_CFLAGS += $(INC_lib)

$(FLOOR): $(B)/bench/floor.o $(LIBA)
	$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

# the hub's floor (bench/hubfloor.c): libmicrohttpd and GnuTLS as the hub
$(B)/bench/hubfloor.o: HD_CFLAGS += $(HUB_CFLAGS)
$(HUBFLOOR): $(B)/bench/hubfloor.o $(LIBA)
	$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(HUB_LIBS) -lpthread -lm

bench: deps
	@$(MAKE) --no-print-directory SANITIZE= B=build all bench-floor
	@python3 $(CURDIR)/bench/bench.py --build $(BENCH_BUILD) \
		--n '$(BENCH_N)' --rounds '$(BENCH_ROUNDS)' \
		--rate '$(BENCH_RATE)' --rate-n '$(BENCH_RATE_N)' \
		--backlog '$(BENCH_BACKLOG)' --settle '$(BENCH_SETTLE)' \
		--settle-us '$(BENCH_SETTLE_US)' --tmpfs '$(BENCH_TMPFS)' \
		--strace-n '$(BENCH_STRACE_N)' --quota '$(BENCH_QUOTA)' $(BENCH_ARGS)

# `make bench-verify`: hd_verify per document, HMAC against Ed25519
# (bench/verify_cost.c, in-memory, no daemon).
BENCH_VERIFY_N ?= 20000

$(BENCH_BUILD)/bench/verify_cost: bench/verify_cost.c $(BENCH_BUILD)/libhandoff.a include/handoff.h
	@mkdir -p $(@D)
	$(CC) $(filter-out $(SAN),$(HD_CFLAGS)) $(INC_lib) -O2 -o $@ $< $(BENCH_BUILD)/libhandoff.a $(PKG_LIBS) -lm

.PHONY: bench-verify
bench-verify: deps
	@$(MAKE) --no-print-directory SANITIZE= B=build all
	@$(MAKE) --no-print-directory SANITIZE= B=build $(BENCH_BUILD)/bench/verify_cost
	@$(BENCH_BUILD)/bench/verify_cost $(BENCH_VERIFY_N)
