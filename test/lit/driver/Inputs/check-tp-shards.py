#!/usr/bin/env python3
"""Checks a tensor-parallel artifact against the unsharded one, byte for byte.

Usage: check-tp-shards.py FULL.ingot SHARDED.ingot N

Reads both artifacts' manifests (a small FlatBuffers reader, field indices as in
schemas/artifact.fbs) and blobs, then checks, by its own reading of docs/tensor-parallel.md (not the
compiler's code), that:
  - every sharded tensor of rank r is exactly the slice of the unsharded tensor that the
    contract assigns to rank r (q/k/v rows of its heads, o columns, gate/up rows and down
    columns of its intermediate block, its vocabulary rows), so concatenating the ranks'
    slices in rank order (a replicated kv head once) gives back the unsharded tensor;
  - every other tensor is replicated (tp_rank -1) and identical to the unsharded one;
  - the blob holds the replicated tensors first, then rank 0's, rank 1's, ..., and each
    rank's ShardDef covers exactly the bytes from its first tensor to the end of its last;
  - there is one program per rank, with that tp_rank;
and prints each rank's share of the sharded bytes.

Quantized artifacts (`--quant`, docs/quantization.md) are checked the same way: a packed
weight (u4, f4e2m1fn: two elements per byte, element 2i in the low nibble; f8e4m3fn) is cut
like the float weight; its `_scale`, `_min` and `_zero` tensors [N, K / block] follow its rows
(column-parallel) or its K range divided by the block (row-parallel, where the cut must fall on
a block); an fp8 `_scale` [N] of a row-parallel weight and every NVFP4 `_global_scale` are
replicated (the whole tensor's). A quantized down projection's block (K / scale columns)
makes the intermediate split one of whole blocks (the contract's `alignedBlock`).
"""
import re
import struct
import sys

ELEMENT_BITS = {"f32": 32, "f16": 16, "bf16": 16, "f8e4m3fn": 8, "f8e8m0fnu": 8,
                "f4e2m1fn": 4, "u4": 4}
SCALE_SUFFIXES = ("_scale", "_min", "_zero")


class Table:
    """A FlatBuffers table: fields by their index in the schema (schemas/artifact.fbs)."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        self.vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vsize = struct.unpack_from("<H", buf, self.vtable)[0]

    def _field(self, i):
        at = 4 + 2 * i
        off = struct.unpack_from("<H", self.buf, self.vtable + at)[0] if at < self.vsize else 0
        return self.pos + off if off else None

    def scalar(self, i, fmt, default=0):
        at = self._field(i)
        return struct.unpack_from("<" + fmt, self.buf, at)[0] if at is not None else default

    def _target(self, i):
        at = self._field(i)
        return None if at is None else at + struct.unpack_from("<I", self.buf, at)[0]

    def table(self, i):
        at = self._target(i)
        return None if at is None else Table(self.buf, at)

    def string(self, i):
        at = self._target(i)
        n = struct.unpack_from("<I", self.buf, at)[0]
        return self.buf[at + 4:at + 4 + n].decode()

    def vector(self, i, fmt=None):
        """Scalars of `fmt`, or tables when fmt is None."""
        at = self._target(i)
        if at is None:
            return []
        n = struct.unpack_from("<I", self.buf, at)[0]
        if fmt:
            return list(struct.unpack_from("<%d%s" % (n, fmt), self.buf, at + 4))
        return [Table(self.buf, at + 4 + 4 * k + struct.unpack_from("<I", self.buf, at + 4 + 4 * k)[0])
                for k in range(n)]


DTYPES = {1: "f32", 2: "f16", 3: "bf16", 4: "f8e4m3fn", 6: "f8e8m0fnu", 7: "f4e2m1fn", 9: "u4"}


def read_artifact(path):
    """Config, tensors (with their bytes), shards and programs of an artifact."""
    with open(path, "rb") as f:
        data = f.read()
    manifest_at, manifest_size, blob = struct.unpack_from("<QQQ", data, 16)
    buf = data[manifest_at:manifest_at + manifest_size]
    root = Table(buf, struct.unpack_from("<I", buf, 0)[0])
    c = root.table(0)
    config = {"vocab": c.scalar(2, "q"), "hidden": c.scalar(3, "q"),
              "intermediate": c.scalar(4, "q"), "heads": c.scalar(6, "i"),
              "kv_heads": c.scalar(7, "i"), "head_dim": c.scalar(8, "i")}
    tensors = []
    for t in root.vector(2):
        offset, size = t.scalar(4, "Q"), t.scalar(5, "Q")
        tensors.append({"name": t.string(0), "dtype": DTYPES.get(t.scalar(1, "B"), "other"),
                        "shape": t.vector(2, "q"), "offset": offset, "size": size,
                        "rank": t.scalar(7, "i", -1),
                        "bytes": data[blob + offset:blob + offset + size]})
    tp = root.table(6)
    shards = [(s.scalar(0, "i"), s.scalar(1, "Q"), s.scalar(2, "Q"))
              for s in (tp.vector(1) if tp else [])]
    programs = [(p.string(0), p.scalar(5, "i", -1)) for p in root.vector(4)]
    return config, tensors, shards, programs


def blocks(total, parts, unit=1):
    """Contiguous blocks of whole `unit`s whose unit counts differ by at most one, larger
    first."""
    out, start, units = [], 0, total // unit
    for i in range(parts):
        size = (units // parts + (1 if i < units % parts else 0)) * unit
        out.append((start, size))
        start += size
    return out


def quant_block(by_name, weight):
    """The block (K / scale columns) of a block-quantized weight in the unsharded artifact,
    or 1 when it is not."""
    w, s = by_name.get(weight), by_name.get(weight + "_scale")
    if w is None or s is None or len(s["shape"]) != 2 or len(w["shape"]) != 2:
        return 1
    return w["shape"][1] // s["shape"][1]


def heads(hq, hkv, n):
    """Per rank: ((q start, q count), (kv start, kv count)), by the contract's rules."""
    group = hq // hkv
    if hkv >= n:
        return [((s * group, c * group), (s, c)) for s, c in blocks(hkv, n)]
    owner = [r * hkv // n for r in range(n)]
    out = []
    for r in range(n):
        sharing = [x for x in range(n) if owner[x] == owner[r]]
        s, c = blocks(group, len(sharing))[sharing.index(r)]
        out.append(((owner[r] * group + s, c), (owner[r], 1)))
    return out


def expected_slice(name, config, n, rank, by_name):
    """(dim, start, count) of rank's slice of tensor `name`, or None when replicated."""
    if name.endswith("_global_scale"):
        return None
    for suffix in SCALE_SUFFIXES:
        if name.endswith(suffix) and name[:-len(suffix)] in by_name:
            weight = name[:-len(suffix)]
            cut_of_weight = expected_slice(weight, config, n, rank, by_name)
            if cut_of_weight is None:
                return None
            dim, start, count = cut_of_weight
            if dim == 0:
                return cut_of_weight
            if len(by_name[name]["shape"]) != 2:
                return None  # a per-channel scale of a row-parallel weight
            block = quant_block(by_name, weight)
            if start % block or count % block:
                raise ValueError("%s: rank %d's K range [%d, +%d) cuts blocks of %d"
                                 % (weight, rank, start, count, block))
            return (1, start // block, count // block)
    d = config["head_dim"]
    (qs, qc), (ks, kc) = heads(config["heads"], config["kv_heads"], n)[rank]
    layer = re.match(r"(.*\.)mlp\.(gate|up|down)_proj\.", name)
    unit = quant_block(by_name, layer.group(1) + "mlp.down_proj.weight") if layer else 1
    ms, mc = blocks(config["intermediate"], n, unit)[rank]
    vocab = config["vocab"]
    if re.search(r"\.q_proj\.(weight|bias)$", name):
        return (0, qs * d, qc * d)
    if re.search(r"\.[kv]_proj\.(weight|bias)$", name):
        return (0, ks * d, kc * d)
    if name.endswith(".o_proj.weight"):
        return (1, qs * d, qc * d)
    if re.search(r"\.(gate|up)_proj\.(weight|bias)$", name):
        return (0, ms, mc)
    if name.endswith(".down_proj.weight"):
        return (1, ms, mc)
    if name in ("model.embed_tokens.weight", "lm_head.weight") and vocab % n == 0:
        return (0, rank * vocab // n, vocab // n)
    return None


def elements(t):
    """Tensor t's packed 4-bit elements as integers, low nibble first."""
    return [(b >> shift) & 0xF for b in t["bytes"] for shift in (0, 4)]


def pack(values):
    """The bytes of 4-bit elements (the inverse of `elements`)."""
    return bytes(values[i] | (values[i + 1] << 4) for i in range(0, len(values), 2))


def cut(t, dim, start, count):
    """Bytes of the slice [start, start + count) along dim of tensor t (rank 1 or 2); packed
    4-bit tensors are unpacked, cut element by element and packed again."""
    shape, bits = t["shape"], ELEMENT_BITS[t["dtype"]]
    row = shape[1] if len(shape) == 2 else 1
    if bits == 4:
        values = elements(t)
        if dim == 0:
            return pack(values[start * row:(start + count) * row])
        return pack([v for r in range(shape[0]) for v in values[r * row + start:r * row + start + count]])
    e, data = bits // 8, t["bytes"]
    if dim == 0:
        return data[start * row * e:(start + count) * row * e]
    return b"".join(data[(r * row + start) * e:(r * row + start + count) * e] for r in range(shape[0]))


def join_columns(pieces, rows, dtype):
    """The [rows, sum of widths] tensor whose column blocks are `pieces`, in order."""
    if ELEMENT_BITS[dtype] == 4:
        parts = [(elements(p), p["shape"][1]) for p in pieces]
        return pack([v for r in range(rows) for values, w in parts for v in values[r * w:(r + 1) * w]])
    e = ELEMENT_BITS[dtype] // 8
    return b"".join(p["bytes"][r * p["shape"][1] * e:(r + 1) * p["shape"][1] * e]
                    for r in range(rows) for p in pieces)


def main():
    full_path, sharded_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config, full, _, _ = read_artifact(full_path)
    _, sharded, shards, programs = read_artifact(sharded_path)
    if len(shards) != n or any(t["rank"] >= n for t in sharded):
        print("error: the artifact is sharded over %d ranks, not %d" % (len(shards), n))
        return 1
    by_name = {t["name"]: t for t in full}

    def expected_slice_of(name, rank):
        try:
            return expected_slice(name, config, n, rank, by_name)
        except ValueError as e:  # the contract cannot cut this tensor: report, do not trace
            print("error:", e)
            sys.exit(1)
    errors = []
    seen = set()
    share = [0] * n
    replicated = 0
    for t in sharded:
        source = by_name.get(t["name"])
        if source is None or t["dtype"] not in ELEMENT_BITS or t["dtype"] != source["dtype"]:
            errors.append("unexpected tensor %s (%s)" % (t["name"], t["dtype"]))
            continue
        seen.add((t["name"], t["rank"]))
        want = expected_slice_of(t["name"], max(t["rank"], 0))
        if t["rank"] < 0:
            replicated += 1
            if want is not None:
                errors.append("%s is replicated, the contract shards it" % t["name"])
            elif t["bytes"] != source["bytes"]:
                errors.append("replicated %s differs from the unsharded tensor" % t["name"])
            continue
        share[t["rank"]] += t["size"]
        if want is None:
            errors.append("%s on rank %d: the contract replicates it" % (t["name"], t["rank"]))
        elif t["bytes"] != cut(source, *want):
            errors.append("%s on rank %d is not slice %s of the unsharded tensor"
                          % (t["name"], t["rank"], want))
    for t in full:
        ranks = range(n) if expected_slice_of(t["name"], 0) is not None else [-1]
        for r in ranks:
            if (t["name"], r) not in seen:
                errors.append("%s is missing on rank %d" % (t["name"], r))
    # Concatenation in rank order gives back each tensor (a kv head shared by ranks once).
    for t in full:
        if expected_slice_of(t["name"], 0) is None:
            continue
        parts = [s for r in range(n) for s in sharded
                 if s["name"] == t["name"] and s["rank"] == r]
        dim = expected_slice_of(t["name"], 0)[0]
        pieces, last = [], None
        for r, p in enumerate(parts):
            span = expected_slice_of(t["name"], r)[1:]
            if span != last:
                pieces.append(p)
            last = span
        if dim == 0:
            joined = b"".join(p["bytes"] for p in pieces)
        else:
            joined = join_columns(pieces, t["shape"][0], t["dtype"])
        if joined != t["bytes"]:
            errors.append("the ranks' slices of %s do not concatenate to it" % t["name"])
    # Blob order: replicated, then rank by rank.
    order = [t["rank"] for t in sorted(sharded, key=lambda t: t["offset"])]
    if order != sorted(order):
        errors.append("blob order is not replicated, rank 0, rank 1, ...: %s" % order)
    for r in range(n):
        mine = [t for t in sharded if t["rank"] == r]
        want = (r, min(t["offset"] for t in mine),
                max(t["offset"] + t["size"] for t in mine) - min(t["offset"] for t in mine))
        if r >= len(shards) or shards[r] != want:
            errors.append("shard of rank %d is %s, its tensors span %s"
                          % (r, shards[r] if r < len(shards) else None, want))
    if [rank for _, rank in programs] != list(range(n)):
        errors.append("programs' tp_ranks are %s" % [rank for _, rank in programs])
    for e in errors:
        print("error:", e)
    if errors:
        return 1
    total = sum(share)
    print("OK: %d sharded tensors on %d ranks, %d replicated, all slices exact; programs %s"
          % (len(sharded) - replicated, n, replicated, ", ".join(p for p, _ in programs)))
    for r in range(n):
        print("rank %d: %d sharded bytes, %.3f of the sharded total (1/N = %.3f)"
              % (r, share[r], share[r] / total, 1.0 / n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
