#!/usr/bin/env python3
"""Convert a sentence-transformers BERT model directory to GGUF.

    tools/convert_bert_gguf.py MODEL_DIR OUT.gguf [--outtype f16|q8_0|f32]

MODEL_DIR holds what a sentence-transformers BERT model ships: config.json
(a BertModel), model.safetensors, vocab.txt (WordPiece), tokenizer.json,
tokenizer_config.json, special_tokens_map.json, modules.json with its
Pooling module's config.json and sentence_bert_config.json.

The file is the one llama.cpp's converter (convert_hf_to_gguf.py, class
BertModel of the same gguf-py version) writes for the "bert" architecture,
so it loads in llama.cpp too: the same keys and tensor names, the same
types (matrices F16 or Q8_0, token_embd included; position_embd,
token_types, norms and biases F32), the WordPiece vocabulary in its
"phantom space" form (a word-initial piece is U+2581 + piece, a "##"
continuation loses its "##", control tokens are kept as they are).  One key
is ours: bert.embedding.max_seq_length, the number of tokens
sentence-transformers cuts an input to (sentence_bert_config.json's
max_seq_length), which may be less than bert.context_length (the
positions the model has).  general.* metadata is reduced to the
architecture, type, name, file type and quantization version (llama.cpp's
converter adds the model card's license, tags, datasets...).

Only numpy, safetensors and gguf (PyPI) are needed; no torch.  The output
is a pure function of the input files and those packages' versions: the
same input gives the same bytes (scripts/fetch-model.sh pins its sha256).
"""
import argparse
import json
import os
import sys

import numpy as np
from safetensors.numpy import load_file

import gguf

ARCH = "bert"
# the key recording sentence-transformers' input limit (not a llama.cpp key)
MAX_SEQ_KEY = ARCH + ".embedding.max_seq_length"

# HF BertModel tensor name (after "bert." is dropped) -> GGUF name (gguf-py's
# tensor_mapping for MODEL_ARCH.BERT); "{}" is the layer index.
GLOBAL = {
    "embeddings.word_embeddings.weight": "token_embd.weight",
    "embeddings.position_embeddings.weight": "position_embd.weight",
    "embeddings.token_type_embeddings.weight": "token_types.weight",
    "embeddings.LayerNorm.weight": "token_embd_norm.weight",
    "embeddings.LayerNorm.bias": "token_embd_norm.bias",
}
LAYER = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
# dropped as llama.cpp's converter drops them: the pooler (not used for
# embeddings) and the position id buffer
SKIP = {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"}

POOLING = {"mean": gguf.PoolingType.MEAN, "cls": gguf.PoolingType.CLS, "lasttoken": gguf.PoolingType.LAST}


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def gguf_name(hf):
    if hf.startswith("bert."):
        hf = hf[5:]
    if hf.endswith(".gamma"):
        hf = hf[:-6] + ".weight"
    if hf.endswith(".beta"):
        hf = hf[:-5] + ".bias"
    if hf in SKIP or hf.startswith("cls."):
        return None
    if hf in GLOBAL:
        return GLOBAL[hf]
    parts = hf.split(".")
    if parts[:2] == ["encoder", "layer"]:
        rest = ".".join(parts[3:])
        for src, dst in LAYER.items():
            if rest in (src + ".weight", src + ".bias"):
                return "blk.%s.%s.%s" % (parts[2], dst, rest.rsplit(".", 1)[1])
    raise SystemExit("convert_bert_gguf: unexpected tensor %s" % hf)


def pooling_type(model_dir):
    """The Pooling module's mode, as llama.cpp's converter reads it (None: no Pooling module)."""
    path = os.path.join(model_dir, "modules.json")
    if not os.path.isfile(path):
        return None
    for mod in read_json(path):
        if mod["type"].endswith("Pooling"):
            cfg = read_json(os.path.join(model_dir, mod["path"], "config.json"))
            if cfg.get("pooling_mode_mean_tokens"):
                return gguf.PoolingType.MEAN
            if cfg.get("pooling_mode_cls_token"):
                return gguf.PoolingType.CLS
            if cfg.get("pooling_mode_lasttoken"):
                return gguf.PoolingType.LAST
            if cfg.get("pooling_mode") in POOLING:
                return POOLING[cfg["pooling_mode"]]
            raise SystemExit("convert_bert_gguf: only mean, CLS and last-token pooling are supported")
    return None


def normalizer_flags(model_dir):
    """(lowercase, strip_accents) of tokenizer.json's normalizer, None where it says nothing."""
    lower = strip = None
    tj = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(tj):
        return lower, strip

    def walk(n):
        nonlocal lower, strip
        if not n:
            return
        t = n.get("type")
        if t == "Lowercase":
            lower = True
        elif t == "StripAccents":
            strip = True
        elif t == "BertNormalizer":
            lower = n.get("lowercase", lower)
            strip = n.get("strip_accents", strip)
        elif t == "Sequence":
            for m in n.get("normalizers", []):
                walk(m)
    walk(read_json(tj).get("normalizer"))
    return lower, strip


def vocab(model_dir, n_vocab):
    """WordPiece tokens in llama.cpp's phantom-space form and their types."""
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        pieces = [line.rstrip("\n") for line in f]
    if len(pieces) > n_vocab:
        raise SystemExit("convert_bert_gguf: vocab.txt has %d pieces, the model %d" % (len(pieces), n_vocab))
    special = set()
    tj = os.path.join(model_dir, "tokenizer.json")
    if os.path.isfile(tj):
        special = {t["id"] for t in read_json(tj).get("added_tokens", []) if t.get("special")}
    tokens, types = [], []
    for i in range(n_vocab):
        if i >= len(pieces):
            tokens.append("[PAD%d]" % i)
            types.append(gguf.TokenType.UNUSED)
            continue
        tok = pieces[i]
        if i in special:
            tokens.append(tok)
            types.append(gguf.TokenType.CONTROL)
        else:
            tokens.append(tok[2:] if tok.startswith("##") else "\u2581" + tok)
            types.append(gguf.TokenType.NORMAL)
    return tokens, types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", choices=("f16", "q8_0", "f32"), default="f16")
    ap.add_argument("--name", default=None, help="general.name (default: the model directory's name)")
    a = ap.parse_args()

    hp = read_json(os.path.join(a.model_dir, "config.json"))
    if hp.get("model_type") != "bert" or hp.get("position_embedding_type", "absolute") != "absolute":
        raise SystemExit("convert_bert_gguf: not a BERT model with absolute positions")
    if hp.get("hidden_act", "gelu") != "gelu":
        raise SystemExit("convert_bert_gguf: hidden_act %r is not gelu" % hp.get("hidden_act"))
    ftype, qtype = {
        "f16": (gguf.LlamaFileType.MOSTLY_F16, gguf.GGMLQuantizationType.F16),
        "q8_0": (gguf.LlamaFileType.MOSTLY_Q8_0, gguf.GGMLQuantizationType.Q8_0),
        "f32": (gguf.LlamaFileType.ALL_F32, gguf.GGMLQuantizationType.F32),
    }[a.outtype]
    name = a.name or os.path.basename(os.path.normpath(a.model_dir))

    w = gguf.GGUFWriter(a.out, ARCH)
    w.add_type(gguf.GGUFType.MODEL)
    w.add_name(name)
    # hyper-parameters in the order llama.cpp's TextModel / BertModel write them
    w.add_block_count(hp["num_hidden_layers"])
    w.add_context_length(hp["max_position_embeddings"])
    w.add_embedding_length(hp["hidden_size"])
    w.add_feed_forward_length(hp["intermediate_size"])
    w.add_head_count(hp["num_attention_heads"])
    w.add_layer_norm_eps(hp["layer_norm_eps"])
    w.add_file_type(ftype)
    w.add_causal_attention(False)
    pool = pooling_type(a.model_dir)
    if pool is not None:
        w.add_pooling_type(pool)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    st = os.path.join(a.model_dir, "sentence_bert_config.json")
    if os.path.isfile(st) and read_json(st).get("max_seq_length"):
        w.add_uint32(MAX_SEQ_KEY, int(read_json(st)["max_seq_length"]))

    n_vocab = hp["vocab_size"]
    tokens, types = vocab(a.model_dir, n_vocab)
    w.add_token_type_count(hp.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre("jina-v2-en")
    w.add_token_list(tokens)
    w.add_token_types(types)
    gguf.SpecialVocab(a.model_dir, n_vocab=len(tokens)).add_to_gguf(w)
    # the normalizer flags newer gguf-py's SpecialVocab writes (tokenizer.json's BertNormalizer)
    lower, strip = normalizer_flags(a.model_dir)
    if lower is not None:
        w.add_bool("tokenizer.ggml.normalizer.lowercase", bool(lower))
    if strip is not None:
        w.add_bool("tokenizer.ggml.normalizer.strip_accents", bool(strip))

    tensors = load_file(os.path.join(a.model_dir, "model.safetensors"))
    for hf in tensors:
        new = gguf_name(hf)
        if new is None:
            continue
        data = tensors[hf]
        if data.dtype not in (np.float16, np.float32):
            data = data.astype(np.float32)
        # llama.cpp's rules: vectors, norms, positions and token types in F32
        if data.ndim <= 1 or new.endswith("_norm.weight") or new in ("position_embd.weight", "token_types.weight"):
            t = gguf.GGMLQuantizationType.F32
        else:
            t = qtype
        q = gguf.quants.quantize(data.astype(np.float32) if t != gguf.GGMLQuantizationType.F16 else data, t)
        w.add_tensor(new, q, raw_dtype=t)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    sys.exit(main())
