"""The PyTorch frontend: every ATen op family, the suite models and `.pt2` archives.

Each case exports a small module with torch.export, lowers it, checks the IR against the
spec and compares the reference interpreter with torch eager (rtol 1e-4, atol 1e-5).
"""

from __future__ import annotations

import io
import json
import pickle
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from luminal.compiler.frontend import load_model
from luminal.compiler.frontend.torch import (
    from_exported_program,
    from_module,
    load_exported,
    lower,
)
from luminal.compiler.ir import DType, interpreter, spec
from luminal.errors import FrontendError, LuminalError, ModelLoadError, UnsupportedOp


class Fn(nn.Module):
    """A module whose forward is `fn`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _rand(*shape: int, seed: int = 0, low: float = -2.0, high: float = 2.0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.uniform(low, high, shape).astype(np.float32))


def _ints(*shape: int, high: int = 10, low: int = 0, seed: int = 1) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(low, high, shape))


def check(
    module: nn.Module,
    *inputs: torch.Tensor,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    decompose: bool = True,
) -> Any:
    """Lower `module` (through core ATen, or as export leaves it), run the IR, compare
    every output with torch eager."""
    torch.manual_seed(0)
    if decompose:
        model = from_module(module, inputs)
    else:
        model = lower(torch.export.export(module.eval(), inputs, strict=False))
    spec.check(model.graph)
    feeds = {name: t.numpy() for (name, _), t in zip(model.graph.inputs, inputs, strict=True)}
    got = interpreter.run(model.graph, feeds)
    with torch.no_grad():
        want = module(*inputs)
    want = list(want) if isinstance(want, tuple | list) else [want]
    assert len(want) == len(model.graph.outputs)
    for (name, _), w in zip(model.graph.outputs, want, strict=True):
        g = got[name]
        assert g.dtype == w.numpy().dtype, (name, g.dtype, w.dtype)
        assert g.shape == tuple(w.shape), (name, g.shape, tuple(w.shape))
        np.testing.assert_allclose(g, w.numpy(), rtol=rtol, atol=atol, err_msg=name)
    return model


X = _rand(2, 3, 4)
Y = _rand(2, 3, 4, seed=1)
ROW = _rand(4, seed=2)
POS = _rand(2, 3, 4, low=0.1, high=3.0, seed=3)
IA = _ints(2, 3, 4, low=-7, high=8)
IB = _ints(2, 3, 4, low=1, high=5, seed=2)

# ---- elementwise -----------------------------------------------------------------------

BINARY: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "add": (torch.add, (X, Y)),
    "add_alpha": (lambda x, y: torch.add(x, y, alpha=0.5), (X, Y)),
    "add_scalar": (lambda x: x + 1.5, (X,)),
    "add_broadcast": (torch.add, (X, ROW)),
    "sub_alpha": (lambda x, y: torch.sub(x, y, alpha=2), (X, Y)),
    "rsub": (lambda x: 3.0 - x, (X,)),
    "mul": (torch.mul, (X, Y)),
    "mul_scalar": (lambda x: x * -0.25, (X,)),
    "div": (torch.div, (X, POS)),
    "div_scalar": (lambda x: x / 3, (X,)),
    "div_int_true": (lambda a, b: a / b, (IA, IB)),
    "div_floor_int": (lambda a, b: torch.div(a, b, rounding_mode="floor"), (IA, IB)),
    "div_trunc_int": (lambda a, b: torch.div(a, b, rounding_mode="trunc"), (IA, IB)),
    "div_floor_float": (lambda x, y: torch.div(x, y, rounding_mode="floor"), (X, POS)),
    "div_trunc_float": (lambda x, y: torch.div(x, y, rounding_mode="trunc"), (X, POS)),
    "floor_divide_int": (lambda a, b: a // b, (IA, IB)),
    "pow_2": (lambda x: x**2, (X,)),
    "pow_3": (lambda x: torch.pow(x, 3), (X,)),
    "pow_half": (lambda x: x**0.5, (POS,)),
    "pow_neg": (lambda x: x**-1, (POS,)),
    "pow_frac": (lambda x: x**1.7, (POS,)),
    "pow_tensor": (torch.pow, (POS, X)),
    "pow_scalar_base": (lambda x: 2.0**x, (X,)),
    "pow_int": (lambda a: a**2, (IA,)),
    "maximum": (torch.maximum, (X, Y)),
    "minimum": (torch.minimum, (X, Y)),
    "fmod": (torch.fmod, (X, POS)),
    "remainder": (torch.remainder, (X, POS)),
    "remainder_int": (torch.remainder, (IA, IB)),
    "int_plus_float": (lambda a: a + 0.5, (IA,)),
    "int_times_tensor": (lambda a, x: a * x, (IA, X)),
    "where": (lambda x, y: torch.where(x > y, x, y), (X, Y)),
    "where_scalar": (lambda x: torch.where(x > 0, x, 0.0), (X,)),
    "masked_fill": (lambda x, y: x.masked_fill(y > 0, -1e9), (X, Y)),
    "masked_fill_broadcast": (lambda x: x.masked_fill(torch.arange(4) > 1, 0.0), (X,)),
    "clamp": (lambda x: torch.clamp(x, -0.5, 0.7), (X,)),
    "clamp_min": (lambda x: torch.clamp(x, min=0.1), (X,)),
    "clamp_max": (lambda x: x.clamp_max(0.3), (X,)),
    "clamp_tensor": (lambda x, y: torch.clamp(x, min=y), (X, Y)),
    "hardtanh": (F.hardtanh, (X,)),
    "relu6": (F.relu6, (X * 4,)),
}

COMPARE = {
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
}

UNARY: dict[str, tuple[Callable[..., Any], torch.Tensor]] = {
    "neg": (torch.neg, X),
    "neg_int": (torch.neg, IA),
    "abs": (torch.abs, X),
    "abs_int": (torch.abs, IA),
    "exp": (torch.exp, X),
    "exp2": (torch.exp2, X),
    "expm1": (torch.expm1, X),
    "log": (torch.log, POS),
    "log2": (torch.log2, POS),
    "log10": (torch.log10, POS),
    "log1p": (torch.log1p, POS),
    "sqrt": (torch.sqrt, POS),
    "sqrt_int": (torch.sqrt, IB),
    "rsqrt": (torch.rsqrt, POS),
    "reciprocal": (torch.reciprocal, POS),
    "square": (torch.square, X),
    "tanh": (torch.tanh, X * 3),
    "sigmoid": (torch.sigmoid, X * 3),
    "relu": (torch.relu, X),
    "relu_int": (torch.relu, IA),
    "gelu": (F.gelu, X),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), X),
    "erf": (torch.erf, X),
    "sin": (torch.sin, X),
    "cos": (torch.cos, X),
    "tan": (torch.tan, X * 0.5),
    "silu": (F.silu, X),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), X),
    "elu": (F.elu, X),
    "selu": (F.selu, X),
    "softplus": (F.softplus, X * 10),
    "hardswish": (F.hardswish, X * 3),
    "hardsigmoid": (F.hardsigmoid, X * 3),
    "sign": (torch.sign, IA.float()),
    "floor": (torch.floor, X * 3),
    "ceil": (torch.ceil, X * 3),
    "trunc": (torch.trunc, X * 3),
    "logical_not": (torch.logical_not, IA),
    "bitwise_not_bool": (lambda x: ~(x > 0), X),
    "bitwise_not_int": (torch.bitwise_not, IA),
    "to_int": (lambda x: (x * 3).to(torch.int32), X),
    "to_bool": (lambda a: a.bool(), IA),
    "to_double": (lambda x: x.double() * 2, X),
    "clone": (lambda x: x.clone() + 0, X),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name: str) -> None:
    fn, args = BINARY[name]
    check(Fn(fn), *args)


@pytest.mark.parametrize("name", sorted(COMPARE))
@pytest.mark.parametrize("other", ["tensor", "scalar", "int"])
def test_compare(name: str, other: str) -> None:
    fn = COMPARE[name]
    if other == "tensor":
        check(Fn(fn), torch.round(X), torch.round(Y))
    elif other == "scalar":
        check(Fn(lambda x: fn(x, 0.0)), torch.round(X))
    else:
        check(Fn(lambda a, x: fn(a, x)), IA, X)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical(name: str) -> None:
    fn = getattr(torch, name)
    check(Fn(lambda x, y: fn(x > 0, y)), X, IA)


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name: str) -> None:
    fn, x = UNARY[name]
    check(Fn(fn), x)


def test_float16_math_runs_in_float32_like_torch() -> None:
    x = X.half()
    check(Fn(lambda t: F.gelu(t) + torch.softmax(t, -1)), x, rtol=2e-3, atol=2e-3)


# ---- contractions ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (torch.mm, [(3, 4), (4, 5)]),
        (torch.bmm, [(2, 3, 4), (2, 4, 5)]),
        (torch.matmul, [(2, 1, 3, 4), (5, 4, 6)]),
        (torch.matmul, [(3, 4), (4,)]),
        (torch.matmul, [(4,), (2, 4, 5)]),
        (lambda a, b, c: torch.addmm(c, a, b, beta=0.5, alpha=2.0), [(3, 4), (4, 5), (5,)]),
        (lambda a, b, c: torch.baddbmm(c, a, b, alpha=0.5), [(2, 3, 4), (2, 4, 5), (2, 3, 5)]),
        (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
    ],
    ids=["mm", "bmm", "matmul_bcast", "matvec", "vecmat", "addmm", "baddbmm", "einsum"],
)
def test_contraction(fn: Callable[..., Any], shapes: list[tuple[int, ...]]) -> None:
    check(Fn(fn), *(_rand(*s, seed=k) for k, s in enumerate(shapes)))


@pytest.mark.parametrize("bias", [True, False])
def test_linear(bias: bool) -> None:
    torch.manual_seed(0)
    check(nn.Linear(4, 6, bias=bias), X)


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
        (lambda: nn.Conv2d(3, 8, 3, padding=1), (1, 3, 8, 8)),
        (lambda: nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(0, 1), dilation=2), (2, 4, 9, 7)),
        (lambda: nn.Conv2d(4, 8, 3, groups=2, bias=False), (1, 4, 6, 6)),
        (lambda: nn.Conv2d(4, 4, 3, groups=4, padding=1), (1, 4, 5, 5)),
        (lambda: nn.Conv2d(3, 4, 3, padding="same"), (1, 3, 6, 6)),
        (lambda: nn.Conv3d(2, 3, 2, stride=(1, 2, 1)), (1, 2, 4, 5, 3)),
    ],
    ids=["conv1d", "conv2d", "conv2d_strided_dilated", "grouped", "depthwise", "same", "conv3d"],
)
def test_convolution(make: Callable[[], nn.Module], shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    check(make(), _rand(*shape))


def test_transposed_convolution_is_unsupported() -> None:
    torch.manual_seed(0)
    with pytest.raises(UnsupportedOp, match="transposed"):
        from_module(nn.ConvTranspose2d(2, 2, 3), (_rand(1, 2, 4, 4),))


# ---- pooling and normalisation -------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "shape"),
    [
        (nn.MaxPool2d(3, stride=2, padding=1), (1, 2, 9, 9)),
        (nn.MaxPool2d(2, ceil_mode=True), (1, 2, 7, 7)),
        (nn.MaxPool2d(3, stride=1, dilation=2), (1, 1, 8, 8)),
        (nn.MaxPool1d(3, stride=2), (2, 3, 10)),
        (nn.MaxPool3d(2), (1, 1, 4, 4, 4)),
        (nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 8, 8)),
        (nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (1, 2, 8, 8)),
        (nn.AvgPool2d(2, ceil_mode=True), (1, 2, 7, 7)),
        (nn.AvgPool2d(2, divisor_override=3), (1, 2, 6, 6)),
        (nn.AvgPool1d(3), (2, 2, 9)),
        (nn.AdaptiveAvgPool2d((2, 3)), (1, 2, 6, 9)),
        (nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5)),
    ],
    ids=[
        "max2d",
        "max2d_ceil",
        "max2d_dilated",
        "max1d",
        "max3d",
        "avg2d",
        "avg2d_exclude_pad",
        "avg2d_ceil",
        "avg2d_divisor",
        "avg1d",
        "adaptive",
        "adaptive_global",
    ],
)
def test_pooling(module: nn.Module, shape: tuple[int, ...]) -> None:
    check(module, _rand(*shape))


def _batch_norm() -> nn.Module:
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-0.5, 0.5)
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    return bn


@pytest.mark.parametrize(
    ("make", "shape"),
    [
        (_batch_norm, (2, 3, 4, 4)),
        (lambda: nn.BatchNorm1d(3, affine=False), (4, 3)),
        (lambda: nn.LayerNorm(4), (2, 3, 4)),
        (lambda: nn.LayerNorm((3, 4), elementwise_affine=False), (2, 3, 4)),
        (lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
        (lambda: nn.Softmax(dim=1), (2, 3, 4)),
        (lambda: nn.LogSoftmax(dim=-1), (2, 3, 4)),
    ],
    ids=[
        "batch_norm",
        "batch_norm_1d",
        "layer_norm",
        "layer_norm_2d",
        "group_norm",
        "softmax",
        "log_softmax",
    ],
)
def test_normalisation(make: Callable[[], nn.Module], shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    check(make(), _rand(*shape) * 3)


def test_layer_norm_statistics_output_is_unsupported() -> None:
    def stats(x: torch.Tensor) -> Any:
        return torch.ops.aten.native_layer_norm.default(x, [4], None, None, 1e-5)[1]

    with pytest.raises(UnsupportedOp, match=r"native_layer_norm.*result 1"):
        from_module(Fn(stats), (X,))


def test_max_pool_indices_output_is_unsupported() -> None:
    def indices(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(x, 2, return_indices=True)[1]

    with pytest.raises(UnsupportedOp, match=r"max_pool2d_with_indices.*result 1"):
        from_module(Fn(indices), (_rand(1, 1, 4, 4),))


# ---- reductions ----------------------------------------------------------------------------

REDUCE: dict[str, tuple[Callable[..., Any], torch.Tensor]] = {
    "mean": (lambda x: x.mean(dim=(0, 2)), X),
    "mean_keepdim": (lambda x: x.mean(-1, keepdim=True), X),
    "mean_all": (torch.mean, X),
    "sum": (lambda x: x.sum(1), X),
    "sum_all": (torch.sum, X),
    "sum_int": (lambda a: a.sum(-1), IA),
    "sum_bool": (lambda x: (x > 0).sum(0), X),
    "amax": (lambda x: torch.amax(x, dim=(1, 2)), X),
    "amin": (lambda x: torch.amin(x, dim=0, keepdim=True), X),
    "max_dim": (lambda x: torch.max(x, dim=1), X),
    "min_dim": (lambda x: torch.min(x, dim=-1, keepdim=True), X),
    "max_all": (torch.max, X),
    "argmax": (lambda x: torch.argmax(x, dim=2), torch.round(X)),
    "argmin_all": (torch.argmin, X),
    "var": (lambda x: torch.var(x, dim=1), X),
    "std": (lambda x: torch.std(x, dim=-1, unbiased=False, keepdim=True), X),
    "var_mean": (lambda x: torch.var_mean(x, dim=(0, 1)), X),
    "any": (lambda x: (x > 1.5).any(dim=1), X),
    "all": (lambda x: (x > -1.5).all(), X),
    "cumsum": (lambda x: torch.cumsum(x, dim=1), X),
    "cumsum_int": (lambda a: torch.cumsum(a, dim=-1), IA),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduction(name: str) -> None:
    fn, x = REDUCE[name]
    check(Fn(fn), x)


# ---- shapes, indexing, creation -------------------------------------------------------------

IDX = torch.tensor([2, 0, 1, 2])
M = _rand(4, 5, 6)

SHAPE: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "view": (lambda x: x.view(3, -1) * 2, (X,)),
    "reshape_permute": (lambda x: x.permute(2, 0, 1).reshape(4, 6), (X,)),
    "transpose": (lambda x: x.transpose(0, 2) + 0, (X,)),
    "t": (lambda x: x[0].t() * 1, (X,)),
    "expand": (lambda r: r.expand(3, 2, 4) + 0, (ROW,)),
    "unsqueeze_squeeze": (lambda x: x.unsqueeze(1).squeeze(1).unsqueeze(-1).squeeze(), (X,)),
    "squeeze_noop": (lambda x: x.squeeze(1) + 0, (X,)),
    "flatten": (lambda x: torch.flatten(x, 1) + 0, (X,)),
    "slice": (lambda m: m[1:3, ::2, -4:] * 1, (M,)),
    "slice_clamped": (lambda m: m[:, 2:100] * 1, (M,)),
    "select": (lambda m: m[:, -2] * 1, (M,)),
    "cat": (lambda x, y: torch.cat([x, y, x], dim=1), (X, Y)),
    "cat_mixed_dtype": (lambda x, a: torch.cat([x, a], dim=-1), (X, IA)),
    "stack": (lambda x, y: torch.stack([x, y], dim=2), (X, Y)),
    "split": (lambda m: [t * 1 for t in torch.split(m, 2, dim=2)], (M,)),
    "split_sizes": (lambda m: [t * 1 for t in torch.split(m, [1, 3, 2], dim=-1)], (M,)),
    "chunk": (lambda m: [t * 1 for t in m.chunk(3, dim=1)], (M,)),
    "unbind": (lambda x: [t * 1 for t in x.unbind(1)], (X,)),
    "flip": (lambda x: torch.flip(x, [0, 2]), (X,)),
    "repeat": (lambda x: x.repeat(2, 1, 1, 2), (X,)),
    "pad": (lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), (X,)),
    "pad_negative": (lambda m: F.pad(m, (-1, 2, 1, -2)), (M,)),
    "tril": (lambda m: torch.tril(m, diagonal=1), (M,)),
    "triu": (lambda m: torch.triu(m, -1), (M,)),
    "index_select": (lambda m: torch.index_select(m, 1, torch.tensor([4, 0, 2])), (M,)),
    "index_tensor": (lambda m, i: m[i] * 1, (M, IDX[:3])),
    "index_middle": (lambda m, i: m[:, i] * 1, (M, IDX)),
    "index_two": (lambda m, i: m[i, i] * 1, (M, IDX)),
    "index_apart": (lambda m, i: m[i, :, i] * 1, (M, IDX)),
    "index_negative": (lambda m: m[:, torch.tensor([-1, 0, -3])] * 1, (M,)),
    "gather": (lambda m, i: torch.gather(m, 1, i), (M, _ints(4, 3, 6, high=5))),
    "scatter": (lambda m, i: m.scatter(2, i, -1.0), (M, _ints(4, 5, 2, high=6))),
    "scatter_src": (lambda m, i: m.scatter(1, i, m * 10), (M, _ints(2, 3, 6, high=5))),
    "arange": (lambda x: x + torch.arange(4), (X,)),
    "arange_float": (lambda x: x * torch.arange(0.5, 2.5, 0.5), (X,)),
    "full": (lambda x: x + torch.full((3, 4), 2.5), (X,)),
    "zeros_like": (lambda x: torch.zeros_like(x) + torch.ones(4), (X,)),
    "ones_like_int": (lambda a: torch.ones_like(a) * 3, (IA,)),
    "new_full": (lambda x: x.new_full((2, 1, 4), 7.0) - x, (X,)),
    "empty_fill": (lambda x: torch.empty(3, 4).fill_(2.0) * x, (X,)),
    "mixed_outputs": (lambda x: (x.argmax(-1), x.sum(), x > 0), (X,)),
}


@pytest.mark.parametrize("name", sorted(SHAPE))
def test_shape_and_indexing(name: str) -> None:
    fn, args = SHAPE[name]
    check(Fn(fn), *args)


def test_embedding() -> None:
    torch.manual_seed(0)
    check(nn.Embedding(10, 4), _ints(2, 5, high=10))


def test_causal_mask_buffer_like_gpt() -> None:
    class Masked(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mask", torch.tril(torch.ones(8, 8)).bool(), persistent=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = x.shape[-1]
            scores = x.masked_fill(~self.mask[:s, :s], float("-inf"))
            return torch.softmax(scores, dim=-1)

    check(Masked(), _rand(2, 6, 6))


# ---- ops that core-ATen decomposition removes, lowered from the export IR as is ---------

UNDECOMPOSED: dict[str, tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = {
    "tril_triu": (lambda m: torch.tril(m) + torch.triu(m, 1), (M,)),
    "masked_fill": (
        lambda x, y: x.masked_fill(x > 0, 1.0) + x.masked_fill(y > 0, y[0, 0, 0]),
        (X, Y),
    ),
    "activations": (
        lambda x: F.silu(x) + F.hardswish(x) + F.hardsigmoid(x) + F.softplus(x),
        (X * 3,),
    ),
    "views": (
        lambda x: [
            *x.transpose(0, 1).split(2, dim=-1),
            *x.unbind(0),
            torch.stack([x, x], dim=1),
            x[0].t(),
            x.unsqueeze(0).squeeze(0),
            x[:1].squeeze(),
            x.reshape(4, 6),
            x.T,
        ],
        (X,),
    ),
    "linear_matmul": (
        lambda x: F.linear(x, torch.ones(5, 4), torch.ones(5)) @ torch.ones(5, 2),
        (X,),
    ),
    "softmax_int": (lambda x: torch.softmax(x, -1) + torch.log_softmax(x, 1), (X,)),
    "creation": (
        lambda x: (
            x
            + torch.zeros(4)
            + torch.ones(3, 4)
            + torch.arange(4)
            + torch.arange(1, 5)
            + torch.zeros_like(x)
            + torch.ones_like(x)
            + x.new_zeros(4)
            + x.new_ones(4)
            + x.new_full((4,), 2.0)
        ),
        (X,),
    ),
    "arithmetic": (
        lambda x: (
            1
            - x
            + (2 - x) * 3
            + x.clamp_min(0)
            + x.clamp_max(0)
            + x / 2
            + x.square()
            + torch.std(x, 1, keepdim=True)
            + x.sum()
            + x.min()
            + x.type_as(x)
            + x.contiguous()
        ),
        (X,),
    ),
    "bool_ops": (lambda x: ((x > 0) & (x < 1)) | ((x > 2) ^ (x < -1)), (X,)),
    "where_scalars": (
        lambda x: (
            torch.where(x > 0, 1.0, x) + torch.where(x > 0, x, 2.0) + torch.where(x > 0, 1.0, 0.0)
        ),
        (X,),
    ),
    "pool_1d": (
        lambda x: F.avg_pool1d(x, 2).sum() + F.max_pool1d(x, 2).sum() + F.adaptive_avg_pool1d(x, 2),
        (X,),
    ),
    "any_all": (lambda x: (x > 0).any() & (x > 0).all() & (x > 0).all(dim=1).any(), (X,)),
    "baddbmm": (lambda a, b: torch.baddbmm(a[:, :, :2], a, b, beta=0.5), (X, _rand(2, 4, 2))),
    "dropout_eval": (lambda x: F.dropout(x, 0.5, training=False) * 2, (X,)),
    "to_dtype": (lambda x: x.to(torch.float64) + x.detach().double(), (X,)),
}


@pytest.mark.parametrize("name", sorted(UNDECOMPOSED))
def test_export_ir_ops_without_decomposition(name: str) -> None:
    fn, args = UNDECOMPOSED[name]
    check(Fn(fn), *args, decompose=False)
    check(Fn(fn), *args)


# ---- model facts, names and errors ---------------------------------------------------------


def test_loaded_model_facts_and_names() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.BatchNorm1d(3))
    model = from_module(module, (_rand(2, 4),), input_names=["features"], output_names=["y"])
    assert model.format == "torch"
    assert model.source == "torch.nn.Module Sequential"
    assert model.producer == f"torch {torch.__version__}"
    assert model.opset is None
    assert model.parameters == 4 * 3 + 3 + 4 * 3 + 1  # weights, BatchNorm stats and counter
    assert model.source_ops["aten.addmm.default"] == 1
    assert [s.name for s in model.graph.input_specs()] == ["features"]
    assert [s.name for s in model.graph.output_specs()] == ["y"]


def test_default_names_come_from_forward_arguments() -> None:
    class Two(nn.Module):
        def forward(self, tokens: torch.Tensor, scale: torch.Tensor) -> Any:
            return tokens * scale, tokens + scale

    model = from_module(Two(), (X, Y))
    assert [s.name for s in model.graph.input_specs()] == ["tokens", "scale"]
    assert [s.name for s in model.graph.output_specs()] == ["output0", "output1"]
    assert model.graph.input_specs()[0].dtype is DType.F32


def test_tied_weights_are_one_constant() -> None:
    torch.manual_seed(0)
    emb, head = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = check(nn.Sequential(emb, head), _ints(1, 3, high=10))
    assert model.parameters == 40


def test_unsupported_op_names_the_op() -> None:
    with pytest.raises(UnsupportedOp, match=r"aten\.sort") as info:
        from_module(Fn(lambda x: torch.sort(x, dim=-1).values), (X,))
    assert info.value.op.startswith("aten.sort")
    assert info.value.node


def test_symbolic_shapes_are_unsupported() -> None:
    batch = torch.export.Dim("batch")
    ep = torch.export.export(nn.ReLU(), (X,), dynamic_shapes=({0: batch},), strict=False)
    with pytest.raises(UnsupportedOp, match="static shapes"):
        from_exported_program(ep)


def test_buffer_mutation_is_unsupported() -> None:
    class Counter(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("count", torch.zeros(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.count.add_(1)
            return x + self.count

    with pytest.raises(UnsupportedOp, match="count"):
        from_module(Counter(), (X,))


def test_export_failure_is_one_line_frontend_error() -> None:
    def data_dependent(x: torch.Tensor) -> torch.Tensor:
        return x[x > 0]  # data-dependent output shape

    with pytest.raises(LuminalError) as info:
        from_module(Fn(lambda x: torch.nonzero(x)), (X,))
    assert "\n" not in str(info.value)
    with pytest.raises(LuminalError):
        from_module(Fn(data_dependent), (X,))


def test_lowering_error_becomes_frontend_error_with_op_and_node() -> None:
    def bad_gather(x: torch.Tensor) -> torch.Tensor:
        return x[torch.tensor([5])]  # index out of range: rejected while folding

    with pytest.raises(FrontendError) as info:
        from_module(Fn(bad_gather), (X,))
    assert info.value.op.startswith("aten.") and info.value.node


# ---- the model suite -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "cnn", "encoder", "gpt"])
def test_suite_model_matches_torch_eager(name: str) -> None:
    from benchmarks.models import build, example_feeds

    suite = build(name)
    start = time.perf_counter()
    model = from_module(
        suite.module,
        suite.example_inputs,
        input_names=suite.input_names,
        output_names=suite.output_names,
    )
    spec.check(model.graph)
    got = interpreter.run(model.graph, example_feeds(suite))
    with torch.no_grad():
        want = suite.module(*suite.example_inputs).numpy()
    out = got[suite.output_names[0]]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    print(f"{name}: max abs err {np.abs(out - want).max():.3g}, {time.perf_counter() - start:.1f}s")


# ---- .pt2 archives ---------------------------------------------------------------------------


def _small() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    return module.eval(), _rand(2, 64)


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    module, x = _small()
    path = tmp_path / "small.pt2"
    torch.export.save(torch.export.export(module, (x,), strict=False), path)
    return path


def test_pt2_round_trip(saved: Path) -> None:
    module, x = _small()
    for model in (load_exported(saved), load_model(saved)):
        assert model.source == str(saved) and model.format == "torch"
        got = interpreter.run(model.graph, {"input": x.numpy()})["output0"]
        with torch.no_grad():
            np.testing.assert_allclose(got, module(x).numpy(), rtol=1e-4, atol=1e-5)


def _corrupt(kind: str, data: bytes) -> bytes:
    if kind == "truncated":
        return data[: len(data) // 2]
    if kind == "bit_flipped":
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x40
        return bytes(flipped)
    if kind == "pickle":
        return pickle.dumps({"state": [1, 2, 3]})
    if kind == "torch_save":
        buf = io.BytesIO()
        torch.save({"w": torch.ones(3)}, buf)
        return buf.getvalue()
    if kind == "empty":
        return b""
    return b"not a model at all"


@pytest.mark.parametrize(
    "kind", ["truncated", "bit_flipped", "pickle", "torch_save", "empty", "junk"]
)
def test_bad_pt2_files_raise_model_load_error(kind: str, saved: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(_corrupt(kind, saved.read_bytes()))
    with pytest.raises(ModelLoadError) as info:
        load_exported(bad)
    assert "\n" not in str(info.value)


def _rewrite(src: Path, dst: Path, edit: Callable[[str, bytes], bytes | None], extra=()) -> None:  # type: ignore[no-untyped-def]
    """Copy the archive, passing each member through `edit` (None drops it)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info.filename, data)
        for name, data in extra:
            zout.writestr(name, data)


def _json_edit(suffix: str, change: Callable[[Any], None]) -> Callable[[str, bytes], bytes]:
    def edit(name: str, data: bytes) -> bytes:
        if name.endswith(suffix):
            obj = json.loads(data)
            change(obj)
            return json.dumps(obj).encode()
        return data

    return edit


def _first_node(obj: Any) -> dict[str, Any]:
    return obj["graph_module"]["graph"]["nodes"][0]


class _Boom:
    def __reduce__(self) -> Any:
        return (print, ("unpickled!",))


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("pickled_weight", ModelLoadError),
        ("aotinductor", ModelLoadError),
        ("foreign_target", UnsupportedOp),
        ("code_in_name", ModelLoadError),
        ("symbolic_expr", UnsupportedOp),
        ("missing_program", ModelLoadError),
    ],
)
def test_unsafe_pt2_archives_are_refused(
    case: str, error: type[Exception], saved: Path, tmp_path: Path, capsys: Any
) -> None:
    bad = tmp_path / "bad.pt2"
    payload = pickle.dumps(_Boom())
    root = zipfile.ZipFile(saved).namelist()[0].split("/")[0]

    def use_pickle(cfg: Any) -> None:
        entry = next(iter(cfg["config"].values()))
        entry["use_pickle"] = True

    def target(obj: Any) -> None:
        _first_node(obj)["target"] = "torch.os.system"

    def name(obj: Any) -> None:
        _first_node(obj)["outputs"][0]["as_tensor"]["name"] = "x = print('pwned'); y"

    def symbolic(obj: Any) -> None:
        node = _first_node(obj)
        node["inputs"].append({"name": "n", "arg": {"as_sym_int": {"as_expr": {"expr_str": "s0"}}}})

    if case == "pickled_weight":
        _rewrite(saved, bad, _json_edit("weights_config.json", use_pickle))
    elif case == "aotinductor":
        _rewrite(
            saved, bad, lambda n, d: d, extra=[(f"{root}/data/aotinductor/model/x.so", payload)]
        )
    elif case == "foreign_target":
        _rewrite(saved, bad, _json_edit("models/model.json", target))
    elif case == "code_in_name":
        _rewrite(saved, bad, _json_edit("models/model.json", name))
    elif case == "symbolic_expr":
        _rewrite(saved, bad, _json_edit("models/model.json", symbolic))
    else:
        _rewrite(saved, bad, lambda n, d: None if n.endswith("models/model.json") else d)
    with pytest.raises(error):
        load_exported(bad)
    assert "unpickled" not in capsys.readouterr().out
