# handoffd: hand-written Makefile.  A fresh checkout builds with plain `make`;
# ./configure (optional, from configure.ac) writes config.mk with install
# directories, which this file picks up.
#
#   make                 build into build/ (quiet; V=1 shows every command)
#   make check           install missing build deps, build, run every test
#   make check SANITIZE=1   the same under ASan+UBSan, into build/san/
#   make run             build and start handoffd -f on a demo spool
#   make bench           the benchmark
#   make install DESTDIR=... prefix=...   /  make uninstall

VERSION := $(shell sed -n 's/^\#define HD_VERSION_STRING "\(.*\)"/\1/p' include/handoff.h)
SOVERSION := 0

-include config.mk

prefix      ?= /usr/local
exec_prefix ?= $(prefix)
bindir      ?= $(exec_prefix)/bin
sbindir     ?= $(exec_prefix)/sbin
libdir      ?= $(exec_prefix)/lib
includedir  ?= $(prefix)/include
datarootdir ?= $(prefix)/share
mandir      ?= $(datarootdir)/man
# A daemon's configuration is in /etc whatever the prefix, as its state and
# runtime directories are in /var and /run: a plain `make` build reads
# /etc/handoffd/handoffd.conf, like the package and the man pages.
sysconfdir  ?= /etc
localstatedir ?= /var
runstatedir ?= /run

CC      ?= cc
PKG_CONFIG ?= pkg-config
CFLAGS  ?= -O2 -g
CXXFLAGS ?= -O2 -g
LDFLAGS ?=

ifeq ($(SANITIZE),1)
B ?= build/san
SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
B ?= build
SAN :=
endif

# double-conversion: the shortest digits of a real (src/lib/shortest.cc, a
# C++ library: libhandoff brings in libstdc++ through it).
PKGS := libuv jansson libsodium inih yaml-0.1 expat double-conversion
# Loaded by handoffd with dlopen() only when needed (libsystemd for the
# journal, libnats for a [relay]): their headers, never their libraries.
DL_PKGS := libsystemd libnats
PKG_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(PKGS) $(DL_PKGS) 2>/dev/null)
PKG_LIBS   := $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)

HD_CFLAGS := -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
	-Wno-unused-parameter -Wmissing-prototypes -Wstrict-prototypes \
	-fPIC -fstack-protector-strong -fno-strict-aliasing \
	-Iinclude $(PKG_CFLAGS) $(SAN) \
	-DHD_SYSCONFDIR='"$(sysconfdir)"' -DHD_RUNSTATEDIR='"$(runstatedir)"' \
	-DHD_LOCALSTATEDIR='"$(localstatedir)"'
ifneq ($(SANITIZE),1)
HD_CFLAGS += -D_FORTIFY_SOURCE=2
endif
HD_LDFLAGS := -Wl,-z,relro,-z,now -Wl,--as-needed $(SAN)
# The one C++ file (src/lib/shortest.cc) with the same warnings and
# hardening, and neither exceptions nor RTTI: it calls into a library and
# returns, and needs nothing of the C++ runtime itself.
HD_CXXFLAGS = $(filter-out -std=gnu11 -Wmissing-prototypes -Wstrict-prototypes,$(HD_CFLAGS)) \
	-std=gnu++17 -fno-exceptions -fno-rtti

# src/lib/: what libhandoff exports (hd_*, include/handoff.h) and the
# helpers it needs (files, keys, the spool's names); src/lib/payload/: the
# payload formats behind the table (payload.c); src/lib/private/: the
# leaves under all of it (util, sbuf, record, sd_notify), which call
# nothing of the library.  Above the library, code more than one program
# shares, which the library carries but does not export:
# src/lib/config/ (handoffd.conf, with its keys) and src/lib/spool/ (the
# spool's files as the CLI and the hub read and write them: items, cancel
# requests), src/lib/agent/ (what an agent does with the spool: send,
# list and take its inbox, report a result) and src/lib/mcp/ (the MCP
# tools over it, one table for handoffctl mcp's stdio and the hub's
# /mcp).  A program's own folder is that program's alone.
LIB_SRCS    := $(sort $(wildcard src/lib/*.c src/lib/payload/*.c src/lib/private/*.c \
	src/lib/config/*.c src/lib/spool/*.c src/lib/agent/*.c src/lib/mcp/*.c))
LIB_CXX_SRCS := $(sort $(wildcard src/lib/*.cc))
DAEMON_SRCS := $(sort $(filter-out src/handoffd/main.c,$(wildcard src/handoffd/*.c src/handoffd/store/*.c)))
CTL_SRCS    := $(sort $(wildcard src/handoffctl/*.c))
TEST_SRCS   := $(sort $(wildcard tests/unit/test_*.c))
TESTLIB_SRCS := tests/unit/testutil.c tests/unit/daemonfx.c

LIB_OBJS    := $(patsubst %.c,$(B)/%.o,$(LIB_SRCS)) $(patsubst %.cc,$(B)/%.o,$(LIB_CXX_SRCS))
DAEMON_OBJS := $(patsubst %.c,$(B)/%.o,$(DAEMON_SRCS))
CTL_OBJS    := $(patsubst %.c,$(B)/%.o,$(CTL_SRCS))
TEST_OBJS   := $(patsubst %.c,$(B)/%.o,$(TEST_SRCS) $(TESTLIB_SRCS))

LIBA   := $(B)/libhandoff.a
LIBSO  := $(B)/libhandoff.so.$(VERSION)
CORE   := $(B)/handoffd-core.a
DAEMON := $(B)/handoffd
CTL    := $(B)/handoffctl
CHECKB := $(B)/tests/check_handoff

# handoff-hubd: the HTTPS side (src/hubd/), its own program and privilege.
HUBD_SRCS := $(sort $(wildcard src/hubd/*.c))
HUBD_OBJS := $(patsubst %.c,$(B)/%.o,$(HUBD_SRCS))
HUBD   := $(B)/handoff-hubd
HUB_PKGS := libmicrohttpd gnutls
HUB_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(HUB_PKGS) 2>/dev/null)
HUB_LIBS := $(shell $(PKG_CONFIG) --libs $(HUB_PKGS) 2>/dev/null)

# handoff-a2a: handoffd's A2A sender (src/a2a/), a process of its own:
# the only program that links libcurl and reads an A2A server's answers.
A2A_SRCS := $(sort $(wildcard src/a2a/*.c))
A2A_OBJS := $(patsubst %.c,$(B)/%.o,$(A2A_SRCS))
A2A    := $(B)/handoff-a2a
A2A_CFLAGS := $(shell $(PKG_CONFIG) --cflags libcurl 2>/dev/null)
A2A_LIBS := $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

# handoff-push: handoff-hubd's webhook sender (src/push/), a process of
# its own; the hub links the part both judge by (push_addr.c, push_line.c).
PUSH_SRCS := $(sort $(wildcard src/push/*.c))
PUSH_OBJS := $(patsubst %.c,$(B)/%.o,$(PUSH_SRCS))
PUSH_SHARED := $(B)/src/push/push_addr.o $(B)/src/push/push_line.o
PUSH   := $(B)/handoff-push

PROGRAMS := $(DAEMON) $(CTL) $(HUBD) $(A2A) $(PUSH)

.PHONY: all deps check run bench install uninstall clean distclean FORCE
all: $(LIBA) $(LIBSO) $(PROGRAMS)

# NO_DEPS=1 (package builds, where Build-Depends did this): skip the step.
deps:
ifneq ($(NO_DEPS),1)
	@sh mk/deps.sh
endif

# The compiled-in directories (default config path, control socket): a
# change of sysconfdir/runstatedir rebuilds, so `make install sysconfdir=/etc`
# after a plain `make` installs binaries that look in /etc.
DIRS_STAMP := $(B)/.dirs
DIRS_NOW := $(sysconfdir) $(runstatedir) $(localstatedir)
$(shell mkdir -p $(B) && (echo '$(DIRS_NOW)' | cmp -s - $(DIRS_STAMP) || echo '$(DIRS_NOW)' > $(DIRS_STAMP)))

# Each directory sees only the headers of what it builds on: the library
# its own, config/ and spool/ the library's and their own, each program
# the library's with config/ and spool/ (INC_shared) and its own folder,
# the tests the daemon's too.
INC_lib := -Isrc/lib -Isrc/lib/payload -Isrc/lib/private
INC_shared := $(INC_lib) -Isrc/lib/config -Isrc/lib/spool -Isrc/lib/agent -Isrc/lib/mcp
INC_handoffd := $(INC_shared) -Isrc/handoffd -Isrc/handoffd/store
INC_handoffctl := $(INC_shared) -Isrc/handoffctl
INC_hubd := $(INC_shared) -Isrc/hubd -Isrc/push
$(B)/src/lib/%.o: HD_CFLAGS += $(INC_lib)
$(B)/src/lib/config/%.o: HD_CFLAGS += -Isrc/lib/config
$(B)/src/lib/spool/%.o: HD_CFLAGS += -Isrc/lib/spool
$(B)/src/lib/agent/%.o: HD_CFLAGS += -Isrc/lib/config -Isrc/lib/spool -Isrc/lib/agent
$(B)/src/lib/mcp/%.o: HD_CFLAGS += -Isrc/lib/config -Isrc/lib/spool -Isrc/lib/agent -Isrc/lib/mcp
$(B)/src/handoffd/%.o: HD_CFLAGS += $(INC_handoffd)
$(B)/src/handoffctl/%.o: HD_CFLAGS += $(INC_handoffctl)
$(B)/src/hubd/%.o: HD_CFLAGS += $(INC_hubd) $(HUB_CFLAGS)
$(B)/src/a2a/%.o: HD_CFLAGS += $(INC_shared) -Isrc/a2a $(A2A_CFLAGS)
$(B)/src/push/%.o: HD_CFLAGS += $(INC_shared) -Isrc/push $(A2A_CFLAGS)
$(B)/tests/%.o: HD_CFLAGS += $(INC_handoffd) $(CHECK_CFLAGS) -Itests/unit -Isrc/hubd

# Quiet by default ("CC src/lib/canon.c"), every command line with V=1.
ifeq ($(V),1)
Q :=
quiet = @:
else
Q := @
quiet = @printf '  %-6s %s\n'
endif

# Headers: the -MMD .d files name exactly what each object includes.
$(B)/%.o: %.c Makefile $(DIRS_STAMP)
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(CC) $(HD_CFLAGS) $(CFLAGS) -MMD -MP -c -o $@ $<

$(B)/%.o: %.cc Makefile $(DIRS_STAMP)
	@mkdir -p $(@D)
	$(quiet) CXX $<
	$(Q)$(CXX) $(HD_CXXFLAGS) $(CXXFLAGS) -MMD -MP -c -o $@ $<

$(LIBA): $(LIB_OBJS)
	@rm -f $@
	$(quiet) AR $@
	$(Q)ar rcs $@ $^

$(LIBSO): $(LIB_OBJS) src/lib/libhandoff.sym
	$(quiet) LD $@
	$(Q)$(CC) -shared -Wl,-soname,libhandoff.so.$(SOVERSION) \
		-Wl,--version-script=src/lib/libhandoff.sym $(HD_LDFLAGS) $(LDFLAGS) \
		-o $@ $(LIB_OBJS) $(PKG_LIBS)
	$(Q)ln -sf libhandoff.so.$(VERSION) $(B)/libhandoff.so.$(SOVERSION)
	$(Q)ln -sf libhandoff.so.$(VERSION) $(B)/libhandoff.so

$(CORE): $(DAEMON_OBJS)
	@rm -f $@
	$(quiet) AR $@
	$(Q)ar rcs $@ $^

$(DAEMON): $(B)/src/handoffd/main.o $(CORE) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(CTL): $(CTL_OBJS) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) -lm

$(HUBD): $(HUBD_OBJS) $(PUSH_SHARED) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(HUB_LIBS) -lpthread -lm

$(A2A): $(A2A_OBJS) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(A2A_LIBS) -lpthread -lm

$(PUSH): $(PUSH_OBJS) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(A2A_LIBS) -lm

# One Check binary: every tests/unit/test_NAME.c defines Suite *suite_NAME(void).
$(B)/tests/suites.inc: $(TEST_SRCS) Makefile
	@mkdir -p $(@D)
	@for f in $(notdir $(basename $(TEST_SRCS))); do echo "SUITE($${f#test_})"; done > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(B)/tests/check_main.o: tests/check_main.c $(B)/tests/suites.inc
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(CC) $(HD_CFLAGS) $(CHECK_CFLAGS) -I$(B)/tests -Itests $(CFLAGS) -c -o $@ $<

# The hub's connection table (hub_conns.c) is tested alone: it needs
# nothing of libmicrohttpd, and its test stands in for the rest of the hub.
# --wrap=calloc: a test can make an allocation of the code under test
# fail (testutil.h tu_fail_calloc).
$(CHECKB): $(B)/tests/check_main.o $(TEST_OBJS) $(B)/src/hubd/hub_conns.o $(CORE) $(LIBA)
	$(quiet) LD $@
	$(Q)$(CC) $(HD_LDFLAGS) $(LDFLAGS) -Wl,--wrap=calloc -o $@ $^ $(PKG_LIBS) $(CHECK_LIBS) -lm

# CK_RUN_SUITE=NAME / CK_RUN_CASE=NAME select; T=NAME is short for the first.
# HD_DEPS: the packages `make deps` installed; an e2e script skipped for
# want of one of them fails (tests/unit/test_e2e.c).  HD_E2E_JOBS=N runs N
# e2e scripts at a time (default 2 per CPU); HD_E2E="A B" only those whose
# name contains A or B.
CHECK_ENV = HD_BUILD=$(CURDIR)/$(B) HD_SRC=$(CURDIR) SANITIZE=$(SANITIZE) \
	$(if $(filter 1,$(NO_DEPS)),,HD_DEPS=$(CURDIR)/mk/build-deps) \
	CK_DEFAULT_TIMEOUT=$${CK_DEFAULT_TIMEOUT:-120} \
	$(if $(T),CK_RUN_SUITE=$(T)) \
	ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1} \
	UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

check: deps mcp-deps a2a-deps
	@$(MAKE) --no-print-directory all $(CHECKB) bench-floor $(CHECK_BUILD)
	@echo "== running tests ($(B))"
	@$(CHECK_ENV) $(CHECKB)

-include mk/*.mk
-include $(shell find $(B) -name '*.d' 2>/dev/null)
# Headers that moved (dependency files written before -MP still name them):
# rebuild what included them.
src/handoffd/config.h src/lib/private/config.h src/lib/private/config_err.h \
src/lib/private/config_keys.h src/lib/private/config_sections.h \
src/lib/private/layout.h src/lib/private/cancelreq.h src/handoffctl/items.h \
src/handoffd/notify.h: ;

clean:
	rm -rf build

distclean: clean
	rm -rf config.mk config.log config.status configure autom4te.cache demo
