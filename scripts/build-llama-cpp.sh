#!/usr/bin/env bash
# Build the test/benchmark oracle: llama.cpp as vendored in the PyPI sdist of
# llama-cpp-python==0.3.36. Cached outside the repo (never committed).
# Prints the build directory on stdout (last line).
set -euo pipefail
VER=0.3.36
CACHE=${LLM_ORACLE_CACHE:-$HOME/.cache/pg_llm}
SRC=$CACHE/llama_cpp_python-$VER/vendor/llama.cpp
BUILD=$CACHE/llama.cpp-build
mkdir -p "$CACHE"
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VER" -d "$tmp" >&2
  tar xzf "$tmp"/llama_cpp_python-$VER.tar.gz -C "$CACHE"
  rm -rf "$tmp"
fi
if [ ! -x "$BUILD/bin/llama-server" ] || [ ! -x "$BUILD/bin/llama-bench" ]; then
  command -v cmake >/dev/null || { apt-get install -y -qq cmake g++ >&2; }
  cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DGGML_CUDA=OFF >&2
  cmake --build "$BUILD" -j"$(nproc)" --target llama-server llama-bench llama-tokenize llama >&2
fi
echo "$BUILD"
