"""Fuzz of the artifact loader: mutated files and mutated manifests must end in a
`LuminalError` (or load), never any other exception, whatever the bytes.

The default suite runs a few hundred inputs; the full run (>= 10,000 inputs of each
kind) is marked slow::

    PYTHONPATH=... python -m pytest -q -m slow tests/compiler/test_artifact_fuzz.py
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from luminal.compiler.artifact import MANIFEST, SIGNATURE, Manifest, read_artifact
from luminal.compiler.frontend.onnx import load as load_onnx
from luminal.errors import LuminalError
from tests.helpers.onnx_cases import node_model

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

QUICK, FULL = 200, 10_000


@pytest.fixture(scope="module")
def seed(tmp_path_factory) -> tuple[Path, bytes, dict[str, Any], dict[str, bytes]]:  # type: ignore[no-untyped-def]
    """(a scratch folder, a valid signed artifact's bytes, its manifest, its members)."""
    tmp = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(2)
    model = node_model(
        "Gemm",
        [
            rng.standard_normal((2, 4)).astype(np.float32),
            rng.standard_normal((4, 3)).astype(np.float32),
        ],
        consts=(1,),
    )
    onnx.save(model, tmp / "m.onnx")
    from luminal.compiler.pipeline import compile_model

    compile_model(load_onnx(tmp / "m.onnx"), tmp / "m.lmnl")
    data = (tmp / "m.lmnl").read_bytes()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        manifest = json.loads(z.read(MANIFEST))
        members = {n: z.read(n) for n in z.namelist() if n != MANIFEST}
    return tmp, data, manifest, members


def _outcome(path: Path, trust_unsigned: bool) -> None:
    try:
        read_artifact(path, trust_unsigned=trust_unsigned)
    except LuminalError:
        pass


# ---- mutations of the file's bytes ------------------------------------------------------
_EDIT = st.tuples(
    st.sampled_from(["flip", "set", "delete", "insert", "truncate"]),
    st.floats(0, 1, allow_nan=False),
    st.integers(0, 255),
)


def _mutate(data: bytes, edits: list[tuple[str, float, int]]) -> bytes:
    b = bytearray(data)
    for op, where, value in edits:
        i = min(int(where * len(b)), max(len(b) - 1, 0))
        if not b:
            break
        if op == "flip":
            b[i] ^= 1 << (value % 8)
        elif op == "set":
            b[i] = value
        elif op == "delete":
            del b[i : i + 1 + value % 8]
        elif op == "insert":
            b[i:i] = bytes([value]) * (1 + value % 8)
        else:
            del b[i:]
    return bytes(b)


def _fuzz_bytes(seed, n: int) -> None:  # type: ignore[no-untyped-def]
    tmp, data, _, _ = seed

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(_EDIT, min_size=1, max_size=6), st.booleans())
    def run(edits: list[tuple[str, float, int]], trust_unsigned: bool) -> None:
        path = tmp / "bytes.lmnl"
        path.write_bytes(_mutate(data, edits))
        _outcome(path, trust_unsigned)

    run()


# ---- mutations of the manifest's JSON ---------------------------------------------------
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(["f32", "i64", "cpu", "x86_64", "model.so", "weights.bin", "onnx"]),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `doc` (dict keys and list indices)."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _apply(doc: Any, path: tuple[Any, ...], change: Callable[[Any, Any], None]) -> Any:
    """`doc` (a deep copy) with `change(parent, key)` applied at `path`."""
    doc = json.loads(json.dumps(doc))
    if not path:
        return None
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    change(parent, path[-1])
    return doc


@st.composite
def _manifests(draw: st.DrawFn, manifest: dict[str, Any]) -> Any:
    doc = manifest
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        if draw(st.booleans()) and path:
            value = draw(_JSON)

            def put(parent: Any, key: Any, value: Any = value) -> None:
                parent[key] = value

            doc = _apply(doc, path, put)
        elif path:
            doc = _apply(doc, path, lambda parent, key: parent.pop(key))
        if not isinstance(doc, dict):
            return doc
    return doc


def _fuzz_manifest(seed, n: int) -> None:  # type: ignore[no-untyped-def]
    tmp, _, manifest, members = seed

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(_manifests(manifest), st.booleans())
    def run(doc: Any, keep_signature: bool) -> None:
        if isinstance(doc, dict):
            try:
                Manifest.from_json(doc, "fuzz")
            except LuminalError:
                pass
        path = tmp / "manifest.lmnl"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(MANIFEST, json.dumps(doc))
            for name, data in members.items():
                if name != SIGNATURE or keep_signature:
                    z.writestr(name, data)
        _outcome(path, trust_unsigned=True)
        _outcome(path, trust_unsigned=False)

    run()


def test_mutated_files_only_raise_luminal_errors(seed) -> None:  # type: ignore[no-untyped-def]
    _fuzz_bytes(seed, QUICK)


def test_mutated_manifests_only_raise_luminal_errors(seed) -> None:  # type: ignore[no-untyped-def]
    _fuzz_manifest(seed, QUICK)


@pytest.mark.slow
def test_mutated_files_full(seed) -> None:  # type: ignore[no-untyped-def]
    _fuzz_bytes(seed, FULL)


@pytest.mark.slow
def test_mutated_manifests_full(seed) -> None:  # type: ignore[no-untyped-def]
    _fuzz_manifest(seed, FULL)
