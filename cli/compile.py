"""`luminal compile MODEL`: compile a model for this machine into one `.lmnl` artifact."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from luminal import licensing
from luminal.cli.generate import compile_decoder_dir, decoder_build_json, print_decoder_build
from luminal.cli.options import DimOption, JsonOption, parse_budget, parse_dims
from luminal.compiler.backends.target import resolve
from luminal.compiler.frontend import load_model
from luminal.compiler.frontend.dims import bind_shapes, symbolic_axes
from luminal.compiler.ir import TensorSpec
from luminal.compiler.ir.precision import Precision
from luminal.compiler.llm.hf import is_model_dir
from luminal.compiler.pipeline import (
    DEFAULT_BUDGET_SECONDS,
    STEPS,
    TARGETS,
    CompileOptions,
    CompileResult,
    compile_model,
)
from luminal.compiler.shapes.build import Hooks, ProfiledResult, compile_profiled
from luminal.compiler.shapes.profile import parse_profile, parse_shapes
from luminal.errors import UsageError


def compile_cmd(
    model: Annotated[
        Path,
        typer.Argument(
            help="An .onnx file, a .pt2 ExportedProgram, or a Hugging Face decoder's directory."
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Artifact path (default: MODEL with .lmnl)."),
    ] = None,
    target: Annotated[
        str,
        typer.Option(
            help=f"Device to compile for: {', '.join(TARGETS)} or an installed plugin's name "
            "(`luminal devices` lists them); auto takes the best device found here."
        ),
    ] = "auto",
    tile_m: Annotated[
        int | None,
        typer.Option(
            help="Contraction tile rows (default: by the CPU's vector width).", min=1, max=16
        ),
    ] = None,
    tile_n: Annotated[
        int | None,
        typer.Option(help="Contraction tile columns (default: by vector width).", min=1, max=64),
    ] = None,
    budget: Annotated[
        str,
        typer.Option(
            help="Search time: e-graph rewrites plus measuring kernel variants, e.g. 120s or 2m; "
            "0 takes only tuning-database hits; 'off' compiles with default variants.",
        ),
    ] = f"{DEFAULT_BUDGET_SECONDS:g}s",
    top_k: Annotated[
        int, typer.Option(help="Candidates per kernel that get timed.", min=1, max=16)
    ] = 4,
    model_runs: Annotated[
        bool,
        typer.Option(
            help="Decide between a kernel's candidates that the bench timed within 15% of "
            "each other by timing them inside whole model runs (docs/search.md).",
        ),
    ] = True,
    tuning_db: Annotated[
        Path | None,
        typer.Option(
            help="Tuning database (default: $LUMINAL_TUNING_DB or LUMINAL_HOME/tuning.db)."
        ),
    ] = None,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Measure again even what the tuning database knows, and rewrite and build"
            " without the compile cache.",
        ),
    ] = False,
    precision: Annotated[
        Precision,
        typer.Option(
            help="Storage of the model's floats: fp16 or bf16 store the weights (and round "
            "every op's result) in the reduced type, computing in f32; inputs and outputs stay "
            "f32. auto builds fp32 today (docs/compiler.md, Precision).",
            case_sensitive=False,
        ),
    ] = Precision.FP32,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", help="Print per-rule e-graph statistics and per-kernel choices."),
    ] = False,
    dim: DimOption = None,
    shapes: Annotated[
        list[str] | None,
        typer.Option(
            "--shapes",
            help="Fix an input's shape, e.g. --shapes x=1x3x224x224 (binds its symbolic dims; "
            "repeatable).",
        ),
    ] = None,
    profile: Annotated[
        list[str] | None,
        typer.Option(
            "--profile",
            help="Serve a symbolic dim over a range, NAME=MIN..MAX[:OPT], e.g. "
            "--profile batch=1..32:8 (repeatable): one artifact, tuned at OPT, any size in range.",
        ),
    ] = None,
    buckets: Annotated[
        list[str] | None,
        typer.Option(
            "--buckets",
            help="The sizes a --profile dim is compiled at, e.g. --buckets batch=1,8,32 "
            "(default: OPT, MAX and sizes 2x apart, at most 8 in all).",
        ),
    ] = None,
    batch: Annotated[
        int, typer.Option(help="Decoder only: sequences generated together.", min=1, max=256)
    ] = 1,
    prompt_lengths: Annotated[
        str, typer.Option(help="Decoder only: padded prompt lengths compiled (prefill buckets).")
    ] = "32,128",
    capacities: Annotated[
        str,
        typer.Option(
            help="Decoder only: KV cache sizes compiled (decode-step buckets); the last is the cache's."
        ),
    ] = "128,512",
    as_json: JsonOption = False,
) -> None:
    """Compile a model into one artifact file that `luminal run` and `luminal.load` run.

    Needs a license entitling `compile` on the target (exit 3 if not); running the
    artifact never does.

    Examples:

      luminal compile model.onnx -o model.lmnl

      luminal compile model.pt2 --json

      luminal compile model.onnx --budget 5m --verbose

      luminal compile model.onnx --precision fp16

      luminal compile bert.onnx --profile batch=1..8:1 --profile seq=1..128:128

      luminal compile resnet.onnx --shapes input=1x3x224x224

      luminal compile ./llama-dir -o llama.lmnl --batch 4 --capacities 128,512,2048

    A Hugging Face decoder directory (GPT-2, Llama, Mistral, Qwen2) compiles to a decoder
    artifact: prefill graphs at --prompt-lengths and one-token step graphs at
    --capacities, for `luminal generate`; --budget is shared among the graphs.

    A model with symbolic dims (a dynamic batch or sequence) compiles with each dim fixed
    (--dim, --shapes) or served over a range (--profile): the profile's artifact holds one
    specialization per bucket and runs any size in range in the smallest bucket that
    covers it; a size outside is an error (exit 2).

    The search keeps what it measures in the tuning database, so a second compile of
    the same model (or of another with the same layers) takes the stored winners.
    Ctrl-C during the search stops measuring and still writes the best artifact found
    so far (exit 130).
    """
    out = output or model.with_suffix(".lmnl")
    seconds = parse_budget(budget)
    console = Console(stderr=True, quiet=as_json)
    chosen = resolve(target)  # "auto" becomes a backend and device; compile_model licenses it
    for note in chosen.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    steps = STEPS
    options = CompileOptions(
        target=chosen.name,
        tile_m=tile_m,
        tile_n=tile_n,
        budget_seconds=seconds,
        top_k=top_k,
        model_runs=model_runs,
        tuning_db=str(tuning_db) if tuning_db else None,
        use_tuning_db=not fresh,
        precision=precision,
    )
    if is_model_dir(model):
        build = compile_decoder_dir(
            model,
            output or model.with_suffix(".lmnl"),
            options,
            batch,
            prompt_lengths,
            capacities,
            console,
        )
        if as_json:
            typer.echo(json.dumps(decoder_build_json(build), indent=2))
        else:
            print_decoder_build(Console(), build)
        return
    fixed = fixed_dims(model, dim, shapes)
    shape_profile = parse_profile(profile or [], buckets or [])
    with progress_bar(console) as bar:
        task = bar.add_task("loading model", total=None)
        done: list[str] = []

        def step(name: str) -> None:
            if done:
                console.print(f"  [green]✓[/] {done[-1]}")
            done.append(name)
            bar.update(
                task, description=f"{name} ({len(done)}/{len(steps)})", total=None, completed=0
            )

        def progress(what: str, n: int, total: int) -> None:
            bar.update(
                task, description=f"search kernels: {what}", total=max(total, 1), completed=n
            )

        if shape_profile is not None:

            def point(sizes: Mapping[str, int], n: int, total: int) -> None:
                if done:
                    console.print(f"  [green]✓[/] {done[-1]}")
                    done.clear()
                sizes_text = ", ".join(f"{d}={v}" for d, v in sizes.items())
                console.print(f"specialization {n + 1}/{total}: {sizes_text}", highlight=False)

            hooks = Hooks(point, step, progress, lambda status: print_warnings(console, status))
            profiled = compile_profiled(
                model, out, shape_profile, fixed, options, target=chosen, hooks=hooks
            )
            console.print(f"  [green]✓[/] {done[-1]}")
        else:
            loaded = load_model(model, fixed)
            check_shapes(loaded.graph.input_specs(), parse_shapes(shapes or []))
            result = compile_model(
                loaded,
                out,
                options,
                on_step=step,
                on_progress=progress,
                target=chosen,
                on_license=lambda status: print_warnings(console, status),
            )
            console.print(f"  [green]✓[/] {done[-1]}")
    if shape_profile is not None:
        if as_json:
            typer.echo(json.dumps(profiled.to_json(), indent=2))
        else:
            print_profiled(Console(), profiled)
        return
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2))
    else:
        print_result(Console(), result)
        if verbose:
            print_search(Console(), result)
    if result.interrupted:
        console.print(
            f"[yellow]interrupted:[/] the search stopped early; {out} holds the best variants "
            "measured so far (they are kept in the tuning database)",
            highlight=False,
        )
        raise typer.Exit(130)


def fixed_dims(model: Path, dim: list[str] | None, shapes: list[str] | None) -> dict[str, int]:
    """`--dim` and `--shapes` as one set of dim bindings."""
    fixed = parse_dims(dim)
    given = parse_shapes(shapes or [])
    if given:
        for name, size in bind_shapes(symbolic_axes(model), given).items():
            if fixed.setdefault(name, size) != size:
                raise UsageError(f"dim '{name}' is {fixed[name]} by --dim and {size} by --shapes")
    return fixed


def check_shapes(specs: Sequence[TensorSpec], given: Mapping[str, tuple[int, ...]]) -> None:
    """Every `--shapes` input exists and has the shape it asks for."""
    by_name = {s.name: s for s in specs}
    for name, shape in given.items():
        spec = by_name.get(name)
        if spec is None:
            raise UsageError(
                f"--shapes names input '{name}'; the model's inputs are {sorted(by_name)}"
            )
        if tuple(spec.shape) != shape:
            want = "x".join(map(str, spec.shape))
            raise UsageError(
                f"--shapes {name}={'x'.join(map(str, shape))}: the model's '{name}' is {want}"
            )


def print_profiled(console: Console, r: ProfiledResult) -> None:
    print_result(console, r.opt)
    table = Table(
        title=f"Profile {', '.join(d.describe() for d in r.spec.profile.dims)}",
        title_justify="left",
    )
    for col in ("specialization", "serves", "kernels", "masked reductions", "compile s"):
        table.add_column(col, justify="right" if col in ("kernels", "compile s") else "left")
    for p in r.points:
        sizes = ", ".join(f"{d}={v}" for d, v in p.point.items())
        serves = "this shape" if p.exact else "sizes up to it"
        table.add_row(
            sizes, serves, str(p.result.kernels), str(p.masks), f"{p.result.total_seconds:.1f}"
        )
    console.print(table)
    check = (
        "no size in the profile is padded"
        if r.checked_at is None
        else f"padded {', '.join(f'{d}={v}' for d, v in r.checked_at.items())} agrees with the "
        f"model at that size (max abs error {r.check_error:.2g})"
    )
    console.print(
        f"profile: {len(r.points)} specializations in {r.artifact_bytes / 2**20:.2f} MiB, "
        f"{r.seconds:.1f}s; padding check: {check}",
        highlight=False,
    )


def print_warnings(console: Console, status: licensing.LicenseStatus) -> None:
    """The license's warnings (grace period, near expiry), as the compile starts."""
    for warning in status.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def progress_bar(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def print_result(console: Console, r: CompileResult) -> None:
    table = Table(title=f"Compiled {r.path}", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value")
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(r.kernel_kinds.items()))
    table.add_row("kernels", f"{r.kernels} ({kinds})")
    saved = 1 - r.arena_bytes / r.intermediate_bytes if r.intermediate_bytes else 0.0
    table.add_row(
        "arena",
        f"{r.arena_bytes / 2**20:.2f} MiB (intermediates total {r.intermediate_bytes / 2**20:.2f} MiB, {saved:.0%} saved)",
    )
    table.add_row("weights", f"{r.weights_bytes / 2**20:.2f} MiB")
    table.add_row("precision", _precision(r.precision))
    table.add_row("artifact", f"{r.artifact_bytes / 2**20:.2f} MiB")
    features = f"; CPU features {' '.join(r.cpu_features)}" if r.cpu_features else ""
    table.add_row(
        "target", f"{r.target} ({r.device or 'no device here: code only'}); {r.toolchain}{features}"
    )
    steps = ", ".join(f"{k} {v:.2f}s" for k, v in r.seconds.items())
    table.add_row("compile time", f"{r.total_seconds:.2f}s ({steps})")
    console.print(table)

    if r.search is not None:
        s = r.search
        tau, speedup = s.mean_tau, s.estimated_speedup()
        agreement = "-" if tau is None else f"{tau:+.2f}"
        console.print(
            f"search: {len(s.choices)} distinct kernels, {s.cache_hits} from the tuning database, "
            f"{s.measured} measured in {s.seconds:.1f}s; kernel time vs default "
            f"{'-' if speedup is None else f'{speedup:.2f}x'}; "
            f"close calls timed in the model {s.in_model} ({s.changed_in_model} changed); "
            f"cost model rank agreement (Kendall tau) {agreement}",
            highlight=False,
        )
    if r.rewrite is not None:
        w = r.rewrite
        console.print(
            f"rewrite: {w.nodes_before} -> {w.nodes_after} IR nodes, "
            f"{w.iterations} iterations, stopped: {w.stop_reason}",
            highlight=False,
        )
    if r.check is not None:
        colour = {"passed": "green", "skipped": "yellow"}.get(r.check.status.value, "red")
        console.print(f"check: [{colour}]{r.check}[/]", highlight=False)


def _precision(built: str) -> str:
    storage = Precision(built).storage
    if storage is None:
        return f"{built} (as the model)"
    return f"{built} (weights stored {storage.value}, every op rounded to it; f32 compute)"


def print_search(console: Console, r: CompileResult) -> None:
    """`--verbose`: every rule's matches and time, and every kernel's choice."""
    if r.rewrite is not None:
        table = Table(title="E-graph rules", title_justify="left")
        for col in ("rule", "family", "matches", "seconds"):
            table.add_column(col, justify="right" if col in ("matches", "seconds") else "left")
        for rule in r.rewrite.rules:
            table.add_row(rule.name, rule.family, str(rule.matches), f"{rule.seconds:.3f}")
        console.print(table)
    if r.search is not None:
        table = Table(title="Kernel choices", title_justify="left")
        for col in ("kernel", "kind", "shape", "x", "variant", "source", "µs", "default µs", "tau"):
            table.add_column(col)
        for c in r.search.choices:
            us = "-" if c.seconds is None else f"{c.seconds * 1e6:.1f}"
            dus = "-" if c.default_seconds is None else f"{c.default_seconds * 1e6:.1f}"
            tau = "-" if c.tau is None else f"{c.tau:+.2f}"
            table.add_row(
                c.kernel, c.kind, c.shape, str(c.instances), c.variant.label, c.source, us, dus, tau
            )
        console.print(table)
