# mk/powercut.mk: the power-cut harness (issue 26).  Included by the top
# Makefile.
#
#   make powercut        100 power cuts (tests/e2e/test_powercut.py; make check
#                        runs it with 10), each aimed in turn right after one
#                        operation of the storage layer's sync rounds;
#                        POWERCUT_CUTS=N for another count.  Its last line:
#                        powercut: N cuts, N handoffs, lost N, twice N, left N
#   make stress          runs the long one (mk/stress.mk)
#
# tests/powercut/powercutfs.c is a FUSE file system (libfuse3) that forgets,
# on command, everything not synced: see its header for the model; the
# image it keeps of what a disk would hold is tests/powercut/pcimage.c.

POWERCUTFS := $(B)/tests/powercutfs
FUSE_CFLAGS := $(shell $(PKG_CONFIG) --cflags fuse3 2>/dev/null)
FUSE_LIBS   := $(shell $(PKG_CONFIG) --libs fuse3 2>/dev/null)

$(POWERCUTFS): tests/powercut/powercutfs.c tests/powercut/pcimage.c tests/powercut/pcimage.h \
		mk/powercut.mk
	@mkdir -p $(@D)
	$(quiet) CC $<
	$(Q)$(CC) $(filter-out -fPIC,$(HD_CFLAGS)) $(FUSE_CFLAGS) $(CFLAGS) $(HD_LDFLAGS) $(LDFLAGS) \
		-o $@ $(filter %.c,$^) $(FUSE_LIBS)

# make check runs the power-cut tests too: they need the harness built, by
# the make that check starts after deps (a prerequisite of check itself was
# built with the FUSE flags read before deps installed libfuse3-dev: on a
# fresh machine, "fuse.h: No such file or directory").
CHECK_BUILD += $(POWERCUTFS)

POWERCUT_CUTS ?= 100

.PHONY: powercut
powercut: deps
	@$(MAKE) --no-print-directory all $(POWERCUTFS)
	@$(CHECK_ENV) HD_POWERCUT_CUTS=$(POWERCUT_CUTS) HD_POWERCUT_ENFORCE=1 python3 -B tests/e2e/test_powercut.py
