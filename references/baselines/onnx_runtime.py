"""ONNX Runtime as the customer configures it: an `InferenceSession` on the .onnx file.

    defaults       every execution provider present, best first (ORT_PROVIDERS); graph
                   optimizations at ORT's default (all); intra-op threads = luminal's
    --baseline-opt graph_optimization=disable|basic|extended|layout|all, providers=A,B
    --baseline-options FILE.json   the customer's SessionOptions (SESSION_FIELDS), session
                   config entries, providers and provider options

The thread count luminal is given wins unless the file sets `intra_op_num_threads`; then
the file's count is used and `info["intra_op_num_threads_from"]` says so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from luminal.errors import UsageError
from luminal.references.baselines.base import (
    BaselineOptions,
    Feeds,
    Outputs,
    Runner,
    expect,
    one_line,
)

#: ONNX Runtime execution providers a baseline uses when present, best first.
ORT_PROVIDERS = (
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "ROCMExecutionProvider",
    "CPUExecutionProvider",
)

#: Graph optimization levels by their short name (`--baseline-opt`, the options file).
LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "layout": "ORT_ENABLE_LAYOUT",
    "all": "ORT_ENABLE_ALL",
}
MODES = {"sequential": "ORT_SEQUENTIAL", "parallel": "ORT_PARALLEL"}

#: SessionOptions attributes the options file may set, with their JSON type.
SESSION_FIELDS: Mapping[str, type] = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "enable_cpu_mem_arena": bool,
    "enable_mem_pattern": bool,
    "enable_mem_reuse": bool,
    "use_deterministic_compute": bool,
    "log_severity_level": int,
}
#: Every field of an ONNX Runtime options file.
FILE_FIELDS = (
    *SESSION_FIELDS,
    "graph_optimization_level",
    "execution_mode",
    "session_config_entries",
    "providers",
    "provider_options",
)


def import_onnxruntime() -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise UsageError(
            "onnxruntime is not installed: pip install 'luminal[onnxruntime]'"
        ) from None
    return onnxruntime


def _enum(table: Mapping[str, str], value: object, field: str) -> str:
    """The ORT enum member for a short name (`all`) or the member's own name (`ORT_ENABLE_ALL`)."""
    if isinstance(value, str) and value in table:
        return table[value]
    if isinstance(value, str) and value in table.values():
        return value
    raise UsageError(f"{field} '{value}': choose from {', '.join(table)}")


def session_options(
    threads: int | None,
    graph_optimization: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> Any:
    """`onnxruntime.SessionOptions`: `threads` as the intra-op pool size unless `config`
    (an options file's fields, checked) sets one; None keeps ORT's defaults."""
    ort = import_onnxruntime()
    config = config or {}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    if threads is not None:
        options.intra_op_num_threads = threads
    level = config.get("graph_optimization_level", graph_optimization)
    if level is not None:
        name = _enum(LEVELS, level, "graph optimization")
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, name)
    if "execution_mode" in config:
        mode = _enum(MODES, config["execution_mode"], "execution_mode")
        options.execution_mode = getattr(ort.ExecutionMode, mode)
    for name, kind in SESSION_FIELDS.items():
        if name in config:
            setattr(options, name, expect(config[name], kind, name))
    entries = expect(config.get("session_config_entries", {}), dict, "session_config_entries")
    for key, value in entries.items():
        try:
            options.add_session_config_entry(
                key, expect(value, str, f"session_config_entries.{key}")
            )
        except Exception as err:  # onnxruntime raises its own untyped errors
            raise UsageError(f"session config entry '{key}': {one_line(err)}") from None
    return options


def onnxruntime_session(
    path: Path,
    *,
    providers: tuple[str, ...],
    threads: int | None = None,
    graph_optimization: str | None = None,
    config: Mapping[str, Any] | None = None,
    provider_options: list[dict[str, str]] | None = None,
) -> Any:
    """An `onnxruntime.InferenceSession` on `path` (see `session_options`)."""
    ort = import_onnxruntime()
    options = session_options(threads, graph_optimization, config)
    try:
        return ort.InferenceSession(
            str(path), options, providers=list(providers), provider_options=provider_options
        )
    except Exception as err:  # onnxruntime raises its own untyped errors
        raise UsageError(f"{path}: ONNX Runtime cannot load it ({one_line(err)})") from None


class OnnxRuntime:
    name = "onnxruntime"
    formats = (".onnx",)

    def open(self, model: Path, options: BaselineOptions) -> Runner:
        ort = import_onnxruntime()
        s = options.take(("graph_optimization", "providers"), self.name)
        c = options.take_config(FILE_FIELDS, self.name)
        for opt, fld in (
            ("graph_optimization", "graph_optimization_level"),
            ("providers", "providers"),
        ):
            if opt in s and fld in c:
                raise UsageError(
                    f"onnxruntime: {opt} is given twice (--baseline-opt {opt} and the "
                    f"options file's '{fld}'); keep one"
                )
        present = ort.get_available_providers()
        wanted = _providers(s, c)
        providers = tuple(p for p in wanted if p in present)
        if not providers:
            raise UsageError(f"onnxruntime: none of {list(wanted)} is available here ({present})")
        per_provider = _provider_options(c, providers)
        session = onnxruntime_session(
            model,
            providers=providers,
            threads=options.threads,
            graph_optimization=s.get("graph_optimization"),
            config=c,
            provider_options=per_provider,
        )
        so = session.get_session_options()
        info: dict[str, object] = {
            "version": ort.__version__,
            "timed": "onnxruntime.InferenceSession.run (all outputs, numpy feeds)",
            "providers": list(session.get_providers()),
            "providers_present": list(present),
            "graph_optimization": c.get(
                "graph_optimization_level", s.get("graph_optimization", "default (all)")
            ),
            "intra_op_num_threads": so.intra_op_num_threads,
            "intra_op_num_threads_from": _threads_from(c, options.threads),
        }
        if c:
            info["session_options"] = {k: v for k, v in c.items() if k != "provider_options"}
        if per_provider and any(per_provider):
            info["provider_options"] = dict(zip(providers, per_provider, strict=True))
        return Runner(_run(session, model), info)


def _threads_from(c: Mapping[str, Any], threads: int | None) -> str:
    if "intra_op_num_threads" in c:
        return "the options file (not luminal's thread count)"
    return "luminal's thread count" if threads is not None else "ONNX Runtime's default"


def _providers(s: Mapping[str, str], c: Mapping[str, Any]) -> tuple[str, ...]:
    if "providers" in s:
        return tuple(s["providers"].split(","))
    if "providers" in c:
        listed = expect(c["providers"], list, "providers")
        return tuple(expect(p, str, "providers[]") for p in listed)
    return ORT_PROVIDERS


def _provider_options(
    c: Mapping[str, Any], providers: tuple[str, ...]
) -> list[dict[str, str]] | None:
    """The file's `provider_options` ({provider: {key: value}}) aligned with `providers`."""
    if "provider_options" not in c:
        return None
    table = expect(c["provider_options"], dict, "provider_options")
    for name in table:
        if name not in providers:
            raise UsageError(
                f"--baseline-options: provider_options names '{name}', which is not among "
                f"the providers used ({', '.join(providers)})"
            )
    out = []
    for p in providers:
        given = expect(table.get(p, {}), dict, f"provider_options.{p}")
        out.append({str(k): str(v) for k, v in given.items()})
    return out


def _run(session: Any, model: Path) -> Callable[[Feeds], Outputs]:
    names = [o.name for o in session.get_outputs()]
    inputs = {i.name for i in session.get_inputs()}

    def run(feeds: Feeds) -> Outputs:
        if set(feeds) != inputs:
            raise UsageError(
                f"{model}: ONNX Runtime takes inputs {sorted(inputs)}, given {sorted(feeds)}"
            )
        return dict(zip(names, session.run(names, dict(feeds)), strict=True))

    return run
