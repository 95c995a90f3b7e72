#!/usr/bin/env bash
# Build llama.cpp as vendored in the PyPI sdist of llama-cpp-python==0.3.36:
# the benchmark's peer (bench/harness/llamacpp.py) and the golden-file oracle
# (scripts/oracle/, test/golden/, test_kernels' bit-identity checks).  Cached
# outside the repo (never committed) in $CACHE/llama.cpp-build.  Prints the
# build directory on stdout (last line).
#
# CPU flags: GGML_NATIVE=OFF with explicit flags, the host's x86 features up to
# AVX512 + VBMI + VNNI + BF16, never AMX:
# - GGML_NATIVE=ON built binaries that crash on Sapphire Rapids hosts
#   (llama-server: illegal instruction, llama-bench: segmentation fault);
# - the committed SmolLM2 goldens come from such an AVX512 build without AMX
#   (their "# system:" header line), and AMX's matmuls and -march=native's
#   AVX512-FP16 vector arithmetic round differently;
# - pg_llm's CPU backend has no AMX kernels either (kernels/cpu/dispatch.h),
#   so the peer and pg_llm run the same instruction sets.
# (llama.cpp's run-time dispatch build, GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS,
# would load its AMX "sapphirerapids" backend on such hosts, and compiles 14
# CPU backends.)
#
# Every build is smoke-tested on the model in models/ (llama-bench, and
# llama-server answering one completion); the script fails loudly if either
# crashes, and writes what llama.cpp's CPU backend reported (its system_info
# line: SSE3 = 1 | ... | AVX512 = 1 | ..., with AMX_INT8 = 1 where it uses AMX)
# to $BUILD/cpu-backend.txt.  A cached build is reused only if it was made by
# this configuration and passed the smoke test ($BUILD/pg_llm-build.txt).
#
# Env: LLM_ORACLE_CACHE (default ~/.cache/pg_llm), LLM_SMOKE_MODEL (default
# models/SmolLM2-135M-Instruct.Q4_1.gguf), LLM_BUILD_JOBS (default nproc).
#
#   scripts/build-llama-cpp.sh --fetch
#
# only downloads and unpacks the sdist (no compiling) and prints its
# llama.cpp directory: `make test` runs the tokenizer battery on its
# vocabulary files (vendor/llama.cpp/models/ggml-vocab-*), and a failed
# download fails the command.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VER=0.3.36
CACHE=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}
SRC=$CACHE/llama_cpp_python-$VER/vendor/llama.cpp
MODEL=${LLM_SMOKE_MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}
JOBS=${LLM_BUILD_JOBS:-$(nproc)}

die() { echo "build-llama-cpp: $*" >&2; exit 1; }

have() { grep -qw "$1" /proc/cpuinfo; }

# x86 flags: what this host runs, capped at the goldens' set.
cpu_flags() {
	local f=()
	have sse4_2 && f+=(-DGGML_SSE42=ON) || f+=(-DGGML_SSE42=OFF)
	have avx && f+=(-DGGML_AVX=ON) || f+=(-DGGML_AVX=OFF)
	have f16c && f+=(-DGGML_F16C=ON) || f+=(-DGGML_F16C=OFF)
	have fma && f+=(-DGGML_FMA=ON) || f+=(-DGGML_FMA=OFF)
	have avx2 && f+=(-DGGML_AVX2=ON) || f+=(-DGGML_AVX2=OFF)
	have bmi2 && f+=(-DGGML_BMI2=ON) || f+=(-DGGML_BMI2=OFF)
	if have avx512f && have avx512cd && have avx512vl && have avx512dq && have avx512bw; then
		f+=(-DGGML_AVX512=ON -DGGML_AVX_VNNI=OFF)
		have avx512vbmi && f+=(-DGGML_AVX512_VBMI=ON) || f+=(-DGGML_AVX512_VBMI=OFF)
		have avx512_vnni && f+=(-DGGML_AVX512_VNNI=ON) || f+=(-DGGML_AVX512_VNNI=OFF)
		have avx512_bf16 && f+=(-DGGML_AVX512_BF16=ON) || f+=(-DGGML_AVX512_BF16=OFF)
	else
		# an AVX2 host as GGML_NATIVE=ON built it (the Gemma 3 goldens)
		have avx_vnni && f+=(-DGGML_AVX_VNNI=ON) || f+=(-DGGML_AVX_VNNI=OFF)
		f+=(-DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF)
	fi
	f+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
	echo "${f[@]}"
}

BUILD=$CACHE/llama.cpp-build
CPU_FLAGS="-DGGML_NATIVE=OFF $(cpu_flags)"
# llama-quantize makes the quantized synthetic models of the weight-type tests
# and benchmarks; llama-embedding is the embeddings oracle (an example, hence
# LLAMA_BUILD_EXAMPLES=ON; examples change no library's compile flags).
TARGETS="llama-server llama-bench llama-tokenize llama llama-quantize llama-embedding"
CONFIG="llama-cpp-python $VER: $CPU_FLAGS"
STAMP=$BUILD/pg_llm-build.txt

# Run llama-bench and llama-server briefly; fail loudly on a crash or no answer.
smoke() {
	local bin=$BUILD/bin log=$BUILD/smoke.log port pid ok=0 i
	[ -f "$MODEL" ] || die "smoke test needs $MODEL (make model, or set LLM_SMOKE_MODEL)"
	: >"$log"
	echo "build-llama-cpp: smoke test of $BUILD on $(basename "$MODEL")" >&2
	timeout 300 "$bin/llama-bench" -m "$MODEL" -p 16 -n 4 -r 1 -t 2 >>"$log" 2>&1 && i=0 || i=$?
	if [ "$i" != 0 ]; then
		tail -20 "$log" >&2
		die "SMOKE TEST FAILED: llama-bench exited with status $i (see $log): this build does not run here, or the model is bad"
	fi
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	# -lv 4: its system_info line (the CPU features) is logged at that verbosity
	"$bin/llama-server" -m "$MODEL" -t 2 -c 512 -lv 4 --host 127.0.0.1 --port "$port" >>"$log" 2>&1 &
	pid=$!
	for i in $(seq 1 240); do
		kill -0 "$pid" 2>/dev/null || break
		if curl -sf -m 60 "http://127.0.0.1:$port/completion" -H 'Content-Type: application/json' \
			-d '{"prompt": "The capital of France is", "n_predict": 4}' >>"$log" 2>&1; then
			ok=1
			break
		fi
		sleep 0.5
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		wait "$pid" 2>/dev/null || true
	else
		wait "$pid" 2>/dev/null && i=0 || i=$?
		tail -20 "$log" >&2
		die "SMOKE TEST FAILED: llama-server died with status $i (see $log): this build does not run here, or the model is bad"
	fi
	[ $ok = 1 ] || { tail -20 "$log" >&2; die "SMOKE TEST FAILED: llama-server gave no completion (see $log)"; }
	# the CPU features llama.cpp reported (bench/run's AMX column reads them)
	grep -E "system_info:" "$log" | sort -u >"$BUILD/cpu-backend.txt" || true
	echo "build-llama-cpp: smoke test passed: $(tr '\n' ' ' <"$BUILD/cpu-backend.txt")" >&2
}

mkdir -p "$CACHE"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
	tmp=$(mktemp -d)
	python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VER" -d "$tmp" >&2 ||
		die "could not download the llama-cpp-python $VER sdist from PyPI"
	tar xzf "$tmp"/llama_cpp_python-$VER.tar.gz -C "$CACHE" || die "could not unpack the sdist"
	rm -rf "$tmp"
fi
if [ "${1:-}" = --fetch ]; then
	[ -f "$SRC/models/ggml-vocab-llama-bpe.gguf" ] || die "the sdist at $SRC has no vocabulary files"
	echo "$SRC"
	exit 0
fi
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$CONFIG" ] &&
	[ -x "$BUILD/bin/llama-server" ] && [ -x "$BUILD/bin/llama-bench" ] &&
	[ -x "$BUILD/bin/llama-quantize" ] && [ -x "$BUILD/bin/llama-embedding" ]; then
	echo "$BUILD"
	exit 0
fi
command -v cmake >/dev/null || { apt-get install -y -qq cmake g++ >&2; }
command -v curl >/dev/null || die "curl is needed for the smoke test"
rm -f "$STAMP"
# every CPU option is given, so this also reconfigures a cache made otherwise
# (GGML_NATIVE=ON by an older version of this script)
echo "build-llama-cpp: building $CONFIG" >&2
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
	$CPU_FLAGS -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON \
	-DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DGGML_CUDA=OFF >&2
# shellcheck disable=SC2086
cmake --build "$BUILD" -j"$JOBS" --target $TARGETS >&2
smoke
echo "$CONFIG" >"$STAMP"
echo "$BUILD"
