#!/usr/bin/env python3
"""Golden embeddings of a decoder model by llama.cpp's llama-embedding.

    python3 scripts/oracle/make_embed_decoder_golden.py [LLAMA_BIN_DIR]

LLAMA_BIN_DIR: the oracle build's bin/ (default
~/.cache/pg_llm/llama.cpp-build/bin, scripts/build-llama-cpp.sh).  Never
run by the tests, which read what it writes.

The models: tools/make_synth_gguf.py arch qwen3 small, F16, seed 1, with
<arch>.pooling_type added (--pooling last, as Qwen3-Embedding declares it,
and --pooling mean): random weights of Qwen3's block (q/k norms, GQA) at CI
size, written into build/synth/ like the architecture goldens' models.  For
each model and each prompt, llama-embedding runs the prompt alone (-t 2,
the file's own pooling, --embd-normalize 2: L2, as the engine normalises a
model that declares a pooling) and prints the prompt's token ids
(--verbose-prompt) and the vector (--embd-output-format json, 7 decimals).

Output, test/golden/embed_decoder/:
  models.tsv          family <TAB> pooling <TAB> sha256 of the file
  qwen3-<pooling>.tsv one line per prompt:
                      prompt (\\t \\n \\\\ escaped) <TAB> ids (comma-separated)
                      <TAB> vector (comma-separated, as llama-embedding printed it)
"""
import hashlib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "test", "golden", "embed_decoder")
SYNTH = os.path.join(ROOT, "build", "synth")

PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "How do I reset my password if I no longer have access to my email?",
    "PostgreSQL stores a table as a heap of pages; each row version carries the ids of the "
    "transactions that created and deleted it, so readers never block writers.",
    "I was charged twice for my subscription this month, please refund the second charge.",
    "a",
    "Semantic search finds documents by meaning rather than by keywords: the query and every "
    "document become vectors, and the nearest vectors are the most similar texts. An index over "
    "the vectors answers a query without reading every row of the table.",
    "Error 403 on login since 9:30, on every browser.",
]

POOLINGS = ["last", "mean"]


def sha256_of(path):
    d = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            d.update(b)
    return d.hexdigest()


def escape(s):
    return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def embed(bin_dir, model, prompt):
    # this build's llama-embedding sometimes exits 0 with its stdout cut short: run it again then
    for _ in range(20):
        out = subprocess.run([os.path.join(bin_dir, "llama-embedding"), "-m", model, "-p", prompt, "-t", "2",
                              "--embd-normalize", "2", "--embd-output-format", "json", "--verbose-prompt"],
                             check=True, capture_output=True, text=True).stdout
        m = re.search(r"^\{$", out, re.M)  # the JSON's first line (a token's text may hold a brace)
        if m and out.rstrip().endswith("}"):
            break
    else:
        sys.exit("llama-embedding: no complete output for %r" % prompt)
    head, body = out[:m.start()], out[m.start():]
    ids = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> '", head, re.M)]
    data = json.loads(body)["data"]
    if len(data) != 1:
        sys.exit("llama-embedding: %d vectors for one prompt" % len(data))
    return ids, data[0]["embedding"]


def main():
    bin_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.expanduser("~/.cache/pg_llm/llama.cpp-build/bin")
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(SYNTH, exist_ok=True)
    rows = []
    for pooling in POOLINGS:
        model = os.path.join(SYNTH, "qwen3-embed-%s.gguf" % pooling)
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "make_synth_gguf.py"), "arch", "qwen3", "small",
                        model, "--type", "F16", "--seed", "1", "--pooling", pooling], check=True)
        rows.append("qwen3\t%s\t%s\n" % (pooling, sha256_of(model)))
        with open(os.path.join(OUT, "qwen3-%s.tsv" % pooling), "w") as f:
            for p in PROMPTS:
                ids, vec = embed(bin_dir, model, p)
                f.write("%s\t%s\t%s\n" % (escape(p), ",".join(map(str, ids)), ",".join(repr(float(x)) for x in vec)))
    with open(os.path.join(OUT, "models.tsv"), "w") as f:
        f.writelines(rows)


if __name__ == "__main__":
    main()
