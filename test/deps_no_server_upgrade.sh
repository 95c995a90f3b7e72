#!/usr/bin/env bash
# scripts/install-deps.sh never plans an upgrade of an installed PostgreSQL
# server.  Each case gives apt and dpkg a made-up package state (a copy of this
# machine's dpkg status file with postgresql-15 and its headers changed; through
# DPKG_ADMINDIR and APT_CONFIG) and runs `install-deps.sh --dry-run`, which
# only simulates (apt-get -s).  Nothing is installed or upgraded, even by a
# version of install-deps.sh that ignored --dry-run: the apt configuration
# given to it makes every apt-get a simulation, has no dpkg to run and keeps
# its package lists in a copy.
# Ends with "N passed, N failed, N skipped" (test/run-all counts it).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
pass=0; fail=0; skip=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && echo "$2" | sed 's/^/#   /'; }
skipped() { skip=$((skip + 1)); echo "ok - $1 # SKIP $2"; }
finish() { echo "$pass passed, $fail failed, $skip skipped"; [ "$fail" -eq 0 ]; exit $?; }

if ! command -v apt-get >/dev/null || ! command -v dpkg-query >/dev/null || [ ! -f /var/lib/dpkg/status ]; then
  skipped "install-deps simulation" "not a dpkg/apt system"
  finish
fi
cand=$(apt-cache policy postgresql-15 2>/dev/null | sed -n 's/^  Candidate: //p')
if [ -z "$cand" ] || [ "$cand" = "(none)" ]; then
  skipped "install-deps simulation" "postgresql-15 is not in the apt lists (apt-get update)"
  finish
fi
# an older postgresql-15 the lists still have (Debian keeps the point release's next to the security update)
old=$(apt-cache madison postgresql-15 | awk -F'|' '{gsub(/ /, "", $2); print $2}' |
  while read -r v; do dpkg --compare-versions "$v" lt "$cand" && echo "$v"; done | head -1)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -a /var/lib/apt/lists "$tmp/lists"

# make_state DIR VERSION CONTROL_VERSION PACKAGE...: DIR/status = this machine's,
# with the PACKAGEs installed at VERSION (their control data from the lists'
# CONTROL_VERSION) and the headers not installed; VERSION "-": the PACKAGEs are
# not installed either.
make_state() {
  mkdir -p "$1/updates" "$1/info"
  python3 - "$@" <<'EOF'
import re, subprocess, sys
out, ver, control_ver = sys.argv[1:4]
out += "/status"
drop = {"Filename", "Size", "MD5sum", "SHA1", "SHA256", "SHA512", "Description-md5", "Tag"}
gone = {"postgresql-server-dev-15", "libpq-dev"}
same = set(sys.argv[4:])
if ver == "-":
    gone |= same
def control(name):
    text = subprocess.run(["apt-cache", "show", "%s=%s" % (name, control_ver)], capture_output=True,
                          text=True, check=True).stdout.strip().split("\n\n")[0]
    lines, keep = [], True
    for line in text.split("\n"):
        if not line[:1].isspace():
            key = line.split(":", 1)[0]
            keep = key not in drop
            if key == "Version":
                line = "Version: " + ver
        if keep:
            lines.append(line)
        if line.startswith("Package:"):
            lines.append("Status: install ok installed")
    return "\n".join(lines)
paras = []
for p in open("/var/lib/dpkg/status").read().split("\n\n"):
    m = re.match(r"Package: (\S+)", p)
    if not m:
        if p.strip():
            paras.append(p)
        continue
    if m.group(1) in gone:
        continue
    paras.append(control(m.group(1)) if m.group(1) in same else p)
open(out, "w").write("\n\n".join(paras) + "\n")
EOF
  safe_apt_conf "$1"
  printf 'Dir::State::status "%s/status";\n' "$1" >>"$1/apt.conf"
}
safe_apt_conf() {
  mkdir -p "$1/archives/partial"
  printf 'APT::Get::Simulate "true";\nDir::Bin::dpkg "/bin/false";\nDir::Cache::archives "%s/archives/";\nDir::State::lists "%s/lists/";\n' "$1" "$tmp" >"$1/apt.conf"
}

# run_deps DIR [ENV...]: install-deps.sh --dry-run against DIR's state; output in $out, status in $rc
run_deps() {
  local d=$1; shift
  out=$(env DPKG_ADMINDIR="$d" APT_CONFIG="$d/apt.conf" "$@" "$ROOT/scripts/install-deps.sh" --dry-run 2>&1)
  rc=$?
}
server_upgrade() { echo "$out" | grep -E '^Inst postgresql-[0-9]+ \['; }

# 1. server at an older version the lists still have: headers at that version, no upgrade
if [ -n "$old" ]; then
  make_state "$tmp/old" "$old" "$old" postgresql-15 postgresql-client-15 libpq5
  run_deps "$tmp/old"
  if [ $rc -ne 0 ]; then
    bad "postgresql-15 $old installed, headers missing: install-deps plans without stopping" "$out"
  elif server_upgrade >/dev/null; then
    bad "postgresql-15 $old installed, headers missing: no server upgrade planned" "$(server_upgrade)"
  else
    ok "postgresql-15 $old installed, headers missing: no server upgrade planned"
  fi
  if echo "$out" | grep -q "^Inst postgresql-server-dev-15 ($old "; then
    ok "the headers are installed at the server's version $old"
  else
    bad "the headers are installed at the server's version $old" "$out"
  fi
else
  skipped "older postgresql-15 installed" "the apt lists hold only $cand"
  skipped "headers at the server's version" "the apt lists hold only $cand"
fi

# 2. server at a version the lists no longer have: stop and say how to allow the upgrade
gone_ver="$cand~gone"
make_state "$tmp/gone" "$gone_ver" "$cand" postgresql-15
run_deps "$tmp/gone"
if [ $rc -ne 0 ] && echo "$out" | grep -q "STOPPED" && echo "$out" | grep -q "LLM_ALLOW_SERVER_UPGRADE=1" &&
  echo "$out" | grep -q "no longer have postgresql-server-dev-15 libpq-dev at that version"; then
  ok "headers for postgresql-15 $gone_ver not in the lists: stops, says so and how to allow it"
else
  bad "headers for postgresql-15 $gone_ver not in the lists: stops, says so and how to allow it" "rc=$rc
$out"
fi
run_deps "$tmp/gone" LLM_ALLOW_SERVER_UPGRADE=1
if [ $rc -eq 0 ] && echo "$out" | grep -q "^Inst postgresql-server-dev-15 ($cand "; then
  ok "LLM_ALLOW_SERVER_UPGRADE=1 lets it go ahead (headers $cand)"
else
  bad "LLM_ALLOW_SERVER_UPGRADE=1 lets it go ahead (headers $cand)" "rc=$rc
$out"
fi

# 3. no PostgreSQL 15 at all: a fresh install is not an upgrade
make_state "$tmp/fresh" - "$cand" postgresql-15 postgresql-client-15 postgresql postgresql-contrib
run_deps "$tmp/fresh"
if [ $rc -eq 0 ] && echo "$out" | grep -q "^Inst postgresql-15 (" && ! server_upgrade >/dev/null; then
  ok "no postgresql-15 installed: installs it, upgrades no server"
else
  bad "no postgresql-15 installed: installs it, upgrades no server" "rc=$rc
$out"
fi

# 4. this machine as it is: whatever the plan, no server upgrade
safe_apt_conf "$tmp/real"
out=$(APT_CONFIG="$tmp/real/apt.conf" "$ROOT/scripts/install-deps.sh" --dry-run 2>&1); rc=$?
if ! server_upgrade >/dev/null && { [ $rc -eq 0 ] || echo "$out" | grep -q STOPPED; }; then
  ok "this machine's own state: no server upgrade planned"
else
  bad "this machine's own state: no server upgrade planned" "rc=$rc
$out"
fi
finish
