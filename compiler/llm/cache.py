"""The KV cache a decoder session holds, and its portable transfer layout.

In memory (what the step graphs read): per layer, K and V each one f32 array
`[capacity, batch, kv_heads, head_dim]`, position-major, so the first `c` positions are
a contiguous prefix that a step compiled for capacity `c` reads in place.  `lengths[b]`
is how many positions sequence `b` holds.  The cache is written only where it grows:
a prefill's rows once, then one row per sequence per step (`append`); the step graphs
read it by pointer, never copied.

To move a cache to another device (`to_blocks` / `from_blocks`) it is laid out
device-neutrally, per sequence, per layer, K then V, per KV head, one contiguous
`[length, head_dim]` little-endian f32 block, preceded by a small JSON header naming
the shape (`BLOCKS_FORMAT`).  The receiver may hold any capacity at least the lengths.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence

import numpy as np

from luminal.errors import IntegrityError, UsageError

__all__ = ["BLOCKS_FORMAT", "KVCache"]

BLOCKS_FORMAT = "luminal-kv-blocks/1"
_HEADER = struct.Struct("<I")  # the JSON header's length in bytes


class KVCache:
    def __init__(
        self, layers: int, batch: int, kv_heads: int, head_dim: int, capacity: int
    ) -> None:
        self.layers, self.batch = layers, batch
        self.kv_heads, self.head_dim, self.capacity = kv_heads, head_dim, capacity
        shape = (capacity, batch, kv_heads, head_dim)
        self.arrays = [np.zeros(shape, np.float32) for _ in range(2 * layers)]
        self.lengths = np.zeros(batch, np.int64)

    def prefix(self, capacity: int) -> list[np.ndarray]:
        """Views of the first `capacity` positions of every K and V (contiguous)."""
        if capacity > self.capacity:
            raise UsageError(f"a step of capacity {capacity} exceeds the cache's {self.capacity}")
        return [a[:capacity] for a in self.arrays]

    def fill(self, kv: Sequence[np.ndarray], lengths: Sequence[int]) -> None:
        """Take a prefill's K/V (each `[P, batch, kv_heads, head_dim]`): the first
        `lengths[b]` rows of sequence b."""
        lengths = np.asarray(lengths, np.int64)
        if len(kv) != len(self.arrays) or lengths.shape != (self.batch,):
            raise UsageError("the prefill's outputs do not match the cache")
        if lengths.max(initial=0) > self.capacity:
            raise UsageError(
                f"a prompt of {lengths.max()} tokens exceeds the cache's {self.capacity}"
            )
        for dst, src in zip(self.arrays, kv, strict=True):
            for b, n in enumerate(lengths):
                dst[:n, b] = src[:n, b]
        self.lengths = lengths.copy()

    def append(self, new: Sequence[np.ndarray]) -> None:
        """Write one step's K/V (each `[batch, kv_heads, head_dim]`) at each sequence's
        length, and count it."""
        if int(self.lengths.max(initial=0)) >= self.capacity:
            raise UsageError(f"the cache is full ({self.capacity} positions)")
        rows = np.arange(self.batch)
        for dst, src in zip(self.arrays, new, strict=True):
            dst[self.lengths, rows] = src
        self.lengths += 1

    def to_blocks(self) -> bytes:
        """The cache in the portable layout (module docstring)."""
        header = {
            "format": BLOCKS_FORMAT,
            "layers": self.layers,
            "kv_heads": self.kv_heads,
            "head_dim": self.head_dim,
            "lengths": [int(n) for n in self.lengths],
        }
        parts = [json.dumps(header, sort_keys=True).encode()]
        parts.insert(0, _HEADER.pack(len(parts[0])))
        for b, n in enumerate(self.lengths):
            for a in self.arrays:  # layer-major, K then V
                # [n, kv_heads, D] -> [kv_heads, n, D]: each head's rows contiguous
                parts.append(np.ascontiguousarray(a[:n, b].transpose(1, 0, 2), "<f4").tobytes())
        return b"".join(parts)

    @classmethod
    def from_blocks(cls, data: bytes, capacity: int) -> KVCache:
        """A cache of `capacity` holding what `to_blocks` wrote; IntegrityError on
        anything that is not such a layout."""
        try:
            (size,) = _HEADER.unpack_from(data, 0)
            header = json.loads(data[_HEADER.size : _HEADER.size + size])
            if header.get("format") != BLOCKS_FORMAT:
                raise ValueError(f"format {header.get('format')!r}, expected {BLOCKS_FORMAT}")
            layers, heads, dim = (int(header[k]) for k in ("layers", "kv_heads", "head_dim"))
            lengths = [int(n) for n in header["lengths"]]
        except (struct.error, ValueError, KeyError, TypeError) as err:
            raise IntegrityError(f"not a KV cache transfer: {err}") from None
        if min(layers, heads, dim, len(lengths)) < 1 or min(lengths) < 0:
            raise IntegrityError("a KV cache transfer with an empty or negative shape")
        if max(lengths) > capacity:
            raise UsageError(
                f"a transferred sequence of {max(lengths)} positions exceeds capacity {capacity}"
            )
        want = _HEADER.size + size + 4 * sum(lengths) * 2 * layers * heads * dim
        if len(data) != want:
            raise IntegrityError(f"a KV cache transfer of {len(data)} bytes, expected {want}")
        cache = cls(layers, len(lengths), heads, dim, capacity)
        at = _HEADER.size + size
        for b, n in enumerate(lengths):
            for a in cache.arrays:
                count = n * heads * dim
                block = np.frombuffer(data, "<f4", count, at).reshape(heads, n, dim)
                a[:n, b] = block.transpose(1, 0, 2)
                at += 4 * count
        cache.lengths = np.asarray(lengths, np.int64)
        return cache
