#!/usr/bin/env bash
# Goldens of the synthetic architecture models with llama.cpp (the version
# vendored in llama-cpp-python 0.3.36, built by scripts/build-llama-cpp.sh).
#
#   scripts/oracle/make_arch_golden.sh [FAMILY...]      write test/golden/arch/FAMILY-{f16,q8_0,q4_k_m}.{tsv,f16}
#                                                        and the models' sha256 in test/golden/arch/models.tsv
#   scripts/oracle/make_arch_golden.sh --check [FAMILY...]
#                                                        rerun the oracle and compare with the committed files
#
# The models are tools/make_synth_gguf.py arch FAMILY small (seed 1), F16 and
# Q8_0 (written by the generator: ggml's quantize_row_q8_0_ref of the same
# random values), into build/synth/; the unit test regenerates them there
# and checks their sha256 against models.tsv.  The oracle runs twice and
# must agree byte for byte.  Env: LLM_ORACLE_CACHE (default ~/.cache/pg_llm).
set -euo pipefail
cd "$(dirname "$0")/../.."

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
families=("$@")
[ ${#families[@]} -gt 0 ] || families=(qwen2 qwen3 llama31 phi3 gemma2 granite smollm3)
CACHE=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}
SRC=$CACHE/llama_cpp_python-0.3.36/vendor/llama.cpp
BUILD=$(scripts/build-llama-cpp.sh | tail -1)
BIN=$BUILD/bin/pg_llm-arch-golden
g++ -std=c++17 -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" \
	scripts/oracle/arch_golden.cpp -o "$BIN" \
	-L"$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin"

out=test/golden/arch
mkdir -p "$out" build/synth
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the prompts: token ids (the cut vocabulary has 384 tokens; 17.. are not special)
prompts=$(python3 - <<'PY'
import random
r = random.Random(7)
for pid, n in (("p7", 7), ("p24", 24), ("p40", 40)):
    print(pid + ":" + ",".join(str(r.randrange(17, 384)) for _ in range(n)))
PY
)
for fam in "${families[@]}"; do
	for type in ${LLM_ARCH_TYPES:-F16 Q8_0 Q4_K_M}; do
		lt=$(echo "$type" | tr 'A-Z' 'a-z')
		size=small
		if [ "$type" = Q4_K_M ]; then
			size=small-k
			model=$out/q4_k_m/$fam.gguf
			mkdir -p "$out/q4_k_m"
			python3 tools/make_synth_gguf.py arch "$fam" small-k "$tmp/k-f16.gguf" --type F16 >"$tmp/gen.txt"
			if [ $check = 1 ]; then model=$tmp/k-q4_k_m.gguf; fi
			nice "$BUILD/bin/llama-quantize" "$tmp/k-f16.gguf" "$model" Q4_K_M 2 >"$tmp/quant.log" 2>&1 ||
				{ tail "$tmp/quant.log" >&2; exit 1; }
		else
			model=build/synth/$fam-small-$lt.gguf
			python3 tools/make_synth_gguf.py arch "$fam" small "$model" --type "$type" >"$tmp/gen.txt"
		fi
		sha=$(sha256sum "$model" | cut -d' ' -f1)
		for run in 1 2; do
			# shellcheck disable=SC2086
			"$BIN" "$model" "$tmp/$run" $prompts 2>/dev/null
		done
		cmp -s "$tmp/1.tsv" "$tmp/2.tsv" && cmp -s "$tmp/1.f16" "$tmp/2.f16" ||
			{ echo "make_arch_golden: $fam $type: two oracle runs differ" >&2; exit 1; }
		if [ $check = 1 ]; then
			if cmp -s "$tmp/1.tsv" "$out/$fam-$lt.tsv" && cmp -s "$tmp/1.f16" "$out/$fam-$lt.f16" &&
				grep -q "^$fam	$size	$type	$sha$" "$out/models.tsv"; then
				echo "make_arch_golden: $fam $type: same as committed"
			else
				echo "make_arch_golden: $fam $type: DIFFERS from committed" >&2; exit 1
			fi
			continue
		fi
		cp "$tmp/1.tsv" "$out/$fam-$lt.tsv"
		cp "$tmp/1.f16" "$out/$fam-$lt.f16"
		touch "$out/models.tsv"
		grep -v "^$fam	$size	$type	" "$out/models.tsv" >"$tmp/m" || true
		printf '%s\t%s\t%s\t%s\n' "$fam" "$size" "$type" "$sha" >>"$tmp/m"
		sort "$tmp/m" >"$out/models.tsv"
		echo "make_arch_golden: $fam $type ($sha): wrote $out/$fam-$lt.{tsv,f16}"
	done
done
