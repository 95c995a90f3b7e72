#!/usr/bin/env bash
# Weight-type goldens: one small synthetic llama model (tools/make_synth_gguf.py,
# preset tiny-256: every row a multiple of 256, seeded, F16) quantized by
# llama.cpp's llama-quantize into each type mix below, and llama.cpp's greedy
# continuations of test/golden/types/prompts.tsv on each, and the
# last-position logits of its logits prompts (golden.cpp, as make_golden.sh
# runs it).
#
#   scripts/oracle/make_types_golden.sh            models + goldens: writes
#       test/golden/types/models.tsv (mix, sha256 of the quantized file) and
#       test/golden/types/<MIX>/greedy.tsv, logits.tsv and logits/
#   scripts/oracle/make_types_golden.sh --models   only (re)make the models in
#       $LLM_TYPES_MODELS (default build/types-models) and check their sha256
#       against models.tsv (llama-quantize is deterministic: the goldens were
#       made from these very bytes)
#
# test/unit/test_types_golden.c compares the engine with the goldens on
# those models (scripts/check-weight-types.sh runs both steps).
# Env: LLM_ORACLE_CACHE (default ~/.cache/pg_llm), LLM_TYPES_MODELS.
set -euo pipefail
cd "$(dirname "$0")/../.."

MIXES="Q5_1 Q2_K Q3_K_S Q3_K_M Q5_K_M IQ4_NL IQ4_XS Q4_K_M"
OUT=test/golden/types
MODELS=${LLM_TYPES_MODELS:-build/types-models}
SEED=1
STD=0.08
BUILD=$(scripts/build-llama-cpp.sh | tail -1)
SRC=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}/llama_cpp_python-0.3.36/vendor/llama.cpp
QUANT=$BUILD/bin/llama-quantize
TOKSRC=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -x "$QUANT" ] || { echo "make_types_golden: $QUANT missing (scripts/build-llama-cpp.sh)" >&2; exit 1; }
[ -f "$TOKSRC" ] || { echo "make_types_golden: $TOKSRC missing (make model): the tokenizer comes from it" >&2; exit 1; }

mkdir -p "$MODELS"
python3 tools/make_synth_gguf.py extract-tokenizer "$TOKSRC" "$MODELS/tokenizer.gguf" >&2
python3 tools/make_synth_gguf.py write tiny-256 "$MODELS/base-f16.gguf" --tokenizer "$MODELS/tokenizer.gguf" \
	--type F16 --embd-type F16 --seed $SEED --std $STD >&2
for mix in $MIXES; do
	nice "$QUANT" "$MODELS/base-f16.gguf" "$MODELS/$mix.gguf" "$mix" 2 >"$MODELS/$mix.log" 2>&1 ||
		{ tail "$MODELS/$mix.log" >&2; exit 1; }
done

if [ "${1:-}" = "--models" ]; then
	bad=0
	while IFS=$'\t' read -r mix sum; do
		case $mix in '#'*|'') continue ;; esac
		sum=${sum%%	*}
		got=$(sha256sum "$MODELS/$mix.gguf" | cut -d' ' -f1)
		[ "$got" = "$sum" ] || { echo "make_types_golden: $mix.gguf sha256 $got, goldens made from $sum" >&2; bad=1; }
	done <"$OUT/models.tsv"
	[ $bad = 0 ] && echo "make_types_golden: models in $MODELS match $OUT/models.tsv" >&2
	exit $bad
fi

BIN=$BUILD/bin/pg_llm-golden
g++ -std=c++17 -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" \
	scripts/oracle/golden.cpp -o "$BIN" \
	-L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin"
# tier (test_types_golden.c): exact (every greedy continuation identical to
# llama.cpp's, the logits prompts' last-position logits bit-identical) for
# every mix: the engine follows each weight's arithmetic in llama.cpp (its
# ggml_vec_dot_* for one-token steps and short prompts, its tiled K-quant
# matmul for prompts of 8 tokens or more, its repacked Q4_K, Q2_K and
# IQ4_NL GEMV/GEMM, its last layer's batch of output rows); near-tie (each
# divergence at a top-2 margin below 0.1) is for a mix where it does not
tier() { echo exact; }
{
	echo "# mix	sha256 of the quantized model (tiny-256 seed $SEED std $STD, F16, then llama-quantize MIX)	tier"
	for mix in $MIXES; do
		printf '%s\t%s\t%s\n' "$mix" "$(sha256sum "$MODELS/$mix.gguf" | cut -d' ' -f1)" "$(tier "$mix")"
	done
} >"$OUT/models.tsv"
for mix in $MIXES; do
	tmp=$(mktemp -d)
	mkdir -p "$tmp/logits"
	nice "$BIN" "$MODELS/$mix.gguf" "$OUT/prompts.tsv" "$tmp" >"$tmp/log" 2>&1 || { tail "$tmp/log" >&2; exit 1; }
	rm -rf "$OUT/$mix/logits"
	mkdir -p "$OUT/$mix/logits"
	cp "$tmp/greedy.tsv" "$tmp/logits.tsv" "$OUT/$mix/"
	cp "$tmp"/logits/*.f32 "$OUT/$mix/logits/"
	rm -rf "$tmp"
	echo "make_types_golden: wrote $OUT/$mix/greedy.tsv, logits.tsv and logits/" >&2
done
