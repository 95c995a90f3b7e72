#!/usr/bin/env bash
# Regenerate the oracle golden files with llama.cpp (the version vendored in
# llama-cpp-python 0.3.36, built by scripts/build-llama-cpp.sh).
#
#   scripts/oracle/make_golden.sh [smollm2]          write test/golden/{greedy.tsv,logits.tsv,logits/*.f32}
#   scripts/oracle/make_golden.sh gemma3             write test/golden/gemma3/{greedy.tsv,logits.tsv,logits/*.f16}
#                                                    (prompts from scripts/oracle/prompts_gemma3.py)
#   scripts/oracle/make_golden.sh [smollm2|gemma3] --noise
#                                                    print the llama.cpp-vs-llama.cpp noise floor
#   scripts/oracle/make_golden.sh [smollm2|gemma3] --check [ID...]
#                                                    run the generator once on the prompts ID...
#                                                    (default: all) and compare with the committed
#                                                    files: header lines, greedy rows, logits rows
#                                                    and logit files byte for byte; writes nothing
#
# Runs the generator twice and fails unless both runs are byte-identical.
# Env: LLM_TEST_MODEL (the model file; default per name: models/SmolLM2-135M-Instruct.Q4_1.gguf,
#      models/gemma-3-270m-q4_k_m.gguf), LLM_ORACLE_CACHE (default ~/.cache/pg_llm).
set -euo pipefail
cd "$(dirname "$0")/../.."

name=smollm2
case "${1:-}" in
smollm2|gemma3) name=$1; shift ;;
esac
case $name in
smollm2) MODEL=${LLM_TEST_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}; out=test/golden; fmt=() ;;
gemma3) MODEL=${LLM_TEST_MODEL:-models/gemma-3-270m-q4_k_m.gguf}; out=test/golden/gemma3; fmt=(--f16-logits)
	python3 scripts/oracle/prompts_gemma3.py >&2 ;;
esac
CACHE=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}
SRC=$CACHE/llama_cpp_python-0.3.36/vendor/llama.cpp
BUILD=$CACHE/llama.cpp-build
# always through the script: it rebuilds a cache made with other CPU flags
# (GGML_NATIVE=ON, AMX), whose arithmetic is not the goldens'
BUILD=$(scripts/build-llama-cpp.sh | tail -1)
[ -f "$MODEL" ] || { echo "make_golden: model $MODEL not found (run scripts/fetch-model.sh $name)" >&2; exit 1; }

BIN=$BUILD/bin/pg_llm-golden
g++ -std=c++17 -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" \
	scripts/oracle/golden.cpp -o "$BIN" \
	-L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin"

if [ "${1:-}" = "--noise" ]; then
	exec "$BIN" "$MODEL" "$out/prompts.tsv" --noise
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = "--check" ]; then
	shift
	ids=" $* "
	awk -F'\t' -v ids="$ids" '/^#/ || ids == "  " || index(ids, " " $1 " ")' "$out/prompts.tsv" >"$tmp/prompts.tsv"
	mkdir -p "$tmp/new/logits"
	"$BIN" "$MODEL" "$tmp/prompts.tsv" "$tmp/new" "${fmt[@]}"
	python3 - "$out" "$tmp/new" <<'EOF'
import re, sys
old, new = sys.argv[1:]
bad = n = 0
def rows(path):
    heads, body = [], {}
    for line in open(path):
        if line.startswith("#"):
            heads.append(line)
        else:
            body[line.split("\t", 1)[0]] = line.rstrip("\n").split("\t")
    return heads, body
for name in ("greedy.tsv", "logits.tsv"):
    oh, ob = rows("%s/%s" % (old, name))
    nh, nb = rows("%s/%s" % (new, name))
    if oh != nh:
        print("make_golden: %s: header lines differ" % name, file=sys.stderr)
        bad += 1
    for pid, cols in nb.items():
        n += 1
        ocols = ob.get(pid)
        # the logit file's name counts the prompts run; compare its bytes instead
        files = [i for i, c in enumerate(cols) if re.fullmatch(r"logits_\d+\.f(16|32)", c)]
        same = ocols is not None and len(ocols) == len(cols) and all(
            cols[i] == ocols[i] for i in range(len(cols)) if i not in files)
        for i in files if same else ():
            same = same and open("%s/logits/%s" % (new, cols[i]), "rb").read() == \
                open("%s/logits/%s" % (old, ocols[i]), "rb").read()
        if not same:
            print("make_golden: %s %s differs" % (name, pid), file=sys.stderr)
            bad += 1
print("make_golden: --check: %d prompts compared with %s, %d differences" % (n, old, bad), file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
	exit
fi

for run in 1 2; do
	mkdir -p "$tmp/$run/logits"
	"$BIN" "$MODEL" "$out/prompts.tsv" "$tmp/$run" "${fmt[@]}"
done
if ! diff -r "$tmp/1" "$tmp/2" >/dev/null; then
	echo "make_golden: two oracle runs differ; refusing to write goldens" >&2
	diff -r "$tmp/1" "$tmp/2" | head >&2
	exit 1
fi
rm -rf "$out/logits"
mkdir -p "$out/logits"
cp "$tmp/1/greedy.tsv" "$tmp/1/logits.tsv" "$out/"
cp "$tmp/1/logits/"* "$out/logits/"
echo "make_golden: wrote $out/greedy.tsv $out/logits.tsv $out/logits/ (two runs identical)" >&2
du -sh "$out" >&2
