"""The compile cache: what a second compile of the same model would compute again.

Two stages are deterministic functions of inputs we can hash, and the slow part of a
warm compile when the tuning database already holds every kernel's winner:

    rewrite   the e-graph's rewritten graph, keyed by the input graph (nodes, names,
              constants), the rule families, the saturation limits and the compiler
              version.  Saturation stops on a wall-clock budget, so without the cache
              a second compile may extract a slightly different graph, whose new
              kernels then miss the tuning database.
    build     a backend's built library, keyed by the generated source, the compiler
              command and flags (`CpuBackend.build`).

Entries live in `compile-cache/` beside the tuning database, one file each, written
atomically; `luminal tune-db clear` removes them.  A built library is code this install
signs into its artifacts, so every entry carries an HMAC-SHA256 under a secret of this
install (`$LUMINAL_HOME/cache.key`, 0600, made on first use): an entry another user or a
shared directory supplied, or one edited, fails the tag and is ignored (and replaced),
never loaded.  A graph is stored as JSON (nodes, inputs, outputs, origins) plus an .npz
of its constants read with `allow_pickle=False`, and verified (`ir.spec`) before use.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import io
import json
import os
import secrets
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from luminal._version import __version__
from luminal.compiler.ir import DType, Graph, Op
from luminal.compiler.ir.graph import Node
from luminal.errors import LuminalError
from luminal.licensing.home import Home, create_exclusive, write_atomic

DIRNAME = "compile-cache"
SECRET = "cache.key"
TAG = 32  # bytes of HMAC-SHA256 after each entry


class Kind(enum.Enum):
    REWRITE = "rewrite"
    BUILD = "build"


@dataclass(frozen=True)
class CompileCache:
    root: Path
    secret: bytes = field(repr=False)

    def _path(self, kind: Kind, name: str) -> Path:
        return self.root / kind.value / name

    def _tag(self, kind: Kind, name: str, data: bytes) -> bytes:
        return hmac.new(self.secret, f"{kind.value}/{name}/".encode() + data, "sha256").digest()

    def get(self, kind: Kind, name: str) -> bytes | None:
        """The entry's bytes, or None when there is none or its tag does not verify."""
        try:
            raw = self._path(kind, name).read_bytes()
        except OSError:
            return None
        data, tag = raw[:-TAG], raw[-TAG:]
        if len(raw) < TAG or not hmac.compare_digest(tag, self._tag(kind, name, data)):
            return None
        return data

    def put(self, kind: Kind, name: str, data: bytes) -> None:
        """Store an entry; a cache that cannot be written (read-only home, full disk)
        only costs the next compile its time."""
        path = self._path(kind, name)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, data + self._tag(kind, name, data))
        except OSError:
            pass


def open_cache(tuning_db: str | None, use: bool = True) -> CompileCache | None:
    """The cache beside the tuning database (`tuning_db`, else the default one), or None
    when the compile should not reuse anything (`use` false) or no home can hold the
    secret."""
    if not use:
        return None
    from luminal.compiler.search.tunedb import default_path

    try:
        db = Path(tuning_db) if tuning_db else default_path()
        return CompileCache(db.parent / DIRNAME, _secret(Home.resolve()))
    except (OSError, LuminalError):
        return None


def clear(tuning_db: Path) -> int:
    """Remove the cache beside `tuning_db`; returns how many entries it held."""
    root = tuning_db.parent / DIRNAME
    n = sum(1 for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    shutil.rmtree(root, ignore_errors=True)
    return n


def _secret(home: Home) -> bytes:
    path = home.ensure() / SECRET
    if not path.exists():
        create_exclusive(path, secrets.token_bytes(32))
    data = path.read_bytes()
    if len(data) != 32 or os.stat(path).st_mode & 0o077:
        raise OSError(f"{path}: not a 32-byte secret readable only by its owner")
    return data


def key(*parts: bytes | str) -> str:
    """SHA-256 over the parts (length-prefixed) and the compiler version."""
    h = hashlib.sha256(__version__.encode())
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def graph_key(graph: Graph, *more: str) -> str:
    """The key of a graph: its structure and every constant's bytes."""
    consts = sorted(graph.consts.items())
    return key(
        _structure(graph),
        *(
            f"{name}:{a.dtype.str}:{a.shape}".encode() + np.ascontiguousarray(a).tobytes()
            for name, a in consts
        ),
        *more,
    )


def _structure(graph: Graph) -> str:
    return json.dumps(
        {
            "nodes": [_node(n) for n in graph.nodes],
            "inputs": [list(x) for x in graph.inputs],
            "outputs": [list(x) for x in graph.outputs],
            "origins": {str(i): list(o) for i, o in sorted(graph.origins.items())},
        },
        sort_keys=True,
        allow_nan=True,
    )


def _node(n: Node) -> list[Any]:
    return [n.op.value, list(n.src), list(n.shape), n.dtype.value, _arg(n.arg)]


def _arg(value: Any) -> Any:
    """An op's argument as JSON, tuples and enums tagged so they read back exactly."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple):
        return {"tuple": [_arg(v) for v in value]}
    if isinstance(value, DType):
        return {"dtype": value.value}
    if isinstance(value, Op):
        return {"op": value.value}
    raise TypeError(f"cannot store an op argument of type {type(value).__name__}")


def _unarg(value: Any) -> Any:
    if isinstance(value, dict):
        if "tuple" in value:
            return tuple(_unarg(v) for v in value["tuple"])
        if "dtype" in value:
            return DType(value["dtype"])
        if "op" in value:
            return Op(value["op"])
        raise ValueError(f"unknown tagged value {sorted(value)}")
    if isinstance(value, list):
        raise ValueError("an untagged list")
    return value


def dump_graph(graph: Graph, note: Mapping[str, Any]) -> bytes | None:
    """The graph and a JSON `note` about it as bytes (a zip of structure.json,
    consts.npz and note.json), or None when an op argument has a type the cache cannot
    store exactly."""
    try:
        structure = _structure(graph)
    except TypeError:
        return None
    consts = io.BytesIO()
    np.savez(consts, **{f"c{n}": a for n, a in enumerate(graph.consts.values())})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        z.writestr("structure.json", structure)
        z.writestr("names.json", json.dumps(list(graph.consts)))
        z.writestr("consts.npz", consts.getvalue())
        z.writestr("note.json", json.dumps(note))
    return out.getvalue()


def load_graph(data: bytes) -> tuple[Graph, dict[str, Any]] | None:
    """The graph and note `dump_graph` stored, or None when the entry does not parse or
    the graph does not verify."""
    from luminal.compiler.ir import spec

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            s = json.loads(z.read("structure.json"))
            names = json.loads(z.read("names.json"))
            note = json.loads(z.read("note.json"))
            with np.load(io.BytesIO(z.read("consts.npz")), allow_pickle=False) as npz:
                consts = {name: npz[f"c{n}"] for n, name in enumerate(names)}
        nodes = tuple(
            Node(Op(op), tuple(src), tuple(shape), DType(dtype), _unarg(arg))
            for op, src, shape, dtype, arg in s["nodes"]
        )
        graph = Graph(
            nodes,
            tuple((str(n), int(i)) for n, i in s["inputs"]),
            tuple((str(n), int(i)) for n, i in s["outputs"]),
            consts,
            {int(i): tuple(o) for i, o in s["origins"].items()},
        )
        spec.check(graph)
    except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile, LuminalError):
        return None
    return graph, note
