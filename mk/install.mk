# mk/install.mk: install, uninstall, dist, distcheck, deb.  Included by the
# top Makefile (which sets prefix, bindir, ... with ?=, and B).
#
#   make install DESTDIR=/tmp/root prefix=/usr sysconfdir=/etc
#   make uninstall (same variables)
#   make dist        handoffd-$(VERSION).tar.gz from git HEAD
#   make distcheck   unpack dist, make, make check, make install DESTDIR=tmp
#   make deb         dpkg-buildpackage -us -uc -b in a copy; .debs to $(DEBDIR):
#                    every package of debian/control, its tests run inside
#                    (make check) unless DEB_BUILD_OPTIONS=nocheck
#
# install never runs systemctl, systemd-sysusers or systemd-tmpfiles: the
# package (or the admin) does that.  Installing builds nothing that is up to
# date; `make -o all install` installs what $(B) holds without building.

INSTALL ?= install
INSTALL_PROGRAM ?= $(INSTALL) -m 0755
INSTALL_DATA ?= $(INSTALL) -m 0644

# systemd's own directories, relative to our prefix: with prefix=/usr the
# unit dir is /usr/lib/systemd/system, with /usr/local it is
# /usr/local/lib/systemd/system (both are in systemd's search path).
# Override on the command line to use pkg-config's raw answer (debian/rules).
PC_SYSTEMD = $(PKG_CONFIG) --define-variable=prefix=$(prefix) \
	--define-variable=root_prefix=$(prefix) systemd
ifeq ($(origin systemdsystemunitdir),undefined)
systemdsystemunitdir := $(or $(shell $(PC_SYSTEMD) --variable=systemdsystemunitdir 2>/dev/null),$(prefix)/lib/systemd/system)
endif
ifeq ($(origin systemdsystempresetdir),undefined)
systemdsystempresetdir := $(or $(shell $(PC_SYSTEMD) --variable=systemdsystempresetdir 2>/dev/null),$(prefix)/lib/systemd/system-preset)
endif
sysusersdir   ?= $(prefix)/lib/sysusers.d
tmpfilesdir   ?= $(prefix)/lib/tmpfiles.d
pkgconfigdir  ?= $(libdir)/pkgconfig
bashcompdir   ?= $(datarootdir)/bash-completion/completions
confdir       ?= $(sysconfdir)/handoffd

MAN_PAGES := man/handoffctl.1 man/libhandoff.3 man/handoffd.conf.5 \
	man/handoff.7 man/handoffd.8 man/handoff-hubd.8
PC_FILE := $(B)/handoff.pc

.PHONY: install-files dist distcheck deb deb-deps

$(PC_FILE): handoff.pc.in include/handoff.h mk/install.mk
	@mkdir -p $(@D)
	sed -e 's|@prefix@|$(prefix)|g' -e 's|@exec_prefix@|$(exec_prefix)|g' \
	    -e 's|@libdir@|$(libdir)|g' -e 's|@includedir@|$(includedir)|g' \
	    -e 's|@VERSION@|$(VERSION)|g' $< > $@.tmp && mv $@.tmp $@

# The .pc file depends on prefix and libdir: regenerate on every install.
install: all
	@rm -f $(PC_FILE)
	@$(MAKE) --no-print-directory $(PC_FILE)
	@$(MAKE) --no-print-directory -o all install-files

install-files:
	$(INSTALL) -d $(DESTDIR)$(sbindir) $(DESTDIR)$(bindir) \
		$(DESTDIR)$(libdir) $(DESTDIR)$(pkgconfigdir) \
		$(DESTDIR)$(includedir) $(DESTDIR)$(mandir)/man1 \
		$(DESTDIR)$(mandir)/man3 $(DESTDIR)$(mandir)/man5 \
		$(DESTDIR)$(mandir)/man7 $(DESTDIR)$(mandir)/man8 \
		$(DESTDIR)$(systemdsystemunitdir) $(DESTDIR)$(systemdsystempresetdir) \
		$(DESTDIR)$(sysusersdir) $(DESTDIR)$(tmpfilesdir) \
		$(DESTDIR)$(bashcompdir) $(DESTDIR)$(confdir)
	$(INSTALL_PROGRAM) $(DAEMON) $(DESTDIR)$(sbindir)/handoffd
	$(INSTALL_PROGRAM) $(CTL) $(DESTDIR)$(bindir)/handoffctl
	$(INSTALL_PROGRAM) $(HUBD) $(DESTDIR)$(sbindir)/handoff-hubd
	$(INSTALL_PROGRAM) $(A2A) $(DESTDIR)$(sbindir)/handoff-a2a
	$(INSTALL_PROGRAM) $(PUSH) $(DESTDIR)$(sbindir)/handoff-push
	$(INSTALL_DATA) $(LIBSO) $(DESTDIR)$(libdir)/libhandoff.so.$(VERSION)
	ln -sf libhandoff.so.$(VERSION) $(DESTDIR)$(libdir)/libhandoff.so.$(SOVERSION)
	ln -sf libhandoff.so.$(SOVERSION) $(DESTDIR)$(libdir)/libhandoff.so
	$(INSTALL_DATA) $(LIBA) $(DESTDIR)$(libdir)/libhandoff.a
	$(INSTALL_DATA) include/handoff.h $(DESTDIR)$(includedir)/handoff.h
	$(INSTALL_DATA) $(PC_FILE) $(DESTDIR)$(pkgconfigdir)/handoff.pc
	for m in $(MAN_PAGES); do \
		s=$${m##*.}; \
		$(INSTALL_DATA) $$m $(DESTDIR)$(mandir)/man$$s/ || exit 1; \
	done
	sed -e 's|/usr/sbin/handoffd|$(sbindir)/handoffd|g' \
	    -e 's|/etc/handoffd/|$(confdir)/|g' systemd/handoffd.service \
		> $(DESTDIR)$(systemdsystemunitdir)/handoffd.service
	chmod 0644 $(DESTDIR)$(systemdsystemunitdir)/handoffd.service
	$(INSTALL_DATA) systemd/handoff-agent@.path $(DESTDIR)$(systemdsystemunitdir)/handoff-agent@.path
	sed -e 's|/usr/sbin/handoff-hubd|$(sbindir)/handoff-hubd|g' \
	    -e 's|/etc/handoffd/|$(confdir)/|g' systemd/handoff-hubd.service \
		> $(DESTDIR)$(systemdsystemunitdir)/handoff-hubd.service
	chmod 0644 $(DESTDIR)$(systemdsystemunitdir)/handoff-hubd.service
	$(INSTALL_DATA) systemd/handoff-hubd.socket $(DESTDIR)$(systemdsystemunitdir)/handoff-hubd.socket
	$(INSTALL_DATA) systemd/handoff-hubd.sysusers $(DESTDIR)$(sysusersdir)/handoff-hubd.conf
	$(INSTALL_DATA) systemd/handoffd.preset $(DESTDIR)$(systemdsystempresetdir)/90-handoffd.preset
	$(INSTALL_DATA) systemd/handoffd.sysusers $(DESTDIR)$(sysusersdir)/handoffd.conf
	$(INSTALL_DATA) systemd/handoffd.tmpfiles $(DESTDIR)$(tmpfilesdir)/handoffd.conf
	$(INSTALL_DATA) completion/handoffctl.bash $(DESTDIR)$(bashcompdir)/handoffctl
	@# Never replace an operator's config.
	@if [ -e $(DESTDIR)$(confdir)/handoffd.conf ] && \
	    ! cmp -s etc/handoffd.conf $(DESTDIR)$(confdir)/handoffd.conf; then \
		echo "install: keeping $(DESTDIR)$(confdir)/handoffd.conf; sample is etc/handoffd.conf"; \
	else \
		echo "$(INSTALL_DATA) etc/handoffd.conf $(DESTDIR)$(confdir)/handoffd.conf"; \
		$(INSTALL_DATA) etc/handoffd.conf $(DESTDIR)$(confdir)/handoffd.conf; \
	fi

# Removes what install put there (the config only when it is still the
# sample), then the directories of ours that are left empty.
uninstall:
	rm -f $(DESTDIR)$(sbindir)/handoffd $(DESTDIR)$(bindir)/handoffctl \
		$(DESTDIR)$(sbindir)/handoff-hubd $(DESTDIR)$(sbindir)/handoff-a2a \
		$(DESTDIR)$(sbindir)/handoff-push \
		$(DESTDIR)$(libdir)/libhandoff.so.$(VERSION) \
		$(DESTDIR)$(libdir)/libhandoff.so.$(SOVERSION) \
		$(DESTDIR)$(libdir)/libhandoff.so $(DESTDIR)$(libdir)/libhandoff.a \
		$(DESTDIR)$(includedir)/handoff.h $(DESTDIR)$(pkgconfigdir)/handoff.pc \
		$(DESTDIR)$(systemdsystemunitdir)/handoffd.service \
		$(DESTDIR)$(systemdsystemunitdir)/handoff-agent@.path \
		$(DESTDIR)$(systemdsystemunitdir)/handoff-hubd.service \
		$(DESTDIR)$(systemdsystemunitdir)/handoff-hubd.socket \
		$(DESTDIR)$(sysusersdir)/handoff-hubd.conf \
		$(DESTDIR)$(systemdsystempresetdir)/90-handoffd.preset \
		$(DESTDIR)$(sysusersdir)/handoffd.conf \
		$(DESTDIR)$(tmpfilesdir)/handoffd.conf \
		$(DESTDIR)$(bashcompdir)/handoffctl
	for m in $(notdir $(MAN_PAGES)); do \
		rm -f $(DESTDIR)$(mandir)/man$${m##*.}/$$m; \
	done
	@if cmp -s etc/handoffd.conf $(DESTDIR)$(confdir)/handoffd.conf; then \
		echo "rm -f $(DESTDIR)$(confdir)/handoffd.conf"; \
		rm -f $(DESTDIR)$(confdir)/handoffd.conf; \
	elif [ -e $(DESTDIR)$(confdir)/handoffd.conf ]; then \
		echo "uninstall: keeping the edited $(DESTDIR)$(confdir)/handoffd.conf"; \
	fi
	-rmdir $(DESTDIR)$(confdir) 2>/dev/null || true

# ---- dist ----------------------------------------------------------------

DIST_NAME := handoffd-$(VERSION)
DIST_TAR  := $(DIST_NAME).tar.gz

dist:
	@git rev-parse --verify -q HEAD >/dev/null || \
		{ echo "dist: not a git checkout with a commit" >&2; exit 1; }
	@if [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then \
		echo "dist: note: uncommitted changes are not in the tarball (it is HEAD)" >&2; fi
	git archive --format=tar.gz --prefix=$(DIST_NAME)/ -o $(DIST_TAR) HEAD
	@echo "dist: wrote $(DIST_TAR)"

distcheck: dist
	@set -e; t=$$(mktemp -d "$${TMPDIR:-/tmp}/handoffd-distcheck.XXXXXX"); \
	trap 'chmod -R u+w "$$t" 2>/dev/null; rm -rf "$$t"' EXIT; \
	tar -C "$$t" -xzf $(DIST_TAR); \
	echo "distcheck: building in $$t/$(DIST_NAME)"; \
	$(MAKE) -C "$$t/$(DIST_NAME)" --no-print-directory; \
	$(MAKE) -C "$$t/$(DIST_NAME)" --no-print-directory check; \
	$(MAKE) -C "$$t/$(DIST_NAME)" --no-print-directory install DESTDIR="$$t/inst"; \
	echo "distcheck: installed:"; (cd "$$t/inst" && find . -type f -o -type l | sort); \
	$(MAKE) -C "$$t/$(DIST_NAME)" --no-print-directory uninstall DESTDIR="$$t/inst"; \
	left=$$(cd "$$t/inst" && find . -type f -o -type l); \
	if [ -n "$$left" ]; then echo "distcheck: uninstall left: $$left" >&2; exit 1; fi; \
	echo "distcheck: $(DIST_TAR) is ready"

# ---- deb -----------------------------------------------------------------

DEBDIR ?= $(B)/deb
# DEB_BUILD_OPTIONS=nocheck (Debian's way): no make check inside the build,
# and the build profile nocheck, so the tests' Build-Depends are not needed.
DEB_NOCHECK := $(filter nocheck,$(DEB_BUILD_OPTIONS))
DEB_PROFILE := $(if $(DEB_NOCHECK),-Pnocheck)
DEB_PACKAGES = $(shell sed -n 's/^Package: *//p' debian/control)

# What a package build needs, and only that: the packaging tools
# (mk/deb-deps; lintian with LINTIAN=1), debian/control's Build-Depends for
# this profile, and, when the tests run inside, everything make check
# uses (mk/build-deps).  NO_DEPS=1 installs nothing.
DEB_DEPS_LOG = $(B)/deb-deps-installed
deb-deps:
ifneq ($(NO_DEPS),1)
	@mkdir -p $(B); : >$(DEB_DEPS_LOG)
	@DEPS_LOG=$(abspath $(DEB_DEPS_LOG)) sh mk/deps.sh mk/deb-deps $(if $(filter 1,$(LINTIAN)),lintian)
	@if ! dpkg-checkbuilddeps $(DEB_PROFILE) >/dev/null 2>&1; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		dpkg-checkbuilddeps $(DEB_PROFILE) 2>&1 | sed -n 's/.*Unmet build dependencies: //p' | \
			sed 's/([^)]*)//g' | tr ' ' '\n' | sed '/^$$/d' >>$(DEB_DEPS_LOG); \
		echo "deb-deps: installing the Build-Depends of debian/control$(if $(DEB_NOCHECK), (profile nocheck))" >&2; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq \
			--no-install-recommends $(DEB_PROFILE) ./; \
	fi
ifeq ($(DEB_NOCHECK),)
	@sh mk/deps.sh
endif
endif

# dpkg-buildpackage writes into ../ and debian/: build in a copy of the
# working tree so that nothing lands in the checkout or beside it.
deb: deb-deps
	@echo "deb: building $(words $(DEB_PACKAGES)) packages ($(DEB_PACKAGES))," \
		"and -dbgsym packages of their debug symbols, into $(DEBDIR)/"
ifeq ($(DEB_NOCHECK),)
	@echo "deb: the build runs make check, every test (about 20 minutes on 2 cores);" \
		"DEB_BUILD_OPTIONS=nocheck skips it"
else
	@echo "deb: DEB_BUILD_OPTIONS=nocheck: no tests"
endif
	@set -e; t=$$(mktemp -d "$${TMPDIR:-/tmp}/handoffd-deb.XXXXXX"); \
	trap 'rm -rf "$$t"' EXIT; \
	mkdir "$$t/$(DIST_NAME)"; \
	tar --exclude=./build --exclude=./.git --exclude=./demo \
	    --exclude='./handoffd-*.tar.gz' -cf - . | tar -C "$$t/$(DIST_NAME)" -xf -; \
	(cd "$$t/$(DIST_NAME)" && dpkg-buildpackage -us -uc -b $(DEB_PROFILE)); \
	mkdir -p $(DEBDIR); \
	cp "$$t"/*.deb "$$t"/*.buildinfo "$$t"/*.changes $(DEBDIR)/; \
	echo "deb: packages in $(DEBDIR):"; (cd "$$t" && ls -1 *.deb); \
	if [ "$(LINTIAN)" = 1 ]; then \
		echo "== lintian"; lintian --fail-on error "$$t"/*.changes; fi; \
	if [ -s $(DEB_DEPS_LOG) ]; then \
		l=$$(sort -u $(DEB_DEPS_LOG) | tr '\n' ' '); \
		echo "deb: installed for this build, not needed to run the packages: $$l"; \
		echo "deb: to remove them: apt-get purge $$l&& apt-get autoremove"; fi
