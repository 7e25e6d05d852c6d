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
