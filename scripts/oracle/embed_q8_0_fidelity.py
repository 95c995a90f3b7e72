#!/usr/bin/env python3
"""all-MiniLM-L6-v2 Q8_0: the engine's and llama.cpp's cosine with sentence-transformers.

    python3 scripts/oracle/embed_q8_0_fidelity.py GOLDEN.tsv MODEL.gguf [LLAMA_BIN_DIR] [LLM_CLI]

GOLDEN.tsv: scripts/oracle/embed_minilm.py's output (224 texts, their ids
as sentence-transformers builds them, its vectors).  MODEL.gguf: the file
to measure (scripts/fetch-model.sh minilm-q8 writes the Q8_0 one, or minilm
the F16 one).  LLAMA_BIN_DIR: the oracle build's bin/ (default
~/.cache/pg_llm/llama.cpp-build/bin); LLM_CLI: build/llm-cli.

Sides:
  pg_llm     llm-cli embed --token-ids --batch: every golden's ids at once
             (the model's pooling and L2 normalisation), so the comparison
             is of the arithmetic only, all 224 texts;
  llama.cpp  llama-embedding on each text (-t 2, the file's pooling, L2),
             over the texts it tokenizes into the golden's ids (llama.cpp
             does not cut at 256 tokens, and its WordPiece differs on a few
             scripts): the count compared is printed.
Prints per side: texts, the minimum and mean cosine, and the text of the
minimum.  Never run by the tests; docs/EMBEDDINGS.md records its output.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def unesc(s):
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), s)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def read_golden(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                continue
            i, text, ids, vec = line.rstrip("\n").split("\t")
            rows.append((unesc(text), [int(x) for x in ids.split(",")], [float(x) for x in vec.split()]))
    return rows


def ours(cli, model, rows):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        for _, ids, _ in rows:
            f.write(" ".join(map(str, ids)) + "\n")
        name = f.name
    out = subprocess.run([cli, "embed", "-m", model, "-t", "2", "--token-ids", "--batch", name],
                         check=True, capture_output=True, text=True).stdout
    os.unlink(name)
    return [[float(x) for x in line.split()] for line in out.splitlines() if line.strip()]


def llama(bin_dir, model, text):
    # this build's llama-embedding sometimes exits 0 with its stdout cut short: run it again then
    for _ in range(20):
        out = subprocess.run([os.path.join(bin_dir, "llama-embedding"), "-m", model, "-p", text, "-t", "2",
                              "-c", "1024", "-b", "1024", "-ub", "1024", "--embd-normalize", "2",
                              "--embd-output-format", "json", "--verbose-prompt"],
                             capture_output=True, text=True)
        if out.returncode != 0:
            return None, None
        s = out.stdout
        m = re.search(r"^\{$", s, re.M)  # the JSON's first line (a token's text may hold a brace)
        if m and s.rstrip().endswith("}"):
            head, body = s[:m.start()], s[m.start():]
            ids = [int(m.group(1)) for m in re.finditer(r"^\s*(\d+) -> '", head, re.M)]
            return ids, json.loads(body)["data"][0]["embedding"]
    return None, None


def report(name, cos, rows_used):
    worst = min(range(len(cos)), key=lambda k: cos[k])
    print("%s\t%d texts\tmin %.7f\tmean %.7f\tworst: %r" % (name, len(cos), cos[worst], sum(cos) / len(cos),
                                                             rows_used[worst][:60]))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    golden, model = sys.argv[1], sys.argv[2]
    bin_dir = sys.argv[3] if len(sys.argv) > 3 else os.path.expanduser("~/.cache/pg_llm/llama.cpp-build/bin")
    cli = sys.argv[4] if len(sys.argv) > 4 else os.path.join(ROOT, "build", "llm-cli")
    rows = read_golden(golden)
    vecs = ours(cli, model, rows)
    report("pg_llm", [cosine(v, r[2]) for v, r in zip(vecs, rows)], [r[0] for r in rows])
    cos, used = [], []
    for text, ids, want in rows:
        got_ids, v = llama(bin_dir, model, text)
        if got_ids == ids and v is not None:
            cos.append(cosine(v, want))
            used.append(text)
    report("llama.cpp", cos, used)


if __name__ == "__main__":
    main()
