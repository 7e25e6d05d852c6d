"""Read a `.pt2` archive (written by `torch.export.save`) without unpickling anything.

What torch 2.13's own `torch.export.load` does, and why we do not call it:

* A `.pt2` is a zip with one root folder: `archive_format` ("pt2"), `archive_version`,
  the program as JSON (`models/model.json`), raw little-endian tensor bytes
  (`data/weights/weight_<n>`, `data/constants/tensor_<n>`) described by JSON configs,
  and pickled example inputs (`data/sample_inputs/model.pt`).
* Plain tensors are stored raw, but `load_pt2` unpickles with `torch.load(...,
  weights_only=False)` any weight or constant marked `use_pickle` (tensor subclasses),
  calls `pickle.loads` on `opaque_obj_*` constants and `torch._C._pickle_load_obj` on
  `custom_obj_*` ones, and reads the example inputs with `weights_only=True` *falling
  back to* `weights_only=False` when that fails.  A crafted archive therefore runs code.
* Archives holding `data/aotinductor/` make `load_pt2` load compiled shared libraries,
  and when `load_pt2` raises RuntimeError, `torch.export.load` retries the legacy layout
  (`serialized_*.pt`), which again falls back to `weights_only=False`.
* The JSON itself is not inert either: symbolic shape expressions go through
  `sympy.sympify` (which evaluates strings), node targets starting with `torch` are
  resolved by `getattr` from the `torch` module, and node names become Python source
  when the FX GraphModule is generated.

So this module does the reading itself: it checks the zip (every CRC), allows only the
members listed in `_MEMBERS`, refuses every pickled or compiled payload, builds the
weights from raw bytes, checks the JSON (ATen targets only, identifier names, no
symbolic expressions), and only then hands JSON and tensors to torch's deserializer.
The pickled example inputs are never read.  Every failure is a one-line ModelLoadError
(or UnsupportedOp for a well-formed program we cannot take).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from luminal import errors
from luminal.errors import LuminalError, ModelLoadError, UnsupportedOp, UsageError

# Relative to the archive's root folder.  Anything else is refused.
_MEMBERS = re.compile(
    r"archive_format|archive_version|byteorder|\.data/version|\.data/serialization_id"
    r"|models/model\.json"
    r"|data/weights/model_weights_config\.json|data/weights/weight_\d+"
    r"|data/constants/model_constants_config\.json|data/constants/tensor_\d+"
    r"|data/sample_inputs/model\.pt"  # pickled example inputs: listed, never read
    r"|extra/[^/]+"  # user text files: never read
)
_REQUIRED = (
    "archive_format",
    "archive_version",
    "models/model.json",
    "data/weights/model_weights_config.json",
    "data/constants/model_constants_config.json",
)
_ARCHIVE_VERSION = "0"
# torch._export.serde.schema.ScalarType values (stable: they are the file format).
_SCALAR_TYPES: dict[int, torch.dtype] = {
    1: torch.uint8,
    2: torch.int8,
    3: torch.int16,
    4: torch.int32,
    5: torch.int64,
    6: torch.float16,
    7: torch.float32,
    8: torch.float64,
    12: torch.bool,
    13: torch.bfloat16,
}
_STRIDED = 7  # schema.Layout.Strided
_TARGET = re.compile(r"torch\.ops\.(aten|prims)\.\w+\.\w+|_operator\.getitem")
_MAX_RATIO = 200  # a compressed member may grow this much when inflated (zip bombs)


def read_exported(path: str | os.PathLike[str]) -> torch.export.ExportedProgram:
    """The ExportedProgram stored in the `.pt2` file at `path`, read safely."""
    file = Path(path)
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{file}: no such model file") from None
    except OSError as err:
        raise UsageError(f"{file}: cannot read ({err.strerror})") from None
    try:
        return _read(file, data)
    except LuminalError:
        raise
    except Exception as err:  # anything torch or zipfile raises on odd input
        raise ModelLoadError(file, f"not a readable .pt2 archive: {one_line(err)}") from None


def _read(file: Path, data: bytes) -> torch.export.ExportedProgram:
    if not data:
        raise ModelLoadError(file, "file is empty")
    if not data.startswith(b"PK\x03\x04"):
        if data[:1] == b"\x80":
            raise ModelLoadError(
                file, "this is a pickle, not a torch.export archive; refusing to unpickle it"
            )
        raise ModelLoadError(file, "not a .pt2 archive (no zip header)")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise ModelLoadError(
            file, f"not a valid .pt2 archive (truncated or corrupt zip: {one_line(err)})"
        ) from None
    with zf:
        root = _check_layout(file, zf)
        try:
            bad = zf.testzip()  # reads every member and checks its CRC-32
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise ModelLoadError(file, f"corrupt archive: {one_line(err)}") from None
        if bad is not None:
            raise ModelLoadError(file, f"corrupt archive: member '{bad}' fails its CRC check")

        def text(name: str) -> str:
            return zf.read(f"{root}/{name}").decode("utf-8").strip()

        if text("archive_format") != "pt2":
            raise ModelLoadError(file, "archive_format is not 'pt2'")
        if text("archive_version") != _ARCHIVE_VERSION:
            raise ModelLoadError(
                file, f"archive_version {text('archive_version')!r} is not supported"
            )
        if f"{root}/byteorder" in zf.namelist() and text("byteorder") != "little":
            raise ModelLoadError(file, "big-endian archives are not supported")
        program = zf.read(f"{root}/models/model.json")
        _check_program(file, json.loads(program))
        state_dict = _tensors(file, zf, root, "weights", "weight_")
        constants = _tensors(file, zf, root, "constants", "tensor_")
    from torch._export.serde import serialize

    artifact = serialize.SerializedArtifact(program, state_dict, constants, b"")  # type: ignore[arg-type]
    return serialize.deserialize(artifact)


def _check_layout(file: Path, zf: zipfile.ZipFile) -> str:
    infos = zf.infolist()
    roots = {info.filename.split("/", 1)[0] for info in infos}
    if len(roots) != 1 or any("/" not in info.filename for info in infos):
        raise ModelLoadError(file, "not a torch.export archive (expected one root folder)")
    root = roots.pop()
    names = {info.filename[len(root) + 1 :] for info in infos}
    if "data.pkl" in names:
        raise ModelLoadError(
            file,
            "this is a torch.save checkpoint (pickled), not a torch.export archive; "
            "refusing to unpickle it",
        )
    for info in infos:
        rel = info.filename[len(root) + 1 :]
        if not _MEMBERS.fullmatch(rel):
            what = (
                "compiled code" if rel.startswith("data/aotinductor/") else "an unexpected member"
            )
            raise ModelLoadError(file, f"archive holds {what} '{rel}'; refusing to load it")
        if info.compress_type != zipfile.ZIP_STORED and info.file_size > _MAX_RATIO * max(
            info.compress_size, 1 << 14
        ):
            raise ModelLoadError(file, f"member '{rel}' inflates suspiciously (zip bomb?)")
    missing = [n for n in _REQUIRED if n not in names]
    if missing:
        raise ModelLoadError(file, f"not a torch.export archive: missing {', '.join(missing)}")
    return root


def _check_program(file: Path, program: Any) -> None:
    """Refuse JSON that torch's deserializer would evaluate or turn into code."""
    stack = [program]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        if "as_expr" in item or "expr_str" in item:
            raise UnsupportedOp(
                "the program has symbolic shapes; only static shapes are supported "
                "(export without dynamic_shapes)"
            )
        if "as_graph" in item:
            raise UnsupportedOp("the program has subgraphs (control flow); not supported")
        name = item.get("name")
        if name is not None and not (isinstance(name, str) and name.isidentifier()):
            raise ModelLoadError(
                file, f"program names a value {str(name)[:60]!r}, not an identifier"
            )
        if {"target", "inputs", "outputs"} <= item.keys():
            target = item["target"]
            if not isinstance(target, str) or not _TARGET.fullmatch(target):
                raise UnsupportedOp(
                    "not an ATen op; only ATen programs are supported", op=str(target)[:80]
                )
        stack.extend(item.values())


def _tensors(
    file: Path, zf: zipfile.ZipFile, root: str, kind: str, prefix: str
) -> dict[str, torch.Tensor]:
    """Weights or constants, built from raw bytes; pickled entries are refused."""
    config = json.loads(zf.read(f"{root}/data/{kind}/model_{kind}_config.json"))
    entries = config.get("config") if isinstance(config, dict) else None
    if not isinstance(entries, dict):
        raise ModelLoadError(file, f"data/{kind} config is malformed")
    storages: dict[str, torch.Tensor] = {}
    out: dict[str, torch.Tensor] = {}
    for fqn, meta in entries.items():
        path_name = meta.get("path_name", "")
        if meta.get("use_pickle") or not re.fullmatch(rf"{prefix}\d+", str(path_name)):
            raise ModelLoadError(
                file, f"{kind[:-1]} '{fqn}' is a pickled object; refusing to unpickle it"
            )
        tmeta = meta.get("tensor_meta") or {}
        dtype = _SCALAR_TYPES.get(tmeta.get("dtype"))
        if dtype is None:
            raise UnsupportedOp(
                f"{kind[:-1]} '{fqn}' has unsupported element type {tmeta.get('dtype')}"
            )
        if tmeta.get("layout", _STRIDED) != _STRIDED:
            raise UnsupportedOp(f"{kind[:-1]} '{fqn}' is not a dense tensor")
        sizes = [_int(file, s) for s in tmeta.get("sizes", [])]
        strides = [_int(file, s) for s in tmeta.get("strides", [])]
        offset = _int(file, tmeta.get("storage_offset", {"as_int": 0}))
        member = f"{root}/data/{kind}/{path_name}"
        if member not in zf.namelist():
            raise ModelLoadError(file, f"{kind[:-1]} '{fqn}' refers to missing data '{path_name}'")
        key = f"{path_name}:{dtype}"
        if key not in storages:
            raw = zf.read(member)
            itemsize = torch.empty((), dtype=dtype).element_size()
            if len(raw) % itemsize:
                raise ModelLoadError(file, f"data '{path_name}' is not a whole number of elements")
            storages[key] = (
                torch.frombuffer(bytearray(raw), dtype=dtype)
                if raw
                else torch.empty(0, dtype=dtype)
            )
        flat = storages[key]
        if len(sizes) != len(strides) or offset < 0 or any(d < 0 for d in sizes + strides):
            raise ModelLoadError(file, f"{kind[:-1]} '{fqn}' has a malformed shape")
        if math.prod(sizes) == 0:
            tensor = torch.zeros(sizes, dtype=dtype)
        else:
            last = offset + sum((d - 1) * st for d, st in zip(sizes, strides, strict=True))
            if last >= flat.numel():
                raise ModelLoadError(file, f"{kind[:-1]} '{fqn}' reaches past the end of its data")
            tensor = torch.as_strided(flat, sizes, strides, offset)
        if meta.get("is_param"):
            tensor = torch.nn.Parameter(tensor, requires_grad=bool(tmeta.get("requires_grad")))
        out[str(fqn)] = tensor
    return out


def _int(file: Path, sym: Any) -> int:
    if isinstance(sym, dict) and isinstance(sym.get("as_int"), int):
        return int(sym["as_int"])
    if isinstance(sym, dict) and "as_expr" in sym:
        raise UnsupportedOp(
            "a stored tensor has a symbolic shape; only static shapes are supported"
        )
    raise ModelLoadError(file, f"malformed tensor size {str(sym)[:60]}")


def one_line(err: BaseException) -> str:
    """First line of a foreign exception (torch's messages run for pages)."""
    return errors.one_line(err, first_line=True)
