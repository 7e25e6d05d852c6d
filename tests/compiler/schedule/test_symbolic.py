"""Index simplification must never change a value: random expressions, checked exhaustively."""

from __future__ import annotations

import itertools
import random

from luminal.compiler.schedule.symbolic import Div, Dyn, Lin, Mod, Var


def evaluate(e: Lin, env: dict[Var, int]) -> int:
    total = e.const
    for atom, c in e.terms:
        if isinstance(atom, Var):
            value = env[atom]
        elif isinstance(atom, Div):
            value = evaluate(atom.x, env) // atom.d
        elif isinstance(atom, Mod):
            value = evaluate(atom.x, env) % atom.d
        else:
            raise AssertionError(atom)
        total += c * value
    return total


def test_random_div_mod_chains_keep_their_value() -> None:
    rng = random.Random(0)
    for _ in range(400):
        vs = [Var(f"v{k}", rng.randint(1, 6)) for k in range(3)]
        expr = Lin(const=rng.randint(0, 20))
        plain = [lambda env, c=expr.const: c]
        for v in vs:
            k = rng.randint(0, 12)
            expr = expr + Lin.of(v) * k
            plain.append(lambda env, v=v, k=k: k * env[v])

        def direct(env: dict[Var, int], parts=tuple(plain)) -> int:
            return sum(p(env) for p in parts)

        ops = [(rng.choice("/%"), rng.randint(1, 9), rng.randint(0, 4)) for _ in range(3)]
        simplified = expr
        for op, d, k in ops:
            simplified = (simplified // d if op == "/" else simplified % d) + Lin.of(vs[0]) * k
        for values in itertools.product(*(range(v.size) for v in vs)):
            env = dict(zip(vs, values, strict=True))
            want = direct(env)
            for op, d, k in ops:
                want = (want // d if op == "/" else want % d) + k * env[vs[0]]
            assert evaluate(simplified, env) == want, (simplified.c(), env)


def test_window_index_collapses_to_affine() -> None:
    q, o = Var("q", 3), Var("o", 5)  # kernel 3, stride 2 over a length-12 axis
    flat = Lin.of(q) * 13 + Lin.of(o) * 2
    assert (flat % 12).c() == "2*o + q"
    assert (flat // 12).c() == "q"
    assert (flat % 12).is_affine


def test_contiguous_reshape_round_trip_is_free() -> None:
    a, b = Var("a", 3), Var("b", 4)
    flat = Lin.of(a) * 4 + b
    assert (flat // 4) == Lin.of(a) and (flat % 4) == Lin.of(b)


def test_dynamic_index_bounds_and_code() -> None:
    g = Dyn("g7", 10)
    e = Lin.of(g) * 4 + 3
    assert e.bounds == (3, 39) and not e.is_affine and e.c() == "4*g7 + 3"


def test_an_unflattened_index_flattened_again_is_the_index() -> None:
    """row_major(unflatten(i)) over any shape is i itself: no division left to compute."""
    i = Var("i", 784)
    flat = Lin.of(i)
    assert ((flat // 28) * 28 + flat % 28) == flat
    j = Var("j", 2 * 3 * 5)
    three = ((Lin.of(j) // 15) * 15 + ((Lin.of(j) // 5) % 3) * 5 + Lin.of(j) % 5) * 2 + 7
    assert three == Lin.of(j) * 2 + 7
    # a coefficient that does not fit the divisor keeps the division (and its value)
    kept = (flat // 28) * 27 + flat % 28
    assert not kept.is_affine
    assert all(evaluate(kept, {i: v}) == (v // 28) * 27 + v % 28 for v in range(784))


def test_merged_loops_read_the_same_elements() -> None:
    """`merge_loops` joins (oh, ow) of a 1x1 convolution into one loop; loops an index
    does not step through as one stay apart (a padded window's row and column)."""
    from luminal.compiler.schedule.indexing import merge_loops

    c, oh, ow = Var("c", 3), Var("oh", 4), Var("ow", 5)
    img = Lin.of(c) * 20 + Lin.of(oh) * 5 + ow  # [c, oh, ow] contiguous
    out = Lin.of(c) * 20 + Lin.of(oh) * 5 + ow
    padded = Lin.of(c) * 42 + Lin.of(oh) * 7 + ow  # a window of a [c, 6, 7] padded image
    loops, reduced, (a, b) = merge_loops([c, oh, ow], frozenset({c}), [img, out])
    (w,) = [v for v in loops if v.size == 20]
    assert len(loops) == 2 and reduced == frozenset({c})
    assert a == Lin.of(c) * 20 + Lin.of(w) and b == a
    kept, _, _ = merge_loops([c, oh, ow], frozenset({c}), [img, padded])
    assert kept == [c, oh, ow]


def test_a_quotient_by_a_multiple_of_a_coefficient_drops_the_low_part() -> None:
    """A [56, 56, 384] token index 384*w + c (w the merged positions): divided by the
    56*384 of a row it is w // 56, and its unflatten-then-row-major round trip is affine."""
    w, c = Var("w", 56 * 56), Var("c", 384)
    x = Lin.of(w) * 384 + c
    assert x // (56 * 384) == Lin.of(w) // 56
    assert x % (56 * 384) == (Lin.of(w) % 56) * 384 + c
    trip = (x // (56 * 384)) * (56 * 384) + ((x // 384) % 56) * 384 + x % 384
    assert trip == x
    for wv, cv in itertools.product(range(0, 56 * 56, 97), range(0, 384, 61)):
        env = {w: wv, c: cv}
        flat = 384 * wv + cv
        assert evaluate(x // (56 * 384), env) == flat // (56 * 384)
        assert evaluate(x % (56 * 384), env) == flat % (56 * 384)
