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
and prints each rank's share of the sharded bytes. Tensors must be f32, f16 or bf16.
"""
import re
import struct
import sys

ELEMENT_BYTES = {"f32": 4, "f16": 2, "bf16": 2}


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


DTYPES = {1: "f32", 2: "f16", 3: "bf16"}


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


def blocks(total, parts):
    """Contiguous blocks whose sizes differ by at most one, larger first."""
    out, start = [], 0
    for i in range(parts):
        size = total // parts + (1 if i < total % parts else 0)
        out.append((start, size))
        start += size
    return out


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


def expected_slice(name, config, n, rank):
    """(dim, start, count) of rank's slice of tensor `name`, or None when replicated."""
    d = config["head_dim"]
    (qs, qc), (ks, kc) = heads(config["heads"], config["kv_heads"], n)[rank]
    ms, mc = blocks(config["intermediate"], n)[rank]
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


def cut(t, dim, start, count):
    """Bytes of the slice [start, start + count) along dim of tensor t (rank 1 or 2)."""
    e = ELEMENT_BYTES[t["dtype"]]
    shape, data = t["shape"], t["bytes"]
    if dim == 0:
        row = e * (shape[1] if len(shape) == 2 else 1)
        return data[start * row:(start + count) * row]
    row = shape[1] * e
    return b"".join(data[r * row + start * e:r * row + (start + count) * e]
                    for r in range(shape[0]))


def main():
    full_path, sharded_path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    config, full, _, _ = read_artifact(full_path)
    _, sharded, shards, programs = read_artifact(sharded_path)
    if len(shards) != n or any(t["rank"] >= n for t in sharded):
        print("error: the artifact is sharded over %d ranks, not %d" % (len(shards), n))
        return 1
    by_name = {t["name"]: t for t in full}
    errors = []
    seen = set()
    share = [0] * n
    replicated = 0
    for t in sharded:
        source = by_name.get(t["name"])
        if source is None or t["dtype"] not in ELEMENT_BYTES:
            errors.append("unexpected tensor %s (%s)" % (t["name"], t["dtype"]))
            continue
        seen.add((t["name"], t["rank"]))
        want = expected_slice(t["name"], config, n, max(t["rank"], 0))
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
        ranks = range(n) if expected_slice(t["name"], config, n, 0) is not None else [-1]
        for r in ranks:
            if (t["name"], r) not in seen:
                errors.append("%s is missing on rank %d" % (t["name"], r))
    # Concatenation in rank order gives back each tensor (a kv head shared by ranks once).
    for t in full:
        if expected_slice(t["name"], config, n, 0) is None:
            continue
        parts = [s for r in range(n) for s in sharded
                 if s["name"] == t["name"] and s["rank"] == r]
        dim = expected_slice(t["name"], config, n, 0)[0]
        pieces, last = [], None
        for r, p in enumerate(parts):
            span = expected_slice(t["name"], config, n, r)[1:]
            if span != last:
                pieces.append(p)
            last = span
        if dim == 0:
            joined = b"".join(p["bytes"] for p in pieces)
        else:
            e = ELEMENT_BYTES[t["dtype"]]
            joined = b"".join(b"".join(p["bytes"][row * p["shape"][1] * e:(row + 1) * p["shape"][1] * e]
                                       for p in pieces) for row in range(t["shape"][0]))
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
