"""A Merkle tree over the ledger's records, as RFC 9162 (Certificate Transparency v2) §2.1.

    MTH({})      = SHA-256()
    MTH({d0})    = the leaf hash, SHA-256(0x00 || d0)   (a record's `hash`)
    MTH(D[n])    = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n]))   k: the largest power of 2 < n

A consistency proof between the tree of the first `m` records and the tree of `n` shows
the larger tree extends the smaller: what a usage export carries, so the vendor sees that
each export continues the previous one and rewrites nothing (§2.1.4).
Hashes are hex strings here, as records carry them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

EMPTY = hashlib.sha256(b"").hexdigest()


def _node(left: str, right: str) -> str:
    return hashlib.sha256(b"\x01" + bytes.fromhex(left) + bytes.fromhex(right)).hexdigest()


def _split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


def root(leaves: Sequence[str]) -> str:
    """MTH over leaf hashes."""
    n = len(leaves)
    if n == 0:
        return EMPTY
    if n == 1:
        return leaves[0]
    k = _split(n)
    return _node(root(leaves[:k]), root(leaves[k:]))


def consistency(leaves: Sequence[str], m: int) -> list[str]:
    """PROOF(m, D[n]): the consistency proof from the first `m` leaves to all of them."""
    n = len(leaves)
    if not 0 <= m <= n:
        raise ValueError(f"consistency proof from {m} to {n}: {m} is not in 0..{n}")
    if m in (0, n):
        return []
    return _subproof(m, leaves, True)


def _subproof(m: int, leaves: Sequence[str], whole: bool) -> list[str]:
    n = len(leaves)
    if m == n:
        return [] if whole else [root(leaves)]
    k = _split(n)
    if m <= k:
        return [*_subproof(m, leaves[:k], whole), root(leaves[k:])]
    return [*_subproof(m - k, leaves[k:], False), root(leaves[:k])]


def verify_consistency(m: int, n: int, root_m: str, root_n: str, proof: Sequence[str]) -> bool:
    """Whether `proof` shows the tree of size n (root_n) extends the one of size m (root_m)."""
    if not 0 <= m <= n:
        return False
    if m == n:
        return root_m == root_n and not proof
    if m == 0:
        return root_m == EMPTY and not proof
    path = list(proof)
    if m & (m - 1) == 0:  # m is a power of two: its root is a node of the larger tree
        path.insert(0, root_m)
    if not path:
        return False
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            fr = _node(c, fr)
            sr = _node(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = _node(sr, c)
        fn >>= 1
        sn >>= 1
    return fr == root_m and sr == root_n and sn == 0


__all__ = ["EMPTY", "consistency", "root", "verify_consistency"]
