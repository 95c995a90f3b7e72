#!/usr/bin/env python3
"""Golden dequantizations of every weight type pg_llm computes with.

Random blocks of each type (random bytes, with every fp16 scale field
replaced by a random finite half so that no block decodes to inf/NaN; the
float types get random finite values) and their dequantization by the
gguf Python package (PyPI `gguf`, gguf.quants.dequantize), written to
test/golden/quant/dequant.tsv:

    # gguf <version>
    TYPE <tab> n_elements <tab> blocks (hex) <tab> float32 little-endian (hex)

test/unit/test_quant_golden.c checks that pg_llm's reference
dequantization (llm_dequantize_row) gives the same bits.  The blocks of the
types gguf can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) come from
gguf.quants.quantize of random floats; one such row is added per type so
that quantizer-made blocks are covered too.

Usage: scripts/oracle/make_quant_golden.py [--seed N] [--out PATH]
"""
import argparse
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize, quantize

# (type, number of elements of the random row)
TYPES = [
    (T.F32, 64), (T.F16, 64), (T.BF16, 64),
    (T.Q4_0, 256), (T.Q4_1, 256), (T.Q5_0, 256), (T.Q5_1, 256), (T.Q8_0, 256),
    (T.Q2_K, 768), (T.Q3_K, 768), (T.Q4_K, 768), (T.Q5_K, 768), (T.Q6_K, 768),
    (T.IQ4_NL, 256), (T.IQ4_XS, 768),
]

# byte offsets of the fp16 fields inside one block
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0], T.IQ4_XS: [0],
}

QUANTIZABLE = {T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}


def random_halves(rng, n):
    # magnitudes over many binades, some subnormal, both signs
    mag = np.exp2(rng.uniform(-26, 2, n)).astype(np.float32)
    sign = np.where(rng.random(n) < 0.5, -1, 1).astype(np.float32)
    return (mag * sign).astype(np.float16)


def random_row(rng, qtype, n):
    if qtype == T.F32:
        return (rng.standard_normal(n) * np.exp2(rng.uniform(-20, 20, n))).astype(np.float32).view(np.uint8)
    if qtype == T.F16:
        return random_halves(rng, n).view(np.uint8)
    if qtype == T.BF16:
        f = (rng.standard_normal(n) * np.exp2(rng.uniform(-20, 20, n))).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    block_elems, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    nb = n // block_elems
    data = rng.integers(0, 256, (nb, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        data[:, off:off + 2] = random_halves(rng, nb).view(np.uint8).reshape(nb, 2)
    return data.reshape(-1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=20261205)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                  "test", "golden", "quant", "dequant.tsv"))
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    lines = ["# gguf %s (gguf.quants.dequantize), seed %d" % (
        getattr(gguf, "__version__", None) or __import__("importlib.metadata").metadata.version("gguf"),
        args.seed)]
    for qtype, n in TYPES:
        rows = [random_row(rng, qtype, n)]
        if qtype in QUANTIZABLE:
            x = (rng.standard_normal((1, n)) * 0.05).astype(np.float32)
            rows.append(quantize(x, qtype).reshape(-1))
        for raw in rows:
            raw = np.ascontiguousarray(raw, dtype=np.uint8)
            ref = dequantize(raw, qtype).astype(np.float32).reshape(-1)
            assert ref.size == n and np.all(np.isfinite(ref)), qtype.name
            lines.append("%s\t%d\t%s\t%s" % (qtype.name, n, raw.tobytes().hex(),
                                             ref.astype("<f4").tobytes().hex()))
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d rows)" % (args.out, len(lines) - 1), file=sys.stderr)


if __name__ == "__main__":
    main()
