#!/bin/sh
# Install the Debian packages of mk/build-deps (or of the list file given
# as the first argument, and the packages named after it) that are not
# installed yet.  Quiet and quick when nothing is missing.
#   sh mk/deps.sh                         make deps, check, run
#   sh mk/deps.sh mk/deb-deps [lintian]   make deb
set -eu
list="${1:-$(dirname "$0")/build-deps}"
[ $# -gt 0 ] && shift
extra="$*"
# Packages that installed ones provide count as there: e.g. npm, which
# the nodejs package of other repositories (NodeSource) carries inside.
provided=$(dpkg-query -W -f='${db:Status-Abbrev} ${Provides}\n' 2>/dev/null |
	sed -n 's/^ii *//p' | tr ',' '\n' | sed -e 's/(.*//' -e 's/:any//' -e 's/ //g')
missing=""
for p in $(sed -e 's/#.*//' "$list") $extra; do
	s=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$s" in
	*"ok installed"*) ;;
	*) printf '%s\n' "$provided" | grep -qx "$p" || missing="$missing $p" ;;
	esac
done
[ -z "$missing" ] && exit 0
# DEPS_LOG=FILE: what this run installs is added to FILE (make deb names
# them at its end, so that they can go again)
[ -n "${DEPS_LOG:-}" ] && printf '%s\n' $missing >>"$DEPS_LOG"
if ! command -v apt-get >/dev/null 2>&1; then
	echo "deps: missing packages:$missing (no apt-get here; install them by hand)" >&2
	exit 1
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "deps: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086
$sudo apt-get install -y -qq --no-install-recommends $missing
