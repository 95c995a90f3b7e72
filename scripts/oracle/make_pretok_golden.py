#!/usr/bin/env python3
"""Goldens for the pre-tokenizers that have no vocabulary file of their own.

Usage (from the repository root):
    scripts/oracle/make_pretok_golden.py [TOKENIZE_BIN]

For each pre-tokenizer name below, a vocabulary of the llama-cpp-python
0.3.36 sdist (vendor/llama.cpp/models/ggml-vocab-BASE.gguf) is relabelled:
only the value of tokenizer.ggml.pre is replaced (read back with the sdist's
gguf-py to check).  llama.cpp tokenizes the strings of
test/golden/tokenizer_inputs.txt and of BASE's .inp file with it
(scripts/oracle/tokenize.cpp, mode "plain": add_special and parse_special
off, i.e. `llama-tokenize --no-bos --no-parse-special`).  Writes
test/golden/tokenizer_pre/PRE.tsv: a first line "# base: BASE", then
"<hex of the UTF-8 input>\t<ids>" per string.  test_tokenizer_vocab applies
the same relabelling in memory and compares.

TOKENIZE_BIN defaults to ~/.cache/pg_llm/llama.cpp-build/bin/pg_llm-tokenize
(scripts/oracle/make_tokenizer_golden.sh gemma3 builds it).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

CACHE = os.environ.get("LLM_ORACLE_CACHE", os.path.expanduser("~/.cache/pg_llm"))
SRC = os.path.join(CACHE, "llama_cpp_python-0.3.36", "vendor", "llama.cpp")
MODELS = os.path.join(SRC, "models")
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(CACHE, "llama.cpp-build", "bin", "pg_llm-tokenize")
sys.path.insert(0, os.path.join(SRC, "gguf-py"))
import gguf  # noqa: E402

# pre-tokenizer name -> the sdist vocabulary it is tried on
RELABEL = {
    "default": "gpt-2",
    "llama3": "llama-bpe", "llama-v3": "llama-bpe", "falcon3": "llama-bpe", "pixtral": "llama-bpe",
    "dbrx": "llama-bpe", "smaug-bpe": "llama-bpe", "tekken": "llama-bpe",
    "deepseek-r1-qwen": "qwen2", "megrez": "qwen2", "stablelm2": "qwen2",
    "deepseek-v3": "deepseek-llm",
    "phi-2": "gpt-2", "olmo": "gpt-2", "jais": "gpt-2",
    "smollm": "starcoder", "codeshell": "starcoder", "exaone": "starcoder", "minerva-7b": "starcoder",
}

KEY = b"tokenizer.ggml.pre"


def relabel(data, pre):
    """data with the string value of tokenizer.ggml.pre replaced by pre."""
    needle = struct.pack("<Q", len(KEY)) + KEY + struct.pack("<I", 8)
    at = data.find(needle)
    if at < 0 or data.find(needle, at + 1) >= 0:
        sys.exit("relabel: tokenizer.ggml.pre not found exactly once")
    v = at + len(needle)
    (n,) = struct.unpack_from("<Q", data, v)
    new = pre.encode()
    return data[:v] + struct.pack("<Q", len(new)) + new + data[v + 8 + n:]


def inputs_of(base):
    with open("test/golden/tokenizer_inputs.txt", encoding="utf-8") as f:
        strs = [json.loads(line).encode("utf-8") for line in f if line.strip()]
    raw = open(os.path.join(MODELS, "ggml-vocab-%s.gguf.inp" % base), "rb").read()
    sep = b"\n__ggml_vocab_test__\n"
    pos = 0
    while pos < len(raw):
        nxt = raw.find(sep, pos)
        if nxt < 0:
            strs.append(raw[pos:])
            break
        strs.append(raw[pos:nxt])
        pos = nxt + len(sep)
    return strs


os.makedirs("test/golden/tokenizer_pre", exist_ok=True)
for pre, base in RELABEL.items():
    data = relabel(open(os.path.join(MODELS, "ggml-vocab-%s.gguf" % base), "rb").read(), pre)
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
        f.write(data)
        path = f.name
    try:
        field = gguf.GGUFReader(path).fields["tokenizer.ggml.pre"]
        got = bytes(field.parts[field.data[0]]).decode()
        if got != pre:
            sys.exit("relabel: read back %r, wanted %r" % (got, pre))
        strs = inputs_of(base)
        hexes = [s.hex() for s in strs]
        res = subprocess.run([BIN, path, "plain"], input="".join(h + "\n" for h in hexes).encode(),
                             check=True, capture_output=True).stdout.decode().split("\n")
        if len(res) != len(hexes) + 1 or res[-1] != "":
            sys.exit("tokenize: %d lines for %d inputs" % (len(res) - 1, len(hexes)))
    finally:
        os.unlink(path)
    with open("test/golden/tokenizer_pre/%s.tsv" % pre, "w") as out:
        out.write("# base: %s\n" % base)
        for h, ids in zip(hexes, res[:-1]):
            out.write("%s\t%s\n" % (h, ids))
    print("%s (on %s): %d strings -> test/golden/tokenizer_pre/%s.tsv" % (pre, base, len(hexes), pre))
