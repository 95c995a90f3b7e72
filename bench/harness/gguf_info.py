"""Read a GGUF file's tensor table: parameter count and weight bytes.

Follows the GGUF v2/v3 layout of ggml's docs/gguf.md: header (magic, version,
tensor count, metadata count), metadata key/values, tensor infos (name, dims,
ggml type, offset).  Only what the rooflines need; no validation beyond bounds.
"""
import struct

# ggml type id -> (block elements, block bytes), from ggml's type traits table
GGML_BLOCKS = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 36),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    30: (1, 2),  # BF16
}
GGML_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K",
              15: "Q8_K", 30: "BF16"}

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
           10: "<Q", 11: "<q", 12: "<d"}


class _Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        if len(s) != n:
            raise ValueError("GGUF string past end of file")
        self.pos += n
        return s.decode("utf-8", "replace")

    def value(self, t):
        if t in _SCALAR:
            return self.take(_SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            et = self.take("<I")
            n = self.take("<Q")
            if et in _SCALAR:  # skip numeric arrays without decoding them
                self.pos += n * struct.calcsize(_SCALAR[et])
                return None
            for _ in range(n):  # string (or nested) arrays: walk to skip them
                self.value(et)
            return None
        raise ValueError("unknown GGUF metadata type %d" % t)


def read(path):
    """Return {'params', 'matmul_params_logits', 'matmul_params_no_logits',
    'weight_bytes', 'bytes_by_type', 'tensors', 'arch', 'file_bytes',
    'n_layers', 'n_kv_heads', 'head_dim', 'kv_bytes_per_position'}.

    weight_bytes sums every tensor's data size (from its ggml type); a tensor of
    an unknown type makes it fall back to the data section's size.
    """
    with open(path, "rb") as f:
        data = f.read()
    r = _Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    r.pos = 4
    version = r.take("<I")
    n_tensors = r.take("<Q")
    n_kv = r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        t = r.take("<I")
        v = r.value(t)
        if t != 9:
            meta[key] = v
    alignment = int(meta.get("general.alignment", 32))
    params = 0
    weight_bytes = 0
    unknown = False
    by_type = {}
    per_tensor = {}
    for _ in range(n_tensors):
        name = r.string()
        nd = r.take("<I")
        n = 1
        for _ in range(nd):
            n *= r.take("<Q")
        t = r.take("<I")
        r.take("<Q")
        params += n
        per_tensor[name] = n
        if t in GGML_BLOCKS:
            be, bb = GGML_BLOCKS[t]
            nbytes = n // be * bb
            weight_bytes += nbytes
            tname = GGML_NAMES[t]
            by_type[tname] = by_type.get(tname, 0) + nbytes
        else:
            unknown = True
    data_start = (r.pos + alignment - 1) // alignment * alignment
    if unknown:
        weight_bytes = len(data) - data_start
    embd = per_tensor.get("token_embd.weight", 0)
    output = per_tensor.get("output.weight", 0)
    arch = meta.get("general.architecture")
    n_layers = meta.get("%s.block_count" % arch)
    n_heads = meta.get("%s.attention.head_count" % arch)
    n_kv = meta.get("%s.attention.head_count_kv" % arch, n_heads)
    head_dim = meta.get("%s.attention.key_length" % arch)
    if head_dim is None and n_heads and meta.get("%s.embedding_length" % arch):
        head_dim = meta["%s.embedding_length" % arch] // n_heads
    dim = meta.get("%s.embedding_length" % arch)
    return {
        # the embedding's rows (the tokens array can be shorter than the padded matrix)
        "n_vocab": embd // dim if embd and dim else None,
        "n_layers": n_layers,
        "n_kv_heads": n_kv,
        "head_dim": head_dim,
        # fp16 K and V of one position in every layer: what a decode step reads per cached token
        "kv_bytes_per_position": (n_layers * 2 * n_kv * head_dim * 2
                                  if n_layers and n_kv and head_dim else None),
        "path": path,
        "gguf_version": version,
        "arch": meta.get("general.architecture"),
        "name": meta.get("general.name"),
        "tensors": n_tensors,
        "params": params,
        # weights multiplied per token: every matrix but the embedding table
        # (a row lookup); the output projection (the embedding itself when
        # tied) only for tokens whose logits are computed
        "matmul_params_logits": params - embd + (0 if output else embd),
        "matmul_params_no_logits": params - embd - output,
        "weight_bytes": weight_bytes,
        "bytes_by_type": by_type,
        "file_bytes": len(data),
    }


if __name__ == "__main__":
    import json
    import sys
    print(json.dumps(read(sys.argv[1]), indent=1))
