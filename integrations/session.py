"""`luminal.InferenceSession`: ONNX Runtime's session API over a compiled model.

    import luminal
    sess = luminal.InferenceSession("model.onnx")       # or .lmnl, .pt2, an onnx.ModelProto
    name = sess.get_inputs()[0].name
    (y,) = sess.run(None, {name: x})

`get_inputs()` / `get_outputs()` return `NodeArg`s with `.name`, `.shape` and `.type`
("tensor(float)", as ONNX Runtime spells it); `run(output_names, input_feed)` returns a
list of numpy arrays in the order asked for (all outputs for None).  A model file is
compiled on the fly, into a private temporary folder (`cache_dir` keeps the artifact);
an `.lmnl` artifact is verified and loaded as `luminal.load` does.  Symbolic input dims are
bound with `dims={"batch": 8}`, or served over a range with `profile={"batch": (1, 32, 8)}`
(min, max, opt: one compile, every size in range; compiler/shapes); a symbolic dim neither
binds is served from 1 to AUTO_PROFILE_MAX, as ONNX Runtime serves any size.  Runs are metered as `luminal.load`'s are; `close()` flushes the usage now.  Compiling a model needs a license entitling `compile` (the check is
`compile_model`'s, so the refusal is the CLI's LicenseError); loading an artifact does not.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from luminal._version import __version__
from luminal.compiler.ir import DType
from luminal.compiler.runtime import Session, load
from luminal.errors import ModelLoadError, UsageError

if TYPE_CHECKING:  # onnx and the compiler load on first use: `import luminal` stays light
    import onnx

    from luminal.compiler.pipeline import CompileOptions

SOURCE = "<onnx model>"

#: IR dtype -> ONNX Runtime's type string
ORT_TYPES = {
    DType.F64: "tensor(double)",
    DType.F32: "tensor(float)",
    DType.F16: "tensor(float16)",
    DType.BF16: "tensor(bfloat16)",
    DType.I64: "tensor(int64)",
    DType.I32: "tensor(int32)",
    DType.I16: "tensor(int16)",
    DType.I8: "tensor(int8)",
    DType.U8: "tensor(uint8)",
    DType.U16: "tensor(uint16)",
    DType.U32: "tensor(uint32)",
    DType.U64: "tensor(uint64)",
    DType.BOOL: "tensor(bool)",
}


@dataclass(frozen=True)
class NodeArg:
    """An input or output, as ONNX Runtime describes it."""

    name: str
    shape: list[int]
    type: str


@dataclass(frozen=True)
class ModelMetadata:
    """The part of ONNX Runtime's ModelMetadata luminal knows."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    version: int
    custom_metadata_map: dict[str, str]


class InferenceSession:
    """ONNX Runtime's `InferenceSession`, backed by a luminal-compiled model.

    `providers`, `provider_options` and `sess_options` are accepted for drop-in use and
    ignored: luminal compiles for the local CPU.  An `.lmnl` artifact must be signed by a
    key this install trusts unless `trust_unsigned=True` (as `luminal.load`)."""

    def __init__(
        self,
        path_or_bytes: str | os.PathLike[str] | bytes | onnx.ModelProto,
        sess_options: Any = None,
        providers: Sequence[Any] | None = None,
        provider_options: Sequence[Any] | None = None,
        *,
        dims: Mapping[str, int] | None = None,
        profile: Mapping[str, tuple[int, ...]] | None = None,
        options: CompileOptions | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        trust_unsigned: bool = False,
    ) -> None:
        self._model_path = ""
        self._meta = ModelMetadata("", "", "", "", 0, {})
        keep = None
        if cache_dir is not None:
            Path(cache_dir).mkdir(parents=True, exist_ok=True)
        if isinstance(path_or_bytes, bytes):
            path_or_bytes = _parse(path_or_bytes)
        if not isinstance(path_or_bytes, (str, os.PathLike)):
            import onnx

            from luminal.compiler.frontend import onnx as onnx_frontend
            from luminal.compiler.frontend.dims import axes_of, dim_names
            from luminal.integrations.build import compile_to_session
            from luminal.integrations.onnx_backend import upgrade

            if not isinstance(path_or_bytes, onnx.ModelProto):
                raise UsageError(
                    f"expected a model path, bytes or an onnx.ModelProto, got {type(path_or_bytes).__name__}"
                )
            model = upgrade(path_or_bytes)
            _check(model)
            self._meta = _metadata(model)
            named = dim_names(axes_of(model))
            if named - set(dims or {}) or profile:
                with tempfile.TemporaryDirectory(prefix="luminal-model-") as tmp:
                    file = Path(tmp) / "model.onnx"
                    onnx.save(model, file)
                    keep = Path(cache_dir) / "model.lmnl" if cache_dir is not None else None
                    self._session = _compile_profile(file, named, dims, profile, options, keep)
                return
            loaded = onnx_frontend.lower(model, dims or {}, source=SOURCE)
            keep = Path(cache_dir) / "model.lmnl" if cache_dir is not None else None
            self._session = compile_to_session(loaded, options, keep)
            return
        path = Path(path_or_bytes)
        self._model_path = str(path)
        if path.suffix.lower() == ".lmnl":
            self._session = load(path, trust_unsigned=trust_unsigned)
            return
        from luminal.compiler.frontend import load_model
        from luminal.integrations.build import compile_to_session

        keep = Path(cache_dir) / f"{path.stem}.lmnl" if cache_dir is not None else None
        if path.suffix.lower() == ".onnx" and path.is_file():
            self._meta = _file_metadata(path)
            from luminal.compiler.frontend.dims import dim_names, symbolic_axes

            named = dim_names(symbolic_axes(path))
            if named - set(dims or {}) or profile:
                self._session = _compile_profile(path, named, dims, profile, options, keep)
                return
        loaded = load_model(path, dims)
        self._session = compile_to_session(loaded, options, keep)

    # ---- ONNX Runtime's API -------------------------------------------------------------

    def get_inputs(self) -> list[NodeArg]:
        """Inputs; a profiled dim is named, as ONNX Runtime names a symbolic one."""
        spec = self._session.manifest.profile
        out = []
        for s in self._session.inputs:
            axes = spec.axes.get(s.name, {}) if spec is not None else {}
            shape: list[int | str] = [axes.get(k, d) for k, d in enumerate(s.shape)]
            out.append(NodeArg(s.name, shape, ORT_TYPES[s.dtype]))  # type: ignore[arg-type]
        return out

    def get_outputs(self) -> list[NodeArg]:
        spec = self._session.manifest.profile
        tags = spec.specializations[0].outputs if spec is not None else {}
        out = []
        for s in self._session.outputs:
            axes = tags.get(s.name, ())
            shape: list[int | str] = [
                "*".join(t.dim for t in axes[k]) if k < len(axes) and axes[k] else d
                for k, d in enumerate(s.shape)
            ]
            out.append(NodeArg(s.name, shape, ORT_TYPES[s.dtype]))  # type: ignore[arg-type]
        return out

    def get_modelmeta(self) -> ModelMetadata:
        return self._meta

    def get_providers(self) -> list[str]:
        return ["LuminalCPUExecutionProvider"]

    def run(
        self,
        output_names: Sequence[str] | None,
        input_feed: Mapping[str, Any],
        run_options: Any = None,
    ) -> list[np.ndarray]:
        """Outputs `output_names` (all when None or empty), in that order."""
        feeds = {name: np.asarray(value) for name, value in input_feed.items()}
        results = self._session.run(feeds)
        wanted = list(output_names) if output_names else [s.name for s in self._session.outputs]
        missing = [n for n in wanted if n not in results]
        if missing:
            raise UsageError(f"unknown output(s) {missing}; the model has {list(results)}")
        return [results[n] for n in wanted]

    # ---- luminal's own ----------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The underlying `luminal.Session` (dict in, dict out)."""
        return self._session

    @property
    def model_path(self) -> str:
        return self._model_path

    def close(self) -> None:
        """Flush this session's usage to the ledger (`Session.close`); also on exit."""
        self._session.close()

    def __repr__(self) -> str:
        ins = ", ".join(f"{a.name}: {a.type} {a.shape}" for a in self.get_inputs())
        return f"<luminal {__version__} InferenceSession ({ins})>"


#: A symbolic dim that neither `dims` nor `profile` names is served from 1 to this.
AUTO_PROFILE_MAX = 64


def _compile_profile(
    path: Path,
    named: set[str],
    dims: Mapping[str, int] | None,
    profile: Mapping[str, tuple[int, ...]] | None,
    options: CompileOptions | None,
    keep: Path | None,
) -> Session:
    """The model at `path` compiled as a shape profile (every symbolic dim it has,
    `named`, that `dims` does not bind, over `profile`'s range or 1..AUTO_PROFILE_MAX)
    and loaded."""
    from luminal.compiler.pipeline import CompileOptions
    from luminal.compiler.shapes.build import compile_profiled
    from luminal.compiler.shapes.profile import fit_profile

    fixed = dict(dims or {})
    ranges = []
    for name in sorted((named - set(fixed)) | set(profile or {})):
        given = (profile or {}).get(name, (1, AUTO_PROFILE_MAX))
        if not 2 <= len(given) <= 3:
            raise UsageError(f"profile['{name}']: expected (min, max) or (min, max, opt)")
        lo, hi = int(given[0]), int(given[1])
        ranges.append((name, lo, hi, int(given[2]) if len(given) == 3 else hi))
    with tempfile.TemporaryDirectory(prefix="luminal-session-") as tmp:
        out = keep or Path(tmp) / "model.lmnl"
        compile_profiled(path, out, fit_profile(ranges), fixed, options or CompileOptions())
        return load(out)


def _parse(data: bytes) -> onnx.ModelProto:
    import onnx

    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:
        raise ModelLoadError("<bytes>", "not a valid ONNX model") from None
    return model


def _check(model: onnx.ModelProto) -> None:
    import onnx

    try:
        onnx.checker.check_model(model)
    except Exception as err:
        text = " ".join(str(err).split())[:300]
        raise ModelLoadError(SOURCE, f"fails the ONNX checker: {text}") from None


def _file_metadata(path: Path) -> ModelMetadata:
    import onnx

    try:
        return _metadata(onnx.load(str(path), load_external_data=False))
    except Exception:  # the frontend reports a damaged file with the full story
        return ModelMetadata("", "", "", "", 0, {})


def _metadata(model: onnx.ModelProto) -> ModelMetadata:
    return ModelMetadata(
        producer_name=model.producer_name,
        graph_name=model.graph.name,
        domain=model.domain,
        description=model.doc_string,
        version=int(model.model_version),
        custom_metadata_map={p.key: p.value for p in model.metadata_props},
    )


__all__ = ["InferenceSession", "ModelMetadata", "NodeArg"]
