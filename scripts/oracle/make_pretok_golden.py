#!/usr/bin/env python3
"""Goldens for the pre-tokenizers that have no vocabulary file of their own,
and for WordPiece's normalizer switches.

Usage (from the repository root):
    scripts/oracle/make_pretok_golden.py [TOKENIZE_BIN [NAME...]]
(NAMEs: only those goldens, e.g. tekken or bert-bge.cased)

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

WordPiece: bert-bge has no tokenizer.ggml.normalizer.* keys (so llama.cpp
lowercases and strips accents); for each setting in NORMALIZER the keys are
added (one bool KV inserted before the first one, the header's KV count
raised, 32 zero bytes of padding appended) and the same strings tokenized:
test/golden/tokenizer_pre/bert-bge.NAME.tsv, with "# bool: KEY=0|1" lines
after the base line.

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

# name -> normalizer keys added to bert-bge
NORMALIZER = {
    "cased": {"tokenizer.ggml.normalizer.lowercase": False},
    "cased-strip-accents": {"tokenizer.ggml.normalizer.lowercase": False,
                            "tokenizer.ggml.normalizer.strip_accents": True},
    "keep-accents": {"tokenizer.ggml.normalizer.lowercase": True,
                     "tokenizer.ggml.normalizer.strip_accents": False},
}


def add_bool(data, key, value):
    """data with a bool KV key = value inserted after the 24-byte header."""
    (n_kv,) = struct.unpack_from("<Q", data, 16)
    k = key.encode()
    kv = struct.pack("<Q", len(k)) + k + struct.pack("<I", 7) + bytes([1 if value else 0])
    return data[:16] + struct.pack("<Q", n_kv + 1) + kv + data[24:] + bytes(32)


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


def write_golden(name, base, data, header, check):
    with tempfile.NamedTemporaryFile(suffix=".gguf", delete=False) as f:
        f.write(data)
        path = f.name
    try:
        check(gguf.GGUFReader(path).fields)
        strs = inputs_of(base)
        hexes = [s.hex() for s in strs]
        res = subprocess.run([BIN, path, "plain"], input="".join(h + "\n" for h in hexes).encode(),
                             check=True, capture_output=True).stdout.decode().split("\n")
        if len(res) != len(hexes) + 1 or res[-1] != "":
            sys.exit("tokenize: %d lines for %d inputs" % (len(res) - 1, len(hexes)))
    finally:
        os.unlink(path)
    with open("test/golden/tokenizer_pre/%s.tsv" % name, "w") as out:
        out.write("# base: %s\n" % base + header)
        for h, ids in zip(hexes, res[:-1]):
            out.write("%s\t%s\n" % (h, ids))
    print("%s (on %s): %d strings -> test/golden/tokenizer_pre/%s.tsv" % (name, base, len(hexes), name))


def check_pre(pre):
    def check(fields):
        field = fields["tokenizer.ggml.pre"]
        got = bytes(field.parts[field.data[0]]).decode()
        if got != pre:
            sys.exit("relabel: read back %r, wanted %r" % (got, pre))
    return check


def check_bools(keys):
    def check(fields):
        for k, v in keys.items():
            if bool(fields[k].contents()) != v:
                sys.exit("add_bool: read back %s = %r, wanted %r" % (k, fields[k].contents(), v))
    return check


os.makedirs("test/golden/tokenizer_pre", exist_ok=True)
only = sys.argv[2:]
for pre, base in RELABEL.items():
    if only and pre not in only:
        continue
    data = relabel(open(os.path.join(MODELS, "ggml-vocab-%s.gguf" % base), "rb").read(), pre)
    write_golden(pre, base, data, "", check_pre(pre))
for name, keys in NORMALIZER.items():
    if only and "bert-bge." + name not in only:
        continue
    data = open(os.path.join(MODELS, "ggml-vocab-bert-bge.gguf"), "rb").read()
    for k, v in keys.items():
        data = add_bool(data, k, v)
    header = "".join("# bool: %s=%d\n" % (k, v) for k, v in keys.items())
    write_golden("bert-bge." + name, "bert-bge", data, header, check_bools(keys))
