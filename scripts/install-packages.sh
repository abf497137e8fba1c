#!/usr/bin/env bash
# Installs the named Debian packages that are missing, with apt-get (no recommends, no questions),
# system-wide; never touches one already installed, and does nothing, silently, when none is missing.
# Installs as root directly, else with `sudo -n` (sudo that asks no password); else prints the exact
# command to run and exits 1.
#
#   scripts/install-packages.sh PKG...
#
# Called by every make target that needs Debian packages (the Makefile's *_PACKAGES lists) and by
# scripts/librdkafka.sh for what building librdkafka needs.
set -euo pipefail

[ $# -gt 0 ] || { echo "usage: $0 PKG..." >&2; exit 2; }

missing=""
for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
[ -n "$missing" ] || exit 0

echo "installing Debian packages:$missing"
if [ "$(id -u)" = 0 ]; then SUDO=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"
else
    echo "error: missing Debian packages:$missing"
    echo "run:   sudo apt-get update && sudo apt-get install -y$missing"
    exit 1
fi
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# shellcheck disable=SC2086 # a list of names
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
