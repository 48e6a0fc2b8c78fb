#!/usr/bin/env bash
# The one place the set-up installs Debian packages. Waits for another apt run instead of failing on the
# dpkg lock, refreshes the package lists only when the first try fails, and exits 2 with the command to run
# when it cannot (no apt-get, neither root nor passwordless sudo, apt failed).
#
#   tools/apt-install.sh [--with-recommends] WHAT PACKAGE[=VERSION*]...    (WHAT names the need in messages)
set -euo pipefail

recommends=(--no-install-recommends)
if [[ ${1:-} == --with-recommends ]]; then recommends=(); shift; fi
what=$1; shift
remedy="apt-get update && apt-get install -y $*"

command -v apt-get >/dev/null 2>&1 || {
  echo "setup: $what: apt-get not found: install $* with your package manager" >&2; exit 2; }
as_root=()
if [[ $(id -u) -ne 0 ]]; then
  sudo -n true 2>/dev/null || { echo "setup: $what: run as root: $remedy" >&2; exit 2; }
  as_root=(sudo -n)
fi
apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -qq)
if ! { "${apt[@]}" install -y "${recommends[@]}" "$@" >/dev/null 2>&1 \
       || { "${apt[@]}" update && "${apt[@]}" install -y "${recommends[@]}" "$@" >/dev/null; }; }; then
  echo "setup: $what: apt-get could not install $*: check /etc/apt/sources.list.d/ and the network, then: $remedy" >&2
  exit 2
fi
