#!/usr/bin/env python3
"""make_synth_gguf.py - synthetic llama GGUF models with random weights.

For GPU benchmarks (bench/gpu-check) on a machine that has no copy of the
real models: models in the shapes of SmolLM2-135M, Llama-3.2-1B and
Llama-3.1-8B are written there with random weights.  The tokenizer is the
real SmolLM2 one (gpt2 BPE, pre "smollm"), copied from the real model's
metadata into a small tokenizer-only GGUF beforehand; for vocabularies
larger than its 49152 tokens the vocabulary is padded with "<|reserved_N|>"
tokens of type UNUSED (5).

    make_synth_gguf.py extract-tokenizer SRC.gguf OUT.gguf
    make_synth_gguf.py write NAME OUT.gguf --tokenizer TOK.gguf [--type Q4_1] [--embd-type Q8_0] [--seed S]
    make_synth_gguf.py config NAME      # JSON: shapes, parameter count (for HF transformers, rooflines)
    make_synth_gguf.py list

Format: GGUF v3 as the GGUF specification describes it (little-endian;
metadata key/values; tensor infos with ne[0] = row length; data aligned to
general.alignment = 32).  Block layouts (ggml's block structs): Q4_1 = f16 d, f16 m, 16 bytes of nibbles
(value = q*d + m); Q8_0 = f16 d, 32 int8 (value = q*d); F16; F32.
Weights are uniform with standard deviation --std (0.02 as HF's
initializer_range); norm weights are 1.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
ALIGN = 32

# value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
              T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}

# tensor types
GGML_F32, GGML_F16, GGML_Q4_1, GGML_Q8_0 = 0, 1, 3, 8
TYPE_IDS = {"F32": GGML_F32, "F16": GGML_F16, "Q4_1": GGML_Q4_1, "Q8_0": GGML_Q8_0}
BLOCK = {GGML_F32: (1, 4), GGML_F16: (1, 2), GGML_Q4_1: (32, 20), GGML_Q8_0: (32, 34)}

PRESETS = {
    # SmolLM2-135M-Instruct (the project's default model)
    "smollm2-135m": dict(n_layers=30, dim=576, n_heads=9, n_kv_heads=3, ffn=1536, vocab=49152,
                         ctx=8192, theta=100000.0, eps=1e-5, tied=True),
    # small, every row a multiple of 256 (the k-quant super-block): the
    # weight-type goldens (scripts/oracle/make_types_golden.sh)
    "tiny-256": dict(n_layers=2, dim=256, n_heads=4, n_kv_heads=2, ffn=768, vocab=49152,
                     ctx=8192, theta=100000.0, eps=1e-5, tied=False),
    # Llama-3.2-1B
    "llama-1b": dict(n_layers=16, dim=2048, n_heads=32, n_kv_heads=8, ffn=8192, vocab=128256,
                     ctx=8192, theta=500000.0, eps=1e-5, tied=True),
    # Llama-3.1-8B
    "llama-8b": dict(n_layers=32, dim=4096, n_heads=32, n_kv_heads=8, ffn=14336, vocab=128256,
                     ctx=8192, theta=500000.0, eps=1e-5, tied=False),
}

TOKENIZER_KEYS_REQUIRED = ("tokenizer.ggml.model", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
                           "tokenizer.ggml.merges")


# ---------------------------------------------------------------- reading

class Reader:
    def __init__(self, data):
        self.d = data
        self.o = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.o)[0]
        self.o += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = bytes(self.d[self.o:self.o + n])
        self.o += n
        return s

    def value(self, t):
        if t == T_STR:
            return self.string()
        if t == T_ARR:
            et = self.take("<I")
            n = self.take("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.take(SCALAR_FMT[t])


def read_metadata(path):
    """All key/values of a GGUF file: {key: (type, value)} (arrays: (T_ARR, (elem_type, list)))."""
    with open(path, "rb") as f:
        head = f.read(24)
        if head[:4] != GGUF_MAGIC:
            sys.exit(f"{path}: not a GGUF file")
        version, n_tensors, n_kv = struct.unpack_from("<IQQ", head, 4)
        if version not in (2, 3):
            sys.exit(f"{path}: GGUF version {version} not supported")
        # metadata of a small model fits in the first tens of MB
        data = head + f.read(64 << 20)
    r = Reader(memoryview(data))
    r.o = 24
    kv = {}
    for _ in range(n_kv):
        key = r.string().decode()
        t = r.take("<I")
        kv[key] = (t, r.value(t))
    return kv


# ---------------------------------------------------------------- writing

def w_str(out, s):
    if isinstance(s, str):
        s = s.encode()
    out.append(struct.pack("<Q", len(s)))
    out.append(s)


def w_value(out, t, v):
    if t == T_STR:
        w_str(out, v)
    elif t == T_ARR:
        et, items = v
        out.append(struct.pack("<IQ", et, len(items)))
        if et == T_STR:
            for s in items:
                w_str(out, s)
        else:
            out.append(np.asarray(items, dtype=np.dtype(SCALAR_FMT[et])).tobytes())
    else:
        out.append(struct.pack(SCALAR_FMT[t], v))


def write_gguf(path, kv, tensors, gen):
    """kv: {key: (type, value)}; tensors: [(name, ne list, ggml type)]; gen(name, ne, type) -> bytes."""
    head = [GGUF_MAGIC, struct.pack("<IQQ", 3, len(tensors), len(kv))]
    for k, (t, v) in kv.items():
        w_str(head, k)
        head.append(struct.pack("<I", t))
        w_value(head, t, v)
    offset = 0
    sizes = []
    for name, ne, tt in tensors:
        be, bb = BLOCK[tt]
        n = int(np.prod(ne))
        size = n // be * bb
        sizes.append(size)
        w_str(head, name)
        head.append(struct.pack("<I", len(ne)))
        for x in ne:
            head.append(struct.pack("<Q", x))
        head.append(struct.pack("<IQ", tt, offset))
        offset += (size + ALIGN - 1) // ALIGN * ALIGN
    blob = b"".join(head)
    pad = (-len(blob)) % ALIGN
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(blob + b"\0" * pad)
        for (name, ne, tt), size in zip(tensors, sizes):
            data = gen(name, ne, tt)
            assert len(data) == size, (name, len(data), size)
            f.write(data)
            f.write(b"\0" * ((-size) % ALIGN))
    os.replace(tmp, path)


# ---------------------------------------------------------------- random tensors

def random_tensor(rng, ne, tt, std):
    n = int(np.prod(ne))
    a = std * np.sqrt(3.0)                      # uniform [-a, a] has this std
    if tt == GGML_F32:
        return np.ones(n, dtype=np.float32).tobytes()   # norm weights
    if tt == GGML_F16:
        return rng.uniform(-a, a, n).astype(np.float16).tobytes()
    nb = n // 32
    jitter = rng.uniform(0.8, 1.2, nb)
    if tt == GGML_Q4_1:
        blk = np.empty((nb, 20), dtype=np.uint8)
        d = (2 * a / 15 * jitter).astype(np.float16)
        m = (-a * jitter).astype(np.float16)
        blk[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
        blk[:, 2:4] = m.view(np.uint8).reshape(nb, 2)
        blk[:, 4:] = np.frombuffer(rng.bytes(nb * 16), dtype=np.uint8).reshape(nb, 16)
        return blk.tobytes()
    if tt == GGML_Q8_0:
        blk = np.empty((nb, 34), dtype=np.uint8)
        d = (a / 127 * jitter).astype(np.float16)
        blk[:, 0:2] = d.view(np.uint8).reshape(nb, 2)
        q = np.frombuffer(rng.bytes(nb * 32), dtype=np.int8).copy()
        q[q == -128] = -127
        blk[:, 2:] = q.view(np.uint8).reshape(nb, 32)
        return blk.tobytes()
    raise ValueError(tt)


def model_tensors(c, mat_type, embd_type):
    dim, hd = c["dim"], c["dim"] // c["n_heads"]
    qd, kvd = c["n_heads"] * hd, c["n_kv_heads"] * hd
    t = [("token_embd.weight", [dim, c["vocab"]], embd_type)]
    for l in range(c["n_layers"]):
        p = f"blk.{l}."
        t += [(p + "attn_norm.weight", [dim], GGML_F32),
              (p + "attn_q.weight", [dim, qd], mat_type),
              (p + "attn_k.weight", [dim, kvd], mat_type),
              (p + "attn_v.weight", [dim, kvd], mat_type),
              (p + "attn_output.weight", [qd, dim], mat_type),
              (p + "ffn_norm.weight", [dim], GGML_F32),
              (p + "ffn_gate.weight", [dim, c["ffn"]], mat_type),
              (p + "ffn_up.weight", [dim, c["ffn"]], mat_type),
              (p + "ffn_down.weight", [c["ffn"], dim], mat_type)]
    t.append(("output_norm.weight", [dim], GGML_F32))
    if not c["tied"]:
        t.append(("output.weight", [dim, c["vocab"]], embd_type))
    return t


def param_count(c):
    dim, hd = c["dim"], c["dim"] // c["n_heads"]
    qd, kvd = c["n_heads"] * hd, c["n_kv_heads"] * hd
    per_layer = dim * qd + 2 * dim * kvd + qd * dim + 3 * dim * c["ffn"] + 2 * dim
    emb = dim * c["vocab"]
    return dict(total=emb * (1 if c["tied"] else 2) + c["n_layers"] * per_layer + dim,
                matmul_per_token=c["n_layers"] * (per_layer - 2 * dim) + emb,
                embedding=emb)


def tokenizer_kv(tok_path, vocab):
    src = read_metadata(tok_path)
    for k in TOKENIZER_KEYS_REQUIRED:
        if k not in src:
            sys.exit(f"{tok_path}: {k} missing")
    kv = {k: v for k, v in src.items() if k.startswith("tokenizer.")}
    et, toks = kv["tokenizer.ggml.tokens"][1]
    tt_et, types = kv["tokenizer.ggml.token_type"][1]
    if vocab < len(toks):
        sys.exit(f"vocabulary {vocab} smaller than the tokenizer's {len(toks)}")
    if vocab > len(toks):
        extra = vocab - len(toks)
        toks = toks + [f"<|reserved_{i}|>".encode() for i in range(extra)]
        types = types + [5] * extra
    kv["tokenizer.ggml.tokens"] = (T_ARR, (et, toks))
    kv["tokenizer.ggml.token_type"] = (T_ARR, (tt_et, types))
    return kv


def cmd_extract(args):
    src = read_metadata(args.src)
    kv = {k: v for k, v in src.items() if k.startswith("tokenizer.")}
    for k in TOKENIZER_KEYS_REQUIRED:
        if k not in kv:
            sys.exit(f"{args.src}: {k} missing")
    kv["general.architecture"] = (T_STR, b"tokenizer-only")
    write_gguf(args.out, kv, [], None)
    print(f"{args.out}: {len(kv)} tokenizer keys, {os.path.getsize(args.out)} bytes")


def cmd_write(args):
    c = PRESETS[args.name]
    mat_type = TYPE_IDS[args.type]
    embd_type = TYPE_IDS[args.embd_type]
    hd = c["dim"] // c["n_heads"]
    kv = {
        "general.architecture": (T_STR, b"llama"),
        "general.name": (T_STR, f"synthetic {args.name} (random weights)".encode()),
        "general.alignment": (T_U32, ALIGN),
        "llama.block_count": (T_U32, c["n_layers"]),
        "llama.context_length": (T_U32, c["ctx"]),
        "llama.embedding_length": (T_U32, c["dim"]),
        "llama.feed_forward_length": (T_U32, c["ffn"]),
        "llama.attention.head_count": (T_U32, c["n_heads"]),
        "llama.attention.head_count_kv": (T_U32, c["n_kv_heads"]),
        "llama.rope.freq_base": (T_F32, c["theta"]),
        "llama.rope.dimension_count": (T_U32, hd),
        "llama.attention.layer_norm_rms_epsilon": (T_F32, c["eps"]),
        "llama.vocab_size": (T_U32, c["vocab"]),
    }
    kv.update(tokenizer_kv(args.tokenizer, c["vocab"]))
    rng = np.random.default_rng(args.seed)
    tensors = model_tensors(c, mat_type, embd_type)
    write_gguf(args.out, kv, tensors, lambda name, ne, tt: random_tensor(rng, ne, tt, args.std))
    print(f"{args.out}: {args.name}, {len(tensors)} tensors, {os.path.getsize(args.out) / 2**20:.1f} MiB")


def cmd_config(args):
    c = dict(PRESETS[args.name])
    c["head_dim"] = c["dim"] // c["n_heads"]
    c.update(param_count(c))
    print(json.dumps(c))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("extract-tokenizer")
    p.add_argument("src")
    p.add_argument("out")
    p = sub.add_parser("write")
    p.add_argument("name", choices=sorted(PRESETS))
    p.add_argument("out")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--type", default="Q4_1", choices=["Q4_1", "Q8_0", "F16"])
    p.add_argument("--embd-type", default="Q8_0", choices=["Q4_1", "Q8_0", "F16"])
    p.add_argument("--std", type=float, default=0.02)
    p.add_argument("--seed", type=int, default=1)
    p = sub.add_parser("config")
    p.add_argument("name", choices=sorted(PRESETS))
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "extract-tokenizer":
        cmd_extract(args)
    elif args.cmd == "write":
        cmd_write(args)
    elif args.cmd == "config":
        cmd_config(args)
    else:
        print("\n".join(sorted(PRESETS)))


if __name__ == "__main__":
    main()
