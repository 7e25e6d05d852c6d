"""Integer index expressions with the simplifications that make views free.

Every index the generated code computes is built here: loop variables with known ranges,
sums with constant coefficients, floor division and modulo by constants, and
data-dependent indices (gathers).  Construction simplifies: a reshape of a contiguous
buffer becomes a plain affine offset, and the sliding-window trick's `(q*(i+d) + o*s) mod i`
becomes `q*d + o*s` once the range of the remainder is known to fit.

Division and modulo are floor operations and are only rewritten when the dividend is
known to be non-negative, so C's truncating operators agree with them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Var:
    """A loop variable ranging over [0, size)."""

    name: str
    size: int


@dataclass(frozen=True, order=True)
class Dyn:
    """An index read from data at run time, already clamped into [0, size)."""

    code: str
    size: int


@dataclass(frozen=True)
class Div:
    x: Lin
    d: int


@dataclass(frozen=True)
class Mod:
    x: Lin
    d: int


Atom = Var | Dyn | Div | Mod


@dataclass(frozen=True)
class Lin:
    """const + sum(coeff * atom); terms sorted, no zero coefficients."""

    terms: tuple[tuple[Atom, int], ...] = ()
    const: int = 0

    # ---- construction -------------------------------------------------------------
    @staticmethod
    def of(x: Lin | Atom | int) -> Lin:
        if isinstance(x, Lin):
            return x
        if isinstance(x, int):
            return Lin((), x)
        return Lin(((x, 1),), 0)

    def __add__(self, other: Lin | Atom | int) -> Lin:
        o = Lin.of(other)
        coeffs = dict(self.terms)
        for atom, c in o.terms:
            coeffs[atom] = coeffs.get(atom, 0) + c
        const = self.const + o.const
        if any(isinstance(a, Mod) for a in coeffs):  # the only terms `_recombine` folds
            const = _recombine(coeffs, const)
        return Lin(_sorted(coeffs), const)

    def __mul__(self, k: int) -> Lin:
        if k == 0:
            return Lin()
        return Lin(tuple((a, c * k) for a, c in self.terms), self.const * k)

    def __floordiv__(self, d: int) -> Lin:
        return floordiv(self, d)

    def __mod__(self, d: int) -> Lin:
        return mod(self, d)

    # ---- facts ----------------------------------------------------------------------
    @property
    def bounds(self) -> tuple[int, int]:
        lo = hi = self.const
        for atom, c in self.terms:
            alo, ahi = atom_bounds(atom)
            lo += min(c * alo, c * ahi)
            hi += max(c * alo, c * ahi)
        return lo, hi

    @property
    def is_affine(self) -> bool:
        """Only loop variables: no division, modulo or data-dependent index."""
        return all(isinstance(a, Var) for a, _ in self.terms)

    def coeff(self, var: Var) -> int:
        return dict(self.terms).get(var, 0)

    def substitute(self, mapping: dict[Var, Lin]) -> Lin:
        out = Lin((), self.const)
        for atom, c in self.terms:
            out = out + _subst_atom(atom, mapping) * c
        return out

    def c(self) -> str:
        """C source (int64 arithmetic)."""
        parts = []
        for atom, k in self.terms:
            code = _atom_c(atom)
            parts.append(code if k == 1 else f"{k}*{code}" if k > 0 else f"({k})*{code}")
        if self.const or not parts:
            parts.append(str(self.const) if self.const >= 0 else f"({self.const})")
        return " + ".join(parts)


def atom_bounds(atom: Atom) -> tuple[int, int]:
    if isinstance(atom, (Var, Dyn)):
        return 0, atom.size - 1
    lo, hi = atom.x.bounds
    if isinstance(atom, Div):
        return lo // atom.d, hi // atom.d
    return (0, atom.d - 1) if lo < 0 or hi >= atom.d else (lo, hi)


def floordiv(x: Lin, d: int) -> Lin:
    if d == 1:
        return x
    lo, hi = x.bounds
    if lo >= 0 and hi < d:
        return Lin()
    if _nonneg_atoms(x) and lo >= 0:
        exact, rest = _split(x, d)
        if exact.terms or exact.const:  # x // d == exact + rest // d when rest >= 0
            return exact + floordiv(rest, d)
        # nested division: (y // a) // b == y // (a*b) for y >= 0
        if (
            not x.const
            and len(x.terms) == 1
            and isinstance(x.terms[0][0], Div)
            and x.terms[0][1] == 1
        ):
            inner = x.terms[0][0]
            return floordiv(inner.x, inner.d * d)
        split = _factored(x, d)
        if split is not None:  # (g*h + l) // d == h // (d/g) when 0 <= l < g and g | d
            g, high, _ = split
            return floordiv(high, d // g)
    return Lin.of(Div(x, d))


def mod(x: Lin, d: int) -> Lin:
    if d == 1:
        return Lin()
    lo, hi = x.bounds
    if lo >= 0 and hi < d:
        return x
    if _nonneg_atoms(x) and lo >= 0:
        _, rest = _split(x, d)
        if rest.bounds[1] < d:
            return rest
        split = _factored(rest, d)
        if split is not None:  # (g*h + l) % d == g*(h % (d/g)) + l when 0 <= l < g and g | d
            g, high, low = split
            return mod(high, d // g) * g + low
        # (d*e + r) % (d) where r = k*(y // m)... leave as one modulo of the reduced sum
        return Lin.of(Mod(rest, d))
    return Lin.of(Mod(x, d))


def _recombine(coeffs: dict[Atom, int], const: int) -> int:
    """Fold c*d*(x // d) + c*(x % d) back into c*x, in place (returns the new constant):
    a row-major offset of an index unflattened into a shape (`d*(i // d) + i % d`) is
    the flat index again, with no division left for the code to compute.  Exact in C's
    truncating arithmetic as in floor arithmetic: x == (x / d) * d + x % d."""
    changed = True
    while changed:
        changed = False
        for atom, c in list(coeffs.items()):
            if not c or not isinstance(atom, Mod):
                continue
            quotient = floordiv(atom.x, atom.d)
            if quotient.const or len(quotient.terms) != 1 or quotient.terms[0][1] != 1:
                continue
            div = quotient.terms[0][0]
            if coeffs.get(div, 0) != c * atom.d:
                continue
            del coeffs[atom], coeffs[div]
            for a, k in atom.x.terms:
                coeffs[a] = coeffs.get(a, 0) + c * k
            const += c * atom.x.const
            changed = True
            break
    return const


def _factored(x: Lin, d: int) -> tuple[int, Lin, Lin] | None:
    """x as g*high + low with g a proper divisor of d (> 1) and 0 <= low < g: a flat
    index [.., 56, 384] divided by 56*384 is the position divided by 56.  The largest
    such g, or None.  x's atoms are non-negative (the caller checks)."""
    for g in sorted({math.gcd(d, c) for _, c in x.terms}, reverse=True):
        if g in (1, d):
            continue
        high = Lin(tuple((a, c // g) for a, c in x.terms if c % g == 0), 0)
        low = Lin(tuple((a, c) for a, c in x.terms if c % g), x.const)
        lo, hi = low.bounds
        if lo >= 0 and hi < g and high.terms:
            return g, high, low
    return None


def _nonneg_atoms(x: Lin) -> bool:
    return all(atom_bounds(a)[0] >= 0 for a, _ in x.terms)


def _split(x: Lin, d: int) -> tuple[Lin, Lin]:
    """x = d*exact + rest with every coefficient of rest and its constant in [0, d)."""
    exact: dict[Atom, int] = {}
    rest: dict[Atom, int] = {}
    for atom, c in x.terms:
        exact[atom] = c // d
        rest[atom] = c % d
    return Lin(_sorted(exact), x.const // d), Lin(_sorted(rest), x.const % d)


def _sorted(coeffs: dict[Atom, int]) -> tuple[tuple[Atom, int], ...]:
    return tuple(sorted(((a, c) for a, c in coeffs.items() if c), key=lambda t: _key(t[0])))


def _key(atom: Atom) -> tuple[int, str]:
    order = {Var: 0, Dyn: 1, Div: 2, Mod: 3}[type(atom)]
    return order, repr(atom)


def _subst_atom(atom: Atom, mapping: dict[Var, Lin]) -> Lin:
    if isinstance(atom, Var):
        return mapping.get(atom, Lin.of(atom))
    if isinstance(atom, Dyn):
        return Lin.of(atom)
    inner = atom.x.substitute(mapping)
    return floordiv(inner, atom.d) if isinstance(atom, Div) else mod(inner, atom.d)


def _atom_c(atom: Atom) -> str:
    if isinstance(atom, (Var, Dyn)):
        return atom.name if isinstance(atom, Var) else atom.code
    op = "/" if isinstance(atom, Div) else "%"
    return f"(({atom.x.c()}) {op} {atom.d})"
