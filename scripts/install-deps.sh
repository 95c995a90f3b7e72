#!/usr/bin/env bash
# Install what building and testing pg_llm needs on Debian 12 (idempotent):
# PostgreSQL 15 server + headers, PCRE2, Perl IPC::Run for TAP tests.
set -euo pipefail
pkgs="postgresql-15 postgresql-server-dev-15 libpcre2-dev libipc-run-perl make gcc python3 python3-pip"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
