#!/usr/bin/env bash
# The Python packages the model converter (tools/convert_bert_gguf.py) needs,
# pinned, installed from PyPI with pip into a directory of their own (the
# system's Python packages are left alone; python3-pip comes from
# scripts/install-deps.sh, which runs this script):
#
#   scripts/install-python-deps.sh [--print-path]
#
# The directory is $LLM_PYTHON_PKGS (default ~/.cache/pg_llm/convert-pkgs);
# run the converter with PYTHONPATH set to it.  Idempotent: nothing is
# installed when python3 already imports the pinned versions (from the
# directory or elsewhere).  --print-path: print the directory
# after installing.  The pins are part of a converted file's identity:
# scripts/fetch-model.sh checks the sha256 these versions reproduce.
set -euo pipefail
DIR=${LLM_PYTHON_PKGS:-$HOME/.cache/pg_llm/convert-pkgs}
PINS="gguf==0.19.0 safetensors==0.8.0 numpy==2.4.6"
print=0
case "${1:-}" in
--print-path) print=1 ;;
"") ;;
*) echo "usage: $0 [--print-path]" >&2; exit 2 ;;
esac

have_pins() {
	PYTHONPATH=$DIR python3 - $PINS <<'PY' 2>/dev/null
import sys
from importlib.metadata import distributions
have = {d.metadata["Name"].lower(): d.version for d in distributions()}
for req in sys.argv[1:]:
    name, ver = req.split("==")
    if have.get(name) != ver:
        sys.exit(1)
import gguf, numpy, safetensors  # importable from here
PY
}

if ! have_pins; then
	rm -rf "$DIR"
	mkdir -p "$DIR"
	# shellcheck disable=SC2086
	python3 -m pip install -q --disable-pip-version-check --no-warn-script-location --target "$DIR" $PINS >&2
	have_pins || { echo "install-python-deps: $DIR lacks $PINS after installing" >&2; exit 1; }
	echo "install-python-deps: $PINS in $DIR" >&2
fi
[ $print = 0 ] || echo "$DIR"
