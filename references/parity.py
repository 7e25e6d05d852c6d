"""Parity: does a result agree with a reference within tolerance?  The one rule.

    compare(got, want)                    -> Parity        every output, per-dtype defaults
    compare_arrays(name, got, want, tol)  -> OutputParity  one array under one tolerance
    agrees(got, want)                     -> (ok, max abs error), the search's kernel check

The rule, on the float64 values of a float array:

- an element passes when |got - want| <= atol + rtol x |want|;
- a NaN or an infinity must be the same value in both: NaN where NaN, +inf where +inf;
- the whole array also passes when, with every non-finite value in place, max|got - want|
  <= scale x max(max|want|, 1).  This is the kernel check's allowance for a reduction summed
  in another order: an element that is small only because large terms cancel carries their
  round-off, which is bounded by the array's magnitude, not by its own.

Integer and bool outputs (either side) must match exactly, compared as themselves.

Quantization: an output computed through quantization may differ from another runtime's
int8 run by one quantization step (runtimes fuse and requantize in different orders, so a
value near a rounding boundary lands on either side).  That allowance is the tolerance's
`step`, added to the bound: |got - want| <= step + atol + rtol x |want|.  It is keyed by what the graph
says (`references.quant_steps`): the scale of the DequantizeLinear that produces a float
output, 1 for an integer output of QuantizeLinear or a QLinear op; `compare(..., steps=)`
takes them by output name.  An output the graph does not compute through quantization
gets no step.

A quantized model's reference is not reproducible to one step: ONNX Runtime's own int8 run
moves when its graph optimizer fuses a QDQ unit into an integer kernel or leaves it in
float (a float sum one ulp off flips a rounding at the next QuantizeLinear, and the layers
after it carry the flip on).  On the public suite's ResNet-18 (QDQ) its optimized and
unoptimized runs differ by one output step on a quarter of the logits, on BERT (QDQ) by four
steps, on BERT (dynamic) by 0.023 on float outputs.  No implementation can match a reference
closer than the reference matches itself, so an output of a quantized model also passes
within the reference's `spread`: the largest difference between those two runs of ONNX
Runtime on the same inputs (`references.spread`), added to the bound:
|got - want| <= spread + step + atol + rtol x |want|.  A model without quantization has no
spread, and a QOperator model, whose integer kernels ORT runs the same way at every
optimization level, has none either.

There are two checks, each with defaults per dtype (`tolerance_for`):

    OUTPUT  a compiled model's outputs against an oracle or the customer's baseline
            (`luminal run --compare`, bench parity): numpy.allclose's rule, tight per dtype.
    KERNEL  a kernel variant, or the searched model, against the reference interpreter
            while the search measures it: looser per element, plus the scale clause,
            because a variant may reassociate sums (tiling, vectorized reductions).  Every
            float dtype that is computed on gets the same bound; bf16 is exact (the CPU
            backend only stores, moves and casts bf16, so its values are bit-exact or wrong).

A reduced-precision build (`luminal compile --precision fp16|bf16`) is compared in f32
against an f32 reference, so its outputs carry the reduced type's rounding, once per op,
compounded through the model: `precision_tolerance` is the one table of those bounds, and
every comparison of such a build (the compile's check, bench parity, benchmarks) holds
each float output to it instead of the dtype default:

    fp16  rtol 1e-2, atol 1e-2, scale 5e-2   (11-bit significand: 2^-11 per rounding)
    bf16  rtol 8e-2, atol 8e-2, scale 2e-1   (8-bit significand: 2^-8 per rounding)

The scale clause carries the allowance by the output's magnitude: a whole output passes
when max|got - want| <= scale x max(max|want|, 1).  Measured with one rounding per op
(the reference interpreter on the lowered graph against the f32 graph): the suite's
ResNet-50 (random weights, 50 layers deep) is off by 3.4% of its largest output in fp16
and 14% in bf16; its BERT by 0.0073 and 0.051 (outputs of magnitude ~5).

The reported maximum relative error ignores elements whose |want| is below atol; both
maxima are infinite when a NaN or infinity is out of place (the difference is unbounded).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import numpy as np

from luminal.compiler.ir.dtypes import is_float_dtype


class Check(enum.Enum):
    OUTPUT = "output"  # a model's outputs against an oracle or baseline
    KERNEL = "kernel"  # a kernel (or the searched model) against the reference interpreter


@dataclass(frozen=True)
class Tolerance:
    """An element passes when |got - want| <= atol + rtol x |want|; the whole array also
    passes when max|got - want| <= scale x max(max|want|, 1) (scale 0: no such clause)."""

    rtol: float
    atol: float
    scale: float = 0.0
    step: float = 0.0  # one quantization step: an element within it passes (integers too)
    spread: float = 0.0  # the reference's own disagreement between two of its runs

    @property
    def allowance(self) -> float:
        """What quantization adds to the bound of every element: one step plus the
        reference's spread."""
        return self.step + self.spread


EXACT = Tolerance(0.0, 0.0)

_KERNEL = Tolerance(1e-3, 1e-4, 1e-5)
_DEFAULTS: Mapping[Check, Mapping[str, Tolerance]] = MappingProxyType(
    {
        Check.OUTPUT: MappingProxyType(
            {
                "f64": Tolerance(1e-7, 1e-10),
                "f32": Tolerance(1e-4, 1e-5),
                "f16": Tolerance(1e-2, 1e-3),
                "bf16": Tolerance(2e-2, 1e-2),
            }
        ),
        Check.KERNEL: MappingProxyType({"f64": _KERNEL, "f32": _KERNEL, "f16": _KERNEL}),
    }
)

#: A reduced-precision build's bound against the f32 reference, by `--precision` name
#: (module docstring); fp32 and auto (which builds fp32) keep the dtype defaults.
PRECISION_TOLERANCE: Mapping[str, Tolerance] = MappingProxyType(
    {"fp16": Tolerance(1e-2, 1e-2, 5e-2), "bf16": Tolerance(8e-2, 8e-2, 2e-1)}
)

#: The short names of the float dtypes, as `--tol` and the bench report write them.
FLOAT_KEYS = ("f64", "f32", "f16", "bf16")
_NAMES = {"float64": "f64", "float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def dtype_key(dtype: np.dtype | str) -> str:
    """`f64`, `f32`, `f16`, `bf16`, or the numpy name of any other dtype."""
    if isinstance(dtype, str) and dtype in FLOAT_KEYS:
        return dtype
    name = np.dtype(dtype).name
    return _NAMES.get(name, name)


def tolerance_for(dtype: np.dtype | str, check: Check = Check.OUTPUT) -> Tolerance:
    """The default tolerance of `check` for arrays of `dtype` (a numpy dtype or name, or a
    short name such as `f32`); EXACT for integers, bools and anything without a default."""
    return _DEFAULTS[check].get(dtype_key(dtype), EXACT)


def precision_tolerance(precision: str) -> Tolerance | None:
    """The bound every float output of a build of `precision` (`fp32`, `fp16`, `bf16`; an
    enum's value) is held to against an f32 reference; None: the dtype defaults apply."""
    return PRECISION_TOLERANCE.get(str(getattr(precision, "value", precision)))


#: numpy's floats and ml_dtypes' bfloat16 (whose numpy kind is 'V', not 'f')
is_float = is_float_dtype


@dataclass(frozen=True)
class OutputParity:
    """One array's verdict.  `mismatched` counts elements outside the per-element bound (or
    with a non-finite value out of place); the array can still be `ok` by the scale clause."""

    name: str
    tolerance: Tolerance
    max_abs: float
    max_rel: float
    mismatched: int
    total: int
    ok: bool
    reason: str = ""

    def to_json(self) -> dict[str, object]:
        quant = {k: v for k in ("step", "spread") if (v := getattr(self.tolerance, k))}
        return {
            **quant,
            "name": self.name,
            "rtol": self.tolerance.rtol,
            "atol": self.tolerance.atol,
            "scale": self.tolerance.scale,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "mismatched": self.mismatched,
            "total": self.total,
            "ok": self.ok,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Parity:
    outputs: tuple[OutputParity, ...]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((o.max_rel for o in self.outputs), default=0.0)

    @property
    def rtol(self) -> float:
        """The loosest relative tolerance any output was held to (0: all exact)."""
        return max((o.tolerance.rtol for o in self.outputs), default=0.0)

    @property
    def atol(self) -> float:
        """The loosest absolute tolerance any output was held to (0: all exact)."""
        return max((o.tolerance.atol for o in self.outputs), default=0.0)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "rtol": self.rtol,
            "atol": self.atol,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "outputs": [o.to_json() for o in self.outputs],
        }


def compare(
    got: Mapping[str, np.ndarray],
    want: Mapping[str, np.ndarray],
    tolerances: Tolerance | Mapping[str, Tolerance] | None = None,
    check: Check = Check.OUTPUT,
    steps: Mapping[str, float] | None = None,
    spreads: Mapping[str, float] | None = None,
) -> Parity:
    """Every output of `want` (the reference), in its order, against `got`.

    `tolerances`: None takes `check`'s default for each output's dtype; one `Tolerance`
    holds every float output to it (`luminal run --rtol/--atol`); a mapping by dtype key
    (`f32`, ...) overrides the defaults per dtype (`luminal bench --tol`).  Integer and bool
    outputs are always exact, but for `steps`: one quantization step per output name, for
    outputs computed through quantization (`references.quant_steps`), and `spreads`: the
    reference's own spread per output of a quantized model (`references.spread`)."""
    results = []
    for name, ref in want.items():
        ref = np.asarray(ref)
        tol = with_step(_pick(tolerances, ref.dtype, check), (steps or {}).get(name, 0.0))
        tol = with_spread(tol, (spreads or {}).get(name, 0.0))
        if name in got:
            results.append(compare_arrays(name, got[name], ref, tol))
        else:
            results.append(
                OutputParity(name, tol, np.inf, np.inf, ref.size, ref.size, False, "missing")
            )
    return Parity(tuple(results))


def with_step(tol: Tolerance, step: float) -> Tolerance:
    """`tol` that also passes an element within one quantization step."""
    return tol if step <= tol.step else replace(tol, step=float(step))


def with_spread(tol: Tolerance, spread: float) -> Tolerance:
    """`tol` that also passes an element within the reference's own spread."""
    return tol if spread <= tol.spread else replace(tol, spread=float(spread))


def _pick(
    tolerances: Tolerance | Mapping[str, Tolerance] | None, dtype: np.dtype, check: Check
) -> Tolerance:
    if not is_float(dtype):
        return EXACT
    if isinstance(tolerances, Tolerance):
        return tolerances
    if tolerances is not None and dtype_key(dtype) in tolerances:
        return tolerances[dtype_key(dtype)]
    return tolerance_for(dtype, check)


def compare_arrays(name: str, got: np.ndarray, want: np.ndarray, tol: Tolerance) -> OutputParity:
    """The rule (module docstring) on one array; `want` is the reference."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        reason = f"shape {got.shape} != {want.shape}"
        return OutputParity(name, tol, np.inf, np.inf, want.size, want.size, False, reason)
    if not (is_float(got.dtype) and is_float(want.dtype)):
        tol = replace(EXACT, step=tol.step, spread=tol.spread)
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(g - w)
        both = np.isfinite(g) & np.isfinite(w)
        same_special = ~both & ((np.isnan(g) & np.isnan(w)) | (g == w))
        misplaced = int(np.count_nonzero(~both & ~same_special))
        if is_float(got.dtype) or is_float(want.dtype):
            outside = both & ~(diff <= tol.atol + tol.rtol * np.abs(w) + tol.allowance)
        elif tol.allowance:  # quantized integers: within step and spread of each other
            outside = np.abs(got.astype(np.int64) - want.astype(np.int64)) > tol.allowance
        else:  # integers and bools: their own values (float64 rounds above 2**53)
            outside = got != want
        mismatched = int(np.count_nonzero(outside)) + misplaced
        if misplaced:
            max_abs = max_rel = float("inf")
        else:
            max_abs = float(diff[both].max(initial=0.0))
            meaningful = both & (np.abs(w) > tol.atol)
            rel = diff / np.maximum(np.abs(w), np.finfo(np.float64).tiny)
            max_rel = float(rel[meaningful].max(initial=0.0))
    magnitude = float(np.abs(w[both]).max(initial=0.0))
    whole = not misplaced and tol.scale > 0 and max_abs <= tol.scale * max(magnitude, 1.0)
    ok = mismatched == 0 or whole
    return OutputParity(name, tol, max_abs, max_rel, mismatched, int(want.size), ok)


def agrees(
    got: np.ndarray,
    want: np.ndarray | None,
    check: Check = Check.KERNEL,
    tolerance: Tolerance | None = None,
) -> tuple[bool, float]:
    """Whether a kernel's (or the searched model's) result agrees with the reference
    interpreter's, and the largest absolute difference.  `want` is reshaped to `got`'s
    shape (a kernel writes its node's value through a view of the arena); None (no
    reference value) agrees.  The tolerance is `tolerance`, else `check`'s default for
    `got`'s dtype."""
    if want is None:
        return True, 0.0
    got = np.asarray(got)
    want = np.asarray(want).reshape(got.shape)
    tol = tolerance if tolerance is not None and is_float(got.dtype) else None
    result = compare_arrays("", got, want, tol or tolerance_for(got.dtype, check))
    return result.ok, result.max_abs
