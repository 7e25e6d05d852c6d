"""The public model suite.

Four reference models, built in code with fixed seeds and random weights (nothing is
downloaded): ``mlp``, ``cnn`` (ResNet-18 style), ``encoder`` (BERT-base style, 2 layers) and
``gpt`` (GPT-2 style, 2 blocks).  Every build of a given name yields identical weights and
identical example inputs, so the models can be exported to ONNX and compared bit-for-bit
across runs.

Command line::

    python -m benchmarks.models --list
    python -m benchmarks.models --export gpt -o gpt.onnx
    python -m benchmarks.models --export resnet50@8 --exporter dynamo -o r50.onnx

Names other than the four are the broad public suite (`benchmarks.public_models`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import math
import os
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

if TYPE_CHECKING:
    import onnx

__all__ = [
    "SUITE_NAMES",
    "SuiteModel",
    "build",
    "example_feeds",
    "export_onnx",
    "main",
]

SUITE_NAMES: tuple[str, ...] = ("mlp", "cnn", "encoder", "gpt")

_SEED = 0


@dataclass(frozen=True)
class SuiteModel:
    """One suite model: an eval-mode module plus named example inputs and output names."""

    name: str
    module: torch.nn.Module  # eval mode
    example_inputs: tuple[torch.Tensor, ...]
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]


# --------------------------------------------------------------------------------------------
# mlp
# --------------------------------------------------------------------------------------------


def _build_mlp() -> SuiteModel:
    torch.manual_seed(_SEED)
    module = nn.Sequential(
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
        nn.ReLU(),
        nn.Linear(512, 512),
    )
    x = torch.from_numpy(np.random.default_rng(_SEED).standard_normal((8, 512), dtype=np.float32))
    return SuiteModel("mlp", module.eval(), (x,), ("x",), ("y",))


# --------------------------------------------------------------------------------------------
# cnn: ResNet-18 style
# --------------------------------------------------------------------------------------------


class _BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.relu = nn.ReLU()
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False),
                nn.BatchNorm2d(out_ch),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class _ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        stages: list[nn.Module] = []
        in_ch = 64
        for i, width in enumerate((64, 128, 256, 512)):
            stride = 1 if i == 0 else 2
            stages.append(
                nn.Sequential(_BasicBlock(in_ch, width, stride), _BasicBlock(width, width, 1))
            )
            in_ch = width
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def _init_resnet(model: _ResNet18) -> None:
    """Kaiming convs and non-trivial BatchNorm statistics that keep activations O(1)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.0)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    # Damp the residual branch (as in "zero-init residual", but non-zero) so the
    # identity path dominates and the activations do not grow stage over stage.
    for m in model.modules():
        if isinstance(m, _BasicBlock):
            with torch.no_grad():
                m.bn2.weight.uniform_(0.2, 0.4)


def _build_cnn() -> SuiteModel:
    torch.manual_seed(_SEED)
    module = _ResNet18()
    _init_resnet(module)
    rng = np.random.default_rng(_SEED)
    x = torch.from_numpy(rng.standard_normal((1, 3, 224, 224), dtype=np.float32))
    return SuiteModel("cnn", module.eval(), (x,), ("x",), ("logits",))


# --------------------------------------------------------------------------------------------
# Transformers: explicit attention (plain matmul / softmax, no fused SDPA)
# --------------------------------------------------------------------------------------------


class _SelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)

    def _split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.reshape(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.out(ctx)


class _EncoderLayer(nn.Module):
    """BERT layer: post-LayerNorm, exact (erf) GELU."""

    def __init__(self, hidden: int, heads: int, ffn: int, eps: float) -> None:
        super().__init__()
        self.attn = _SelfAttention(hidden, heads)
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.fc2(self.act(self.fc1(x))))


class _Encoder(nn.Module):
    def __init__(
        self,
        vocab: int = 1024,
        max_pos: int = 128,
        hidden: int = 768,
        heads: int = 12,
        ffn: int = 3072,
        layers: int = 2,
        eps: float = 1e-12,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.ln = nn.LayerNorm(hidden, eps=eps)
        self.layers = nn.ModuleList(_EncoderLayer(hidden, heads, ffn, eps) for _ in range(layers))
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        x = self.tok(input_ids) + self.pos(self.position_ids[:, :seq])
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        return x


class _GPTBlock(nn.Module):
    """GPT-2 block: pre-LayerNorm, tanh-approximate GELU."""

    def __init__(self, hidden: int, heads: int, eps: float) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(hidden, eps=eps)
        self.attn = _SelfAttention(hidden, heads)
        self.ln2 = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), mask)
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class _GPT(nn.Module):
    def __init__(
        self,
        vocab: int = 1024,
        max_pos: int = 64,
        hidden: int = 768,
        heads: int = 12,
        layers: int = 2,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(_GPTBlock(hidden, heads, eps) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=eps)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.tok.weight  # tied, as in GPT-2
        causal = torch.tril(torch.ones(max_pos, max_pos)).to(torch.bool)
        self.register_buffer("causal_mask", causal.view(1, 1, max_pos, max_pos), persistent=False)
        self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0), persistent=False)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        seq = input_ids.shape[1]
        x = self.tok(input_ids) + self.pos(self.position_ids[:, :seq])
        mask = self.causal_mask[:, :, :seq, :seq]
        for block in self.blocks:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


def _init_transformer(module: nn.Module) -> None:
    """BERT / GPT-2 style init: N(0, 0.02) weights, zero biases, random LayerNorm affine."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.normal_(m.bias, std=0.02)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=0.02)
        elif isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.uniform_(0.8, 1.2)
                m.bias.uniform_(-0.1, 0.1)


def _token_ids(seq: int, vocab: int) -> torch.Tensor:
    rng = np.random.default_rng(_SEED)
    return torch.from_numpy(rng.integers(0, vocab, size=(1, seq), dtype=np.int64))


def _build_encoder() -> SuiteModel:
    torch.manual_seed(_SEED)
    module = _Encoder()
    _init_transformer(module)
    ids = _token_ids(128, 1024)
    return SuiteModel("encoder", module.eval(), (ids,), ("input_ids",), ("last_hidden_state",))


def _build_gpt() -> SuiteModel:
    torch.manual_seed(_SEED)
    module = _GPT()
    _init_transformer(module)
    ids = _token_ids(64, 1024)
    return SuiteModel("gpt", module.eval(), (ids,), ("input_ids",), ("logits",))


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------

_BUILDERS: dict[str, Callable[[], SuiteModel]] = {
    "mlp": _build_mlp,
    "cnn": _build_cnn,
    "encoder": _build_encoder,
    "gpt": _build_gpt,
}


def build(name: str) -> SuiteModel:
    """Build suite model ``name`` (deterministic: same weights and inputs on every call)."""
    builder = _BUILDERS.get(name)
    if builder is None:  # the broad public suite: torchvision and transformers models
        from benchmarks import public_models

        builder = functools.partial(public_models.build, name)
    # The builders seed torch's global generator; fork it so callers' RNG state is untouched.
    with torch.random.fork_rng(devices=[]):
        return builder()


def example_feeds(model: SuiteModel) -> dict[str, np.ndarray]:
    """The model's example inputs as an ONNX Runtime style feed: input name -> numpy array."""
    return {
        name: t.detach().cpu().numpy().copy()
        for name, t in zip(model.input_names, model.example_inputs, strict=True)
    }


@contextlib.contextmanager
def _native_stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr while inside: what native code prints (the
    TorchScript exporter logs the whole Torch IR graph when it gives up on GPT-2) stays out
    of a benchmark's table on stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporter's warnings and progress prints (its native ones go to stderr);
    no fused attention fast path."""
    fastpath = torch.backends.mha.get_fastpath_enabled()
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        _native_stdout_to_stderr(),
    ):
        warnings.simplefilter("ignore")
        # nn.MultiheadAttention's inference fast path is one fused op no exporter knows
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            yield
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)


#: Which axes of each input (by position) are symbolic, and their names: a dynamic export.
DynamicAxes = dict[str, dict[int, str]]


def export_onnx(
    model: SuiteModel,
    path: str | Path,
    opset: int = 18,
    exporter: str = "torchscript",
    dynamic: DynamicAxes | None = None,
) -> Path:
    """Export ``model`` to one self-contained ONNX file at ``path`` (weights inline).

    ``dynamic`` names symbolic axes, e.g. ``{"input_ids": {0: "batch", 1: "seq"}}``: the
    inputs get them, and so does the first output's leading axes where the input's are
    the same (``dynamic_axes`` / ``dynamic_shapes``, the way users export).

    The file is written to a temporary name next to ``path`` and moved into place with
    ``os.replace``, so readers never observe a partial file.  Returns ``path``.
    """
    import onnx  # local: only exporting needs it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Not mkstemp: that creates the file 0600; a plain new file gets the usual umask mode.
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with _quiet(), torch.no_grad():
            proto = (
                _export_proto(model, opset, dynamic)
                if exporter == "torchscript"
                else _dynamo(model, dynamic)
            )
        onnx.save_model(proto, str(tmp), save_as_external_data=False)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _export_proto(
    model: SuiteModel, opset: int, dynamic: DynamicAxes | None = None
) -> onnx.ModelProto:
    """Export with the TorchScript exporter into memory.

    The TorchScript exporter (``dynamo=False``) is used because, in inference mode and with
    ``TrainingMode.PRESERVE``, it emits plain standard ops, keeps ``BatchNormalization`` as its
    own node (the ``EVAL`` mode, and the dynamo exporter's optimizer, fold it into the preceding
    ``Conv``, so a compiler would never see it), writes no side files and takes about a second.
    """
    import onnx

    module = model.module.eval()  # PRESERVE exports the module's own mode: make it inference
    buf = io.BytesIO()
    torch.onnx.export(
        module,
        model.example_inputs,
        buf,
        input_names=list(model.input_names),
        output_names=list(model.output_names),
        opset_version=opset,
        do_constant_folding=True,
        training=torch.onnx.TrainingMode.PRESERVE,
        dynamo=False,
        dynamic_axes=_output_axes(model, dynamic) if dynamic else None,
    )
    return onnx.load_model_from_string(buf.getvalue())


def _output_axes(model: SuiteModel, dynamic: DynamicAxes) -> dict[str, dict[int, str]]:
    """The inputs' symbolic axes, and the first output's: the leading ones the first
    input shares (batch, and sequence for a text model)."""
    axes = {name: dict(ax) for name, ax in dynamic.items()}
    first = dynamic.get(model.input_names[0], {})
    lead = {k: v for k, v in first.items() if k == 0 or (k == 1 and 0 in first)}
    axes[model.output_names[0]] = lead
    return axes


def _grown(x: torch.Tensor, axes: dict[int, str]) -> torch.Tensor:
    """`x` repeated to size 2 along each of `axes` where it has size 1."""
    for axis in axes:
        if x.shape[axis] == 1:
            x = torch.cat([x, x], dim=axis)
    return x


def _dynamo(model: SuiteModel, dynamic: DynamicAxes | None = None) -> onnx.ModelProto:
    """Export with the dynamo exporter (`torch.onnx.export(..., dynamo=True)`), the one
    torch recommends: its optimizer folds BatchNormalization into Conv and emits the
    opset it chooses (18 or later)."""
    shapes = None
    examples = model.example_inputs
    if dynamic:
        dims: dict[str, torch.export.Dim] = {}
        shapes = tuple(
            {k: dims.setdefault(d, torch.export.Dim(d)) for k, d in dynamic.get(n, {}).items()}
            or None
            for n in model.input_names
        )
        # torch.export specializes a size-1 example into the program: trace at size 2
        examples = tuple(
            _grown(x, dynamic.get(n, {})) for x, n in zip(examples, model.input_names, strict=True)
        )
    program = torch.onnx.export(
        model.module.eval(),
        examples,
        input_names=list(model.input_names),
        output_names=list(model.output_names),
        dynamo=True,
        verbose=False,
        dynamic_shapes=shapes,
    )
    return program.model_proto


EXPORTERS = ("torchscript", "dynamo")


def main(argv: list[str] | None = None) -> int:
    """Command line entry point: ``--list`` or ``--export NAME [-o PATH] [--opset N]``."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.models", description="Build and export the public model suite."
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--list", action="store_true", help="list the suite's model names")
    group.add_argument(
        "--export", metavar="NAME", help="model to export (a suite or public suite name)"
    )
    parser.add_argument("--exporter", choices=EXPORTERS, default="torchscript")
    parser.add_argument("-o", "--output", metavar="PATH", help="output .onnx path")
    parser.add_argument("--opset", type=int, default=18, help="ONNX opset (default 18)")
    args = parser.parse_args(argv)
    if args.list:
        from benchmarks.public_models import suite

        for name in (*SUITE_NAMES, *suite()):
            print(name)
        return 0
    out = Path(args.output) if args.output else Path(f"{args.export}.onnx")
    try:
        model = build(args.export)
    except KeyError as err:
        parser.error(str(err.args[0]))
    print(export_onnx(model, out, opset=args.opset, exporter=args.exporter))
    return 0


if __name__ == "__main__":
    sys.exit(main())
