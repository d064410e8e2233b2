# mk/fuzz.mk: the libFuzzer targets tests/fuzz/fuzz_*.c.  Included by the
# top Makefile (which sets HD_CFLAGS, SAN, LIB_SRCS, DAEMON_SRCS, PKG_LIBS).
#
#   make fuzz-build               clang -fsanitize=fuzzer,address,undefined
#                                 into build/fuzz/ (whatever B or SANITIZE is)
#   make fuzz FUZZ_SECONDS=N      run each target N seconds (default 60) on a
#                                 copy of tests/fuzz/corpus/<target>/, then
#                                 every tests/fuzz/regress/<target>/ input;
#                                 non-zero exit on any crash
#   make fuzz FUZZ_TARGETS=fuzz_config   only some targets
#   make fuzz-long FUZZ_EXECS=N   run each target until N executions
#                                 (default 10,000,000: libFuzzer's -runs=N),
#                                 then the regression inputs; hours in all
#   make fuzz-merge               minimize each tests/fuzz/corpus/<target>/
#                                 with what the last fuzz run grew in
#                                 build/fuzz/corpus/<target>/ (-merge=1)
#
# Crash inputs land in build/fuzz/artifacts/<target>/; a crash found becomes
# a file in tests/fuzz/regress/<target>/ (test_fuzz.py replays them all).

FUZZ_CC      ?= clang
FUZZ_CXX     ?= clang++
FUZZ_SECONDS ?= 60
FUZZ_EXECS   ?= 10000000
FB           := build/fuzz

FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
# The project's flags and include paths without its own sanitizer choice
# (and without _FORTIFY_SOURCE, which hides overflows from ASan).
FUZZ_CFLAGS := $(filter-out $(SAN) -D_FORTIFY_SOURCE=2,$(HD_CFLAGS)) \
	$(INC_handoffd) -Itests/fuzz -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_LDFLAGS := $(filter-out $(SAN),$(HD_LDFLAGS)) $(FUZZ_SAN) -fsanitize=fuzzer
# src/lib/shortest.cc the same way, with the C++ flags of the Makefile.
FUZZ_CXXFLAGS = $(filter-out $(SAN) -D_FORTIFY_SOURCE=2,$(HD_CXXFLAGS)) \
	$(INC_lib) -g -O1 $(FUZZ_SAN) -fsanitize=fuzzer-no-link

FUZZ_ALL     := $(notdir $(basename $(wildcard tests/fuzz/fuzz_*.c)))
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_CORE    := $(FB)/libhandoff-fuzz.a
FUZZ_OBJS    := $(patsubst %.c,$(FB)/%.o,$(LIB_SRCS) $(DAEMON_SRCS)) \
	$(patsubst %.cc,$(FB)/%.o,$(LIB_CXX_SRCS))
FUZZ_BINS    := $(addprefix $(FB)/,$(FUZZ_TARGETS))

# fuzz_mcp links handoffctl's objects, fuzz_hub and fuzz_a2a handoff-hubd's, each
# from an archive of its own.
# Their main.c is in it with main() renamed, for the helpers beside it
# (ctl_fail, ctl_config, hub_setup): the program's main() is libFuzzer's.
FUZZ_CTL     := $(FB)/libhandoffctl-fuzz.a
FUZZ_HUB     := $(FB)/libhubd-fuzz.a
FUZZ_CTL_OBJS := $(patsubst %.c,$(FB)/%.o,$(CTL_SRCS))
# the hub links the part of handoff-push both judge by (Makefile PUSH_SHARED)
FUZZ_HUB_OBJS := $(patsubst %.c,$(FB)/%.o,$(HUBD_SRCS) src/push/push_addr.c src/push/push_line.c)
$(FB)/src/handoffctl/%.o $(FB)/tests/fuzz/fuzz_mcp.o: FUZZ_CFLAGS += $(INC_handoffctl)
$(FB)/src/hubd/%.o $(FB)/tests/fuzz/fuzz_hub.o $(FB)/tests/fuzz/fuzz_a2a.o \
$(FB)/tests/fuzz/fuzz_mcp_http.o: FUZZ_CFLAGS += \
	$(INC_hubd) $(HUB_CFLAGS)
$(FB)/src/handoffctl/main.o $(FB)/src/hubd/main.o: FUZZ_CFLAGS += \
	-Dmain=fuzz_program_main -Wno-missing-prototypes
$(FB)/fuzz_mcp: $(FUZZ_CTL)
$(FB)/fuzz_hub: $(FUZZ_HUB)
$(FB)/fuzz_hub: FUZZ_LIBS := $(HUB_LIBS) -lpthread
$(FB)/fuzz_a2a: $(FUZZ_HUB)
# fuzz_mcp_http: what /mcp reads of a request (hub_mcp.c, mcp_rpc.c)
$(FB)/fuzz_mcp_http: $(FUZZ_HUB)
$(FB)/fuzz_mcp_http: FUZZ_LIBS := $(HUB_LIBS) -lpthread
# fuzz_a2a_answer: handoff-a2a's parser of an A2A server's answers
$(FB)/tests/fuzz/fuzz_a2a_answer.o: FUZZ_CFLAGS += -Isrc/a2a
$(FB)/fuzz_a2a_answer: $(FB)/src/a2a/a2a_answer.o
$(FB)/fuzz_a2a_answer: FUZZ_LIBS := $(FB)/src/a2a/a2a_answer.o $(PKG_LIBS)
$(FB)/fuzz_a2a: FUZZ_LIBS := $(HUB_LIBS) -lpthread
# fuzz_push_line: the hub's reading of handoff-push's lines
$(FB)/tests/fuzz/fuzz_push_line.o: FUZZ_CFLAGS += -Isrc/push
$(FB)/fuzz_push_line: $(FB)/src/push/push_line.o
$(FB)/fuzz_push_line: FUZZ_LIBS := $(FB)/src/push/push_line.o $(PKG_LIBS)

.PHONY: fuzz fuzz-build fuzz-long fuzz-merge
# Keep the targets' objects: they are intermediate to the pattern rule.
.SECONDARY: $(patsubst %,$(FB)/tests/fuzz/%.o,$(FUZZ_ALL))

fuzz-build: $(FUZZ_BINS)

# Headers: the -MMD .d files (included below) name what each object includes.
$(FB)/src/%.o: src/%.c mk/fuzz.mk
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FB)/src/%.o: src/%.cc mk/fuzz.mk
	@mkdir -p $(@D)
	$(quiet) CXX $<
	$(Q)$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -MMD -MP -c -o $@ $<

$(FB)/tests/fuzz/%.o: tests/fuzz/%.c mk/fuzz.mk
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c -o $@ $<

$(FUZZ_CORE): $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_CTL): $(FUZZ_CTL_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_HUB): $(FUZZ_HUB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# One group: the program's archive and the core call each other.
$(FB)/fuzz_%: $(FB)/tests/fuzz/fuzz_%.o $(FUZZ_CORE)
	$(FUZZ_CC) $(FUZZ_LDFLAGS) -o $@ $< -Wl,--start-group $(filter %.a,$^) \
		-Wl,--end-group $(PKG_LIBS) $(FUZZ_LIBS) -lm

fuzz: fuzz-build
	@sh tests/fuzz/run.sh $(FB) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-long: fuzz-build
	@FUZZ_EXECS=$(FUZZ_EXECS) sh tests/fuzz/run.sh $(FB) 0 $(FUZZ_TARGETS)

fuzz-merge: fuzz-build
	@sh tests/fuzz/run.sh --merge $(FB) $(FUZZ_TARGETS)

-include $(shell find $(FB) -name '*.d' 2>/dev/null)
