"""RFC 9162 tree hashes and consistency proofs, against a direct reading of the RFC."""

from __future__ import annotations

import hashlib

import pytest

from luminal.metering.ledger import merkle


def _leaf(k: int) -> str:
    return hashlib.sha256(b"\x00" + str(k).encode()).hexdigest()


def _mth(leaves: list[str]) -> str:
    """RFC 9162 §2.1.1, written out independently: split at the largest power of 2 < n."""
    if not leaves:
        return hashlib.sha256(b"").hexdigest()
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    left, right = _mth(leaves[:k]), _mth(leaves[k:])
    return hashlib.sha256(b"\x01" + bytes.fromhex(left) + bytes.fromhex(right)).hexdigest()


LEAVES = [_leaf(k) for k in range(33)]


def test_roots_match_the_rfc_definition() -> None:
    for n in range(len(LEAVES) + 1):
        assert merkle.root(LEAVES[:n]) == _mth(LEAVES[:n])


def test_rfc_example_tree_of_seven_has_the_documented_proof_shape() -> None:
    # RFC 9162 §2.1.5: PROOF(3, D[7]) = [c, d, g, l]; PROOF(4, D[7]) = [l]; PROOF(6, D[7]) = [i, j, k]
    assert len(merkle.consistency(LEAVES[:7], 3)) == 4
    assert merkle.consistency(LEAVES[:7], 4) == [_mth(LEAVES[4:7])]
    assert len(merkle.consistency(LEAVES[:7], 6)) == 3


def test_every_consistency_proof_verifies_and_a_rewritten_history_does_not() -> None:
    for n in range(1, len(LEAVES) + 1):
        for m in range(1, n + 1):
            proof = merkle.consistency(LEAVES[:n], m)
            root_m, root_n = merkle.root(LEAVES[:m]), merkle.root(LEAVES[:n])
            assert merkle.verify_consistency(m, n, root_m, root_n, proof)
            forked = [*LEAVES[: m - 1], _leaf(1000)]  # the old tree's last record rewritten
            if m < n:
                assert not merkle.verify_consistency(m, n, merkle.root(forked), root_n, proof)
                assert not merkle.verify_consistency(m, n, root_m, root_n, proof[:-1])


@pytest.mark.parametrize(("m", "n"), [(3, 2), (-1, 4)])
def test_sizes_out_of_order_do_not_verify(m: int, n: int) -> None:
    assert not merkle.verify_consistency(m, n, merkle.EMPTY, merkle.EMPTY, [])
