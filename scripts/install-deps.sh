#!/usr/bin/env bash
# Install what building and testing pg_llm needs on Debian 12 (idempotent):
# PostgreSQL 15 server + headers, PCRE2, Perl IPC::Run for TAP tests, and
# the model converter's pinned Python packages (scripts/install-python-deps.sh).
#
#   scripts/install-deps.sh [--dry-run]
#
# Never upgrades an installed PostgreSQL server as a side effect: upgrading
# postgresql-NN restarts its running clusters.  Where postgresql-15 is already
# installed, its headers (postgresql-server-dev-15, libpq-dev) are installed at
# the server's own version.  If that version is no longer in the apt lists, or
# apt's plan would still upgrade a server package, the script says what it would
# do and stops; LLM_ALLOW_SERVER_UPGRADE=1 lets it go ahead.
# --dry-run: only print apt's plan (apt-get -s) and what would be stopped; no
# `apt-get update`, nothing installed.  It reads the package state through dpkg
# and apt, so DPKG_ADMINDIR and APT_CONFIG apply as usual.
set -euo pipefail
DRY=0
case "${1:-}" in
--dry-run) DRY=1 ;;
"") ;;
*) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;
esac
SERVER=postgresql-15
# built from the server's source package: must match the server's version
SAME_VERSION="postgresql-server-dev-15 libpq-dev"
pkgs="$SERVER postgresql-server-dev-15 libpq-dev libpcre2-dev libipc-run-perl make gcc python3 python3-pip"

installed_version() {
  { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null || true; } | sed -n 's/^install ok installed //p'
}
available() { # package version: is that version in the apt lists?
  apt-cache madison "$1" 2>/dev/null | awk -F'|' -v v="$2" '{gsub(/ /, "", $2)} $2 == v {f=1} END {exit !f}'
}

missing=""
for p in $pkgs; do
  [ -n "$(installed_version "$p")" ] || missing="$missing $p"
done
# the model converter's Python packages (pinned, from PyPI through pip)
python_deps() { [ $DRY = 1 ] || "$(dirname "$0")/install-python-deps.sh"; }
if [ -z "$missing" ]; then
  echo "install-deps: nothing to install"
  python_deps
  exit 0
fi

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
[ $DRY = 1 ] || $SUDO apt-get update -qq

server_ver=$(installed_version $SERVER)
args=()
unpinned=""
for p in $missing; do
  if [ -n "$server_ver" ] && [[ " $SAME_VERSION " == *" $p "* ]]; then
    if available "$p" "$server_ver"; then
      args+=("$p=$server_ver")
    else
      args+=("$p")
      unpinned="$unpinned $p"
    fi
  else
    args+=("$p")
  fi
done

plan=$(DEBIAN_FRONTEND=noninteractive apt-get -s install -y "${args[@]}" 2>&1) || {
  echo "$plan" >&2
  echo "install-deps: apt-get cannot install: ${args[*]}" >&2
  exit 1
}
# "Inst postgresql-15 [15.18-0+deb12u1] (15.20-0+deb12u1 ...)": an upgrade of an installed server
upgrades=$(echo "$plan" | sed -n 's/^Inst \(postgresql-[0-9][0-9]*\) \[\([^]]*\)\] (\([^ ]*\).*/\1 \2 -> \3/p')
if [ $DRY = 1 ]; then
  echo "install-deps: would run: apt-get install -y ${args[*]}"
  echo "$plan" | grep -E '^(Inst|Remv) ' || true
fi
if { [ -n "$upgrades" ] || [ -n "$unpinned" ]; } && [ "${LLM_ALLOW_SERVER_UPGRADE:-0}" != 1 ]; then
  {
    echo "install-deps: STOPPED before: apt-get install -y ${args[*]}"
    [ -n "$unpinned" ] &&
      echo "  the installed server is $SERVER $server_ver; the apt lists no longer have$unpinned at that version"
    [ -n "$upgrades" ] && echo "  it would upgrade the PostgreSQL server:" && echo "$upgrades" | sed 's/^/    /'
    echo "An upgrade restarts the server's running clusters.  Upgrade it yourself"
    echo "(apt-get install $SERVER $SAME_VERSION), or allow this script to: LLM_ALLOW_SERVER_UPGRADE=1 $0"
  } >&2
  exit 1
fi
[ -n "$upgrades$unpinned" ] && echo "install-deps: LLM_ALLOW_SERVER_UPGRADE=1: going ahead" >&2
[ $DRY = 1 ] && exit 0
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${args[@]}"
python_deps
