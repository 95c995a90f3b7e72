#!/usr/bin/env bash
# The bare engine's embedding speed against llama.cpp's llama-embedding on
# the same GGUF, the same texts and the same threads:
#
#   bench/embed_engine.sh [MODEL.gguf] [THREADS] [ROUNDS]
#
# Texts: the golden texts of test/golden/embed_minilm.tsv that
# sentence-transformers does not cut (under 256 tokens; llama-embedding has
# no input limit and aborts on an input past the model's 512 positions),
# all submitted at once (llm-cli embed --batch: the engine batches them;
# llama-embedding: one file, <#sep#>-separated, -b/-ub 8192 so it batches
# as many sequences as fit).  Both tokenize alike (llama.cpp's WordPiece).
# Each round runs ours then llama.cpp's; per run: wall seconds, CPU seconds
# (user + system, which the other processes of a shared host do not
# inflate), tokens, tokens per wall second and per CPU second.  Needs
# build/llm-cli and the oracle build's llama-embedding
# (scripts/build-llama-cpp.sh; LLAMA_BIN overrides its directory).
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-models/all-MiniLM-L6-v2.F16.gguf}
threads=${2:-2}
rounds=${3:-2}
bin=${LLAMA_BIN:-$HOME/.cache/pg_llm/llama.cpp-build/bin}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open("test/golden/embed_minilm.tsv") if not l.startswith("#")]
keep = [r for r in rows if len(r[2].split(",")) < 256]
open(sys.argv[1] + "/lines.txt", "w").write("".join(r[1] + "\n" for r in keep))
raw = [r[1].replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\") for r in keep]
open(sys.argv[1] + "/sep.txt", "w").write("<#sep#>".join(raw))
open(sys.argv[1] + "/tokens", "w").write(str(sum(len(r[2].split(",")) for r in keep)))
print("%d texts, %d tokens" % (len(keep), sum(len(r[2].split(",")) for r in keep)))
PY
tokens=$(cat "$tmp/tokens")
timed() { # label command...: one line of figures
	local label=$1; shift
	/usr/bin/time -f "%e %U %S" -o "$tmp/time" "$@" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	read -r wall user sys <"$tmp/time"
	awk -v l="$label" -v w="$wall" -v u="$user" -v s="$sys" -v t="$tokens" \
		'BEGIN { printf "%-10s wall %7.2f s  cpu %7.2f s  %d tokens  %8.1f tokens/s  %8.1f tokens/cpu-s\n", l, w, u + s, t, t / w, t / (u + s) }'
}
for r in $(seq "$rounds"); do
	timed pg_llm build/llm-cli embed -m "$model" -t "$threads" --batch "$tmp/lines.txt"
	timed llama.cpp env LD_LIBRARY_PATH="$bin" "$bin/llama-embedding" -m "$model" -f "$tmp/sep.txt" \
		--embd-separator '<#sep#>' --embd-output-format array -t "$threads" -c 8192 -b 8192 -ub 8192
done
