#!/usr/bin/env bash
# The architecture families on their real vocabularies, against llama.cpp
# (the version vendored in llama-cpp-python 0.3.36, built by
# scripts/build-llama-cpp.sh): for each family whose vocabulary the llama.cpp
# sources ship (ggml-vocab-{qwen2,llama-bpe,phi-3}.gguf), a synthetic model
# of the small widths with that whole vocabulary (tools/make_synth_gguf.py
# arch FAMILY vocab, F16, seed 1), then
#   tokens: a few texts tokenized by llm-cli and by llama.cpp
#           (llama_tokenize, no BOS, no special parsing): identical ids;
#   logits: llama.cpp's ids of those texts as prompts, llama.cpp's logits
#           and greedy tokens (arch_golden.cpp) against the engine's
#           (test_arch_golden with LLM_ARCH_MODEL: tier S).
# Nothing is committed: the goldens (tens of MB of logits over the whole
# vocabulary) are made on the spot in build/arch-vocab/.
#
#   scripts/oracle/check_arch_vocab.sh [FAMILY...]   (default: qwen2 qwen3 llama31 phi3 smollm3)
#
# Env: LLM_ORACLE_CACHE (default ~/.cache/pg_llm).
set -euo pipefail
cd "$(dirname "$0")/../.."

families=("$@")
[ ${#families[@]} -gt 0 ] || families=(qwen2 qwen3 llama31 phi3 smollm3)
CACHE=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}
SRC=$CACHE/llama_cpp_python-0.3.36/vendor/llama.cpp
BUILD=$(scripts/build-llama-cpp.sh | tail -1)
for tool in arch_golden tokenize; do
	g++ -std=c++17 -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" \
		"scripts/oracle/$tool.cpp" -o "$BUILD/bin/pg_llm-${tool/_/-}" \
		-L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin"
done
nice make -s -j2 build/llm-cli build/test/test_arch_golden >&2
out=build/arch-vocab
mkdir -p "$out" build/synth
texts=(
	"The quick brown fox jumps over the lazy dog. It's 2024, isn't it?"
	"def add(a, b):\n    return a + b  # sum of 3.14 and 42"
	"Grüße aus Zürich! 東京は晴れです。 Привет, мир 👋"
)
status=0
for fam in "${families[@]}"; do
	model=build/synth/$fam-vocab-f16.gguf
	[ -f "$model" ] || python3 tools/make_synth_gguf.py arch "$fam" vocab "$model" --vocab-dir "$SRC/models" >&2
	prompts=()
	for i in "${!texts[@]}"; do
		text=$(printf '%b' "${texts[$i]}")
		theirs=$(printf '%s' "$text" | od -An -tx1 -v | tr -d ' \n' | { cat; echo; } |
			"$BUILD/bin/pg_llm-tokenize" "$model" plain 2>/dev/null)
		ours=$(build/llm-cli tokenize -m "$model" -- "$text")
		if [ "$ours" = "$theirs" ]; then
			echo "check_arch_vocab: $fam text $i: $(echo "$ours" | wc -w) tokens, identical to llama.cpp"
		else
			echo "check_arch_vocab: $fam text $i: tokens DIFFER: ours [$ours] llama.cpp [$theirs]" >&2
			status=1
		fi
		prompts+=("t$i:${theirs// /,}")
	done
	"$BUILD/bin/pg_llm-arch-golden" "$model" "$out/$fam-f16" "${prompts[@]}" 2>/dev/null
	if LLM_ARCH_MODEL=$model LLM_ARCH_GOLDEN_DIR=$out build/test/test_arch_golden "$fam" >"$out/$fam.log" 2>&1; then
		echo "check_arch_vocab: $fam logits: $(grep "^# $fam F16" "$out/$fam.log" | sed 's/^# //')"
	else
		grep -v '^ok' "$out/$fam.log" >&2
		status=1
	fi
done
exit $status
