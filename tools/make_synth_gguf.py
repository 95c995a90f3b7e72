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
    make_synth_gguf.py arch FAMILY SIZE OUT.gguf [--type F16|Q8_0] [--seed S] [--sha256 H] [--pooling last|mean|cls]
                                        # an architecture family's shape (ARCH below)
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


# Architecture families: random-weight models in the shapes of a small real
# member of each family (config.json of the named model), for fidelity
# tests against llama.cpp.  Sizes: "small" (CI: a few layers, narrow, a
# 384-token cut of the SmolLM2 vocabulary), "fid" (the real widths, cut to
# a few layers, the cut vocabulary), "vocab" (the small widths, the family's
# real vocabulary from the llama.cpp sources), "full" (the real widths and depth, the
# family's real vocabulary size padded as the real model's).  Q and K are
# scaled so that scores have a standard deviation of a few units (random
# weights at the usual scale give uniform attention, which hides RoPE and
# bias bugs); the other matrices have 1/sqrt(fan-in) so that every block
# moves the residual stream as much as the embedding does (the greedy
# continuation then depends on the context, not only on the last token);
# norm weights, biases and RoPE factors are random too, so that skipping
# any of them changes the logits.
ARCH = {
    # Qwen2.5-0.5B-Instruct
    "qwen2": dict(shape="Qwen2.5 0.5B", arch="qwen2", dim=896, n_heads=14, n_kv_heads=2, head_dim=64, ffn=4864, n_layers=24,
                  vocab=151936, ctx=32768, theta=1000000.0, eps=1e-6, tied=True, qkv_bias=True),
    # Qwen3-0.6B
    "qwen3": dict(shape="Qwen3 0.6B", arch="qwen3", dim=1024, n_heads=16, n_kv_heads=8, head_dim=128, ffn=3072, n_layers=28,
                  vocab=151936, ctx=40960, theta=1000000.0, eps=1e-6, tied=True, qk_norm=True),
    # Llama-3.2-1B-Instruct (Llama 3.1 RoPE scaling: rope_freqs.weight)
    "llama31": dict(shape="Llama 3.2 1B", arch="llama", dim=2048, n_heads=32, n_kv_heads=8, head_dim=64, ffn=8192, n_layers=16,
                    vocab=128256, ctx=131072, theta=500000.0, eps=1e-5, tied=True, rope_freqs=True),
    # Phi-3.5-mini-instruct (fused QKV and gate/up, LongRoPE)
    "phi3": dict(shape="Phi 3.5 mini", arch="phi3", dim=3072, n_heads=32, n_kv_heads=32, head_dim=96, ffn=8192, n_layers=32,
                 vocab=32064, ctx=131072, orig_ctx=4096, theta=10000.0, eps=1e-5, tied=False, fused=True,
                 longrope=True),
    # gemma-2-2b-it (soft-caps, alternating sliding window, post norms)
    "gemma2": dict(shape="Gemma 2 2B", arch="gemma2", dim=2304, n_heads=8, n_kv_heads=4, head_dim=256, ffn=9216, n_layers=26,
                   vocab=256000, ctx=8192, theta=10000.0, eps=1e-6, tied=True, gemma2=True,
                   attn_cap=50.0, final_cap=30.0, window=4096),
    # granite-3.0-2b-instruct (scale multipliers)
    "granite": dict(shape="Granite 3.0 2B", arch="granite", dim=2048, n_heads=32, n_kv_heads=8, head_dim=64, ffn=8192, n_layers=40,
                    vocab=49155, ctx=4096, theta=10000.0, eps=1e-5, tied=True,
                    scales=dict(embedding_scale=12.0, residual_scale=0.22, attention_scale=0.015625,
                                logit_scale=8.0)),
    # SmolLM3-3B (every 4th layer without RoPE)
    "smollm3": dict(shape="SmolLM3 3B", arch="smollm3", dim=2048, n_heads=16, n_kv_heads=4, head_dim=128, ffn=11008, n_layers=36,
                    vocab=128256, ctx=65536, theta=5000000.0, eps=1e-6, tied=True),
}
# CI size: narrow widths, the family's head size where it is small (64), a
# few layers (SmolLM3 4: one layer without RoPE), smaller soft-caps so they act
ARCH_SMALL = dict(dim=128, n_heads=2, n_kv_heads=1, head_dim=64, ffn=128, n_layers=2, vocab=384, ctx=4096)
ARCH_SMALL_OVERRIDE = {"smollm3": dict(n_layers=4), "phi3": dict(n_kv_heads=2, orig_ctx=1024, ctx=32768),
                       "gemma2": dict(attn_cap=4.0, final_cap=8.0, window=8), "qwen3": dict(dim=96)}
# CI size for the k-quant mixes: the small shape with every matrix's input a
# multiple of 256 (the k-quant super-block), so that llama-quantize's Q4_K_M
# mix stores Q4_K / Q6_K rows rather than falling back to Q5_0 / Q8_0
ARCH_SMALL_K = dict(dim=256, n_heads=4, ffn=256)
ARCH_FID_LAYERS = 4
ARCH_SMALL_VOCAB_SRC = "models/SmolLM2-135M-Instruct.Q4_1.gguf"
# the family's vocabulary in the llama.cpp sources (sdist), for the full size
ARCH_VOCAB_FILE = {"qwen2": "ggml-vocab-qwen2.gguf", "qwen3": "ggml-vocab-qwen2.gguf",
                   "llama31": "ggml-vocab-llama-bpe.gguf", "phi3": "ggml-vocab-phi-3.gguf",
                   "smollm3": "ggml-vocab-llama-bpe.gguf"}

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
        # a SentencePiece vocabulary (Phi-3's) has scores instead of merges
        if k == "tokenizer.ggml.merges" and src.get("tokenizer.ggml.model", (0, b""))[1] != b"gpt2":
            k = "tokenizer.ggml.scores"
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
        if "tokenizer.ggml.scores" in kv:
            sc_et, scores = kv["tokenizer.ggml.scores"][1]
            kv["tokenizer.ggml.scores"] = (T_ARR, (sc_et, scores + [0.0] * extra))
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



# ---------------------------------------------------------------- architecture families

def arch_config(family, size):
    c = dict(ARCH[family])
    if size == "small":
        c.update(ARCH_SMALL)
        c.update(ARCH_SMALL_OVERRIDE.get(family, {}))
    elif size == "small-k":
        c.update(ARCH_SMALL)
        c.update(ARCH_SMALL_OVERRIDE.get(family, {}))
        c.update(ARCH_SMALL_K)
    elif size == "vocab":
        # the small widths with the family's whole vocabulary (its embedding and output at full size)
        c.update(ARCH_SMALL)
        c.update(ARCH_SMALL_OVERRIDE.get(family, {}))
        c["vocab"] = ARCH[family]["vocab"]
    elif size == "fid":
        c["n_layers"] = ARCH_FID_LAYERS
        c["vocab"] = ARCH_SMALL["vocab"]
    return c


def cut_tokenizer_kv(src_path, n):
    """The first n tokens of a gpt2-BPE vocabulary with the merges that stay inside them."""
    src = read_metadata(src_path)
    kv = {k: v for k, v in src.items() if k.startswith("tokenizer.")}
    et, toks = kv["tokenizer.ggml.tokens"][1]
    tt_et, types = kv["tokenizer.ggml.token_type"][1]
    toks, types = toks[:n], types[:n]
    have = set(toks)
    m_et, merges = kv["tokenizer.ggml.merges"][1]
    keep = []
    for mg in merges:
        a, b = mg.split(b" ", 1)
        if a in have and b in have and a + b in have:
            keep.append(mg)
    kv["tokenizer.ggml.tokens"] = (T_ARR, (et, toks))
    kv["tokenizer.ggml.token_type"] = (T_ARR, (tt_et, types))
    kv["tokenizer.ggml.merges"] = (T_ARR, (m_et, keep))
    for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
              "tokenizer.ggml.padding_token_id"):
        if k in kv and kv[k][1] >= n:
            sys.exit(f"{k} {kv[k][1]} outside the cut vocabulary")
    return kv


def f16_bytes(a):
    return np.asarray(a, dtype=np.float32).astype(np.float16).tobytes()


def q8_0_bytes(a):
    """ggml's quantize_row_q8_0_ref: d = amax / 127, q = roundf(x / d) (half away from zero)."""
    x = np.asarray(a, dtype=np.float32).reshape(-1, 32)
    amax = np.max(np.abs(x), axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    idv = np.where(d != 0, np.float32(1.0) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (x * idv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)
    blk = np.empty((x.shape[0], 34), dtype=np.uint8)
    blk[:, 0:2] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    blk[:, 2:] = q.view(np.uint8)
    return blk.tobytes()


def arch_tensors(c):
    """[(name, ne, kind, std-or-range)]: kind 'mat', 'norm' (around 1), 'bias', 'factors'."""
    dim, hd = c["dim"], c["head_dim"]
    qd, kvd, ffn = c["n_heads"] * hd, c["n_kv_heads"] * hd, c["ffn"]
    qk_std = 1.6 / np.sqrt(dim)           # q, k values of std ~1.6: scores of a few units
    emb_std = 3.0 / np.sqrt(dim)          # logits of std ~3 through the tied output
    t = [("token_embd.weight", [dim, c["vocab"]], "mat", emb_std)]
    if c.get("rope_freqs"):
        t.append(("rope_freqs.weight", [hd // 2], "factors", (1.0, 4.0)))
    if c.get("longrope"):
        t.append(("rope_factors_long.weight", [hd // 2], "factors", (1.0, 8.0)))
        t.append(("rope_factors_short.weight", [hd // 2], "factors", (1.0, 3.0)))
    for l in range(c["n_layers"]):
        p = f"blk.{l}."
        t.append((p + "attn_norm.weight", [dim], "norm", None))
        if c.get("fused"):
            t.append((p + "attn_qkv.weight", [dim, qd + 2 * kvd], "qkv", (qk_std, qd, kvd)))
        else:
            t += [(p + "attn_q.weight", [dim, qd], "mat", qk_std),
                  (p + "attn_k.weight", [dim, kvd], "mat", qk_std),
                  (p + "attn_v.weight", [dim, kvd], "mat", 1.0 / np.sqrt(dim))]
        if c.get("qkv_bias"):
            t += [(p + "attn_q.bias", [qd], "bias", 0.5), (p + "attn_k.bias", [kvd], "bias", 0.5),
                  (p + "attn_v.bias", [kvd], "bias", 0.5)]
        if c.get("qk_norm"):
            t += [(p + "attn_q_norm.weight", [hd], "norm", None), (p + "attn_k_norm.weight", [hd], "norm", None)]
        t.append((p + "attn_output.weight", [qd, dim], "mat", 1.0 / np.sqrt(qd)))
        if c.get("gemma2"):
            t.append((p + "post_attention_norm.weight", [dim], "norm", None))
        t.append((p + "ffn_norm.weight", [dim], "norm", None))
        if c.get("fused"):
            t.append((p + "ffn_up.weight", [dim, 2 * ffn], "mat", 1.0 / np.sqrt(dim)))
        else:
            t += [(p + "ffn_gate.weight", [dim, ffn], "mat", 1.0 / np.sqrt(dim)),
                  (p + "ffn_up.weight", [dim, ffn], "mat", 1.0 / np.sqrt(dim))]
        t.append((p + "ffn_down.weight", [ffn, dim], "mat", 1.0 / np.sqrt(ffn)))
        if c.get("gemma2"):
            t.append((p + "post_ffw_norm.weight", [dim], "norm", None))
    t.append(("output_norm.weight", [dim], "norm", None))
    if not c["tied"]:
        t.append(("output.weight", [dim, c["vocab"]], "mat", emb_std))
    return t


def arch_kv(c, name, tok_kv):
    a = c["arch"]
    kv = {
        "general.architecture": (T_STR, a.encode()),
        # not the family's name: llama.cpp sets token attributes by substrings of general.name ("phi3")
        "general.name": (T_STR, f"synthetic random weights, {c['shape']} shape, {name}".encode()),
        "general.alignment": (T_U32, ALIGN),
        f"{a}.block_count": (T_U32, c["n_layers"]),
        f"{a}.context_length": (T_U32, c["ctx"]),
        f"{a}.embedding_length": (T_U32, c["dim"]),
        f"{a}.feed_forward_length": (T_U32, c["ffn"]),
        f"{a}.attention.head_count": (T_U32, c["n_heads"]),
        f"{a}.attention.head_count_kv": (T_U32, c["n_kv_heads"]),
        f"{a}.attention.key_length": (T_U32, c["head_dim"]),
        f"{a}.attention.value_length": (T_U32, c["head_dim"]),
        f"{a}.rope.freq_base": (T_F32, c["theta"]),
        f"{a}.rope.dimension_count": (T_U32, c["head_dim"]),
        f"{a}.attention.layer_norm_rms_epsilon": (T_F32, c["eps"]),
    }
    if c.get("longrope"):
        kv[f"{a}.rope.scaling.original_context_length"] = (T_U32, c["orig_ctx"])
        scale = c["ctx"] / c["orig_ctx"]
        kv[f"{a}.rope.scaling.attn_factor"] = (T_F32, float(np.sqrt(1 + np.log(scale) / np.log(c["orig_ctx"]))))
    if c.get("gemma2"):
        kv[f"{a}.attn_logit_softcapping"] = (T_F32, c["attn_cap"])
        kv[f"{a}.final_logit_softcapping"] = (T_F32, c["final_cap"])
        kv[f"{a}.attention.sliding_window"] = (T_U32, c["window"])
    for k, v in c.get("scales", {}).items():
        key = "attention.scale" if k == "attention_scale" else k
        kv[f"{a}.{key}"] = (T_F32, v)
    kv.update(tok_kv)
    return kv


POOLING_TYPES = {"mean": 1, "cls": 2, "last": 3}


def cmd_arch(args):
    c = arch_config(args.family, args.size)
    mat_type = TYPE_IDS[args.type]
    if args.size == "vocab" and not (args.family in ARCH_VOCAB_FILE and args.vocab_dir):
        sys.exit(f"size vocab needs --vocab-dir and a family with a vocabulary there ({', '.join(ARCH_VOCAB_FILE)})")
    if args.size in ("full", "vocab") and args.family in ARCH_VOCAB_FILE and args.vocab_dir:
        tok_kv = tokenizer_kv(os.path.join(args.vocab_dir, ARCH_VOCAB_FILE[args.family]), c["vocab"])
    elif args.size == "full":
        # the SmolLM2 vocabulary padded to the family's size (the embedding and output keep their real shape)
        tok_kv = tokenizer_kv(args.tokenizer or ARCH_SMALL_VOCAB_SRC, c["vocab"])
    else:
        tok_kv = cut_tokenizer_kv(args.tokenizer or ARCH_SMALL_VOCAB_SRC, c["vocab"])
    if args.set_arch:
        c["arch"] = args.set_arch
    if args.plain:
        # the same widths as a plain llama block: no biases, norms of q/k, fusion or RoPE factors
        for k in ("qkv_bias", "qk_norm", "fused", "longrope", "rope_freqs", "gemma2", "scales"):
            c.pop(k, None)
    kv = arch_kv(c, args.size, tok_kv)
    for item in args.kv or []:
        k, v = item.split("=", 1)
        kv[k] = (T_STR, v.encode())
    if args.chat_template:
        with open(args.chat_template, "rb") as f:
            kv["tokenizer.chat_template"] = (T_STR, f.read())
    if args.pooling:
        # an embedding model's pooling, as llama.cpp's writer names it (add_pooling_type: uint32
        # {arch}.pooling_type, PoolingType MEAN 1, CLS 2, LAST 3); the weights do not change
        kv[f"{c['arch']}.pooling_type"] = (T_U32, POOLING_TYPES[args.pooling])
    rng = np.random.default_rng(args.seed)
    specs = arch_tensors(c)
    tensors = []
    for name, ne, kind, _ in specs:
        if kind in ("norm", "bias", "factors") or len(ne) == 1:
            tt = GGML_F32
        else:
            tt = mat_type
        tensors.append((name, ne, tt))
    by_name = {s[0]: s for s in specs}

    def gen(name, ne, tt):
        _, _, kind, arg = by_name[name]
        n = int(np.prod(ne))
        if kind == "norm":
            v = rng.uniform(0.5, 1.5, n)
        elif kind == "bias":
            v = rng.normal(0.0, arg, n)
        elif kind == "factors":
            v = rng.uniform(arg[0], arg[1], n)
        elif kind == "qkv":
            std, qd, kvd = arg
            rows = ne[1]
            v = rng.normal(0.0, 1.0, (rows, ne[0]))
            v[:qd + kvd] *= std
            v[qd + kvd:] /= np.sqrt(ne[0])
            v = v.reshape(-1)
        else:
            v = rng.normal(0.0, arg, n)
        v = v.astype(np.float32)
        if tt == GGML_F32:
            return v.tobytes()
        if tt == GGML_F16:
            return f16_bytes(v)
        return q8_0_bytes(v)
    write_gguf(args.out, kv, tensors, gen)
    h = sha256_of(args.out)
    print(f"{args.out}: {args.family} {args.size} {args.type}, {len(tensors)} tensors, "
          f"{os.path.getsize(args.out) / 2**20:.2f} MiB, sha256 {h}")
    if args.sha256 and h != args.sha256:
        sys.exit(f"{args.out}: sha256 {h}, expected {args.sha256}")


def sha256_of(path):
    import hashlib
    d = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            d.update(b)
    return d.hexdigest()


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
    p = sub.add_parser("arch")
    p.add_argument("family", choices=sorted(ARCH))
    p.add_argument("size", choices=["small", "small-k", "vocab", "fid", "full"])
    p.add_argument("out")
    p.add_argument("--type", default="F16", choices=["F16", "Q8_0"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tokenizer", help="gpt2-BPE GGUF whose first tokens make the cut vocabulary")
    p.add_argument("--vocab-dir", help="llama.cpp models/ with ggml-vocab-*.gguf (sizes full and vocab)")
    p.add_argument("--sha256", help="fail unless the written file has this sha256")
    p.add_argument("--set-arch", help="another general.architecture (and key prefix): refusal tests")
    p.add_argument("--kv", action="append", help="KEY=STRING metadata added (refusal tests)")
    p.add_argument("--chat-template", help="a Jinja file written as tokenizer.chat_template")
    p.add_argument("--pooling", choices=sorted(POOLING_TYPES),
                   help="write <arch>.pooling_type (an embedding model: Qwen3-Embedding pools the last token)")
    p.add_argument("--plain", action="store_true",
                   help="with --set-arch llama: the family's widths as a plain llama model (speed baseline)")
    p = sub.add_parser("config")
    p.add_argument("name", choices=sorted(PRESETS))
    sub.add_parser("list")
    args = ap.parse_args()
    if args.cmd == "extract-tokenizer":
        cmd_extract(args)
    elif args.cmd == "write":
        cmd_write(args)
    elif args.cmd == "arch":
        cmd_arch(args)
    elif args.cmd == "config":
        cmd_config(args)
    else:
        print("\n".join(sorted(PRESETS)))


if __name__ == "__main__":
    main()
