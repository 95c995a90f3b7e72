#!/usr/bin/env bash
# Every weight type end to end against llama.cpp on a machine with the
# oracle build: makes the synthetic models with llama-quantize
# (scripts/oracle/make_types_golden.sh --models: the same bytes as the
# goldens were made from, sha256 checked) and runs test_types_golden on them.
# CI has no oracle build, so test_types_golden reports those checks skipped
# there; the kernels themselves are checked everywhere by test_kernels_types
# and test_quant_golden.
set -euo pipefail
cd "$(dirname "$0")/.."
export LLM_TYPES_MODELS=${LLM_TYPES_MODELS:-build/types-models}
scripts/oracle/make_types_golden.sh --models
nice make -s -j2 build/test/test_types_golden
exec build/test/test_types_golden
