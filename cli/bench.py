"""`luminal bench MODEL_OR_ARTIFACT`: compiled model vs the customer's baseline, signed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from luminal import licensing
from luminal.cli.compile import progress_bar
from luminal.cli.options import DimOption, JsonOption, TrustUnsignedOption, parse_dims
from luminal.cli.report import gate, print_summary
from luminal.errors import InvalidResult, UsageError
from luminal.licensing.home import write_atomic
from luminal.licensing.terms import BillingTerms, license_terms
from luminal.metering.bench import BenchRequest, MethodSettings, run_bench
from luminal.metering.bench.environment import parse_cpus
from luminal.metering.bench.llm import LlmRequest, run_llm_bench
from luminal.metering.bench.outputs import parse_tolerances
from luminal.metering.bench.run import BenchRun
from luminal.metering.report import benchmark_action, junit, markdown, sign_and_write
from luminal.references.baselines import registry, split_module_ref

TARGET = "cpu"


def bench_cmd(
    target: Annotated[
        Path, typer.Argument(help="A compiled .lmnl artifact, or a model with --compile-first.")
    ],
    baseline: Annotated[
        str,
        typer.Option(
            "--baseline", "-b", help="onnxruntime, torch, torch-compile, openvino, tvm, ..."
        ),
    ] = "onnxruntime",
    compile_first: Annotated[
        bool, typer.Option("--compile-first", help="Compile the model file first, beside -o.")
    ] = False,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="The baseline's model (default: the artifact's source); for torch and "
            "torch-compile, FILE.py:FACTORY times your own nn.Module, FACTORY() built.",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Report path (default: TARGET with .report.json)."),
    ] = None,
    duration: Annotated[
        float, typer.Option(help="Minimum seconds of interleaved timing per scenario.")
    ] = 10.0,
    min_runs: Annotated[int, typer.Option(help="Minimum timed runs per arm.")] = 100,
    min_blocks: Annotated[int, typer.Option(help="Minimum paired blocks (rounds).")] = 20,
    block_ms: Annotated[float, typer.Option(help="Target milliseconds per block.")] = 50.0,
    scenario: Annotated[
        str,
        typer.Option(help="latency, throughput, both, or llm (a decoder artifact, --model DIR)."),
    ] = "both",
    prompt: Annotated[int, typer.Option(help="llm: prompt tokens per sequence.", min=1)] = 32,
    new_tokens: Annotated[
        int, typer.Option(help="llm: tokens generated per sequence.", min=1)
    ] = 64,
    batch: Annotated[
        int | None, typer.Option(help="Throughput batch (default: the largest that fits).")
    ] = None,
    max_batch: Annotated[int, typer.Option(help="Cap of the automatic throughput batch.")] = 64,
    inputs: Annotated[
        Path | None, typer.Option("--inputs", help="FILE.npz of inputs (default: seeded random).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of inputs, block order and bootstrap.")] = 0,
    input_sets: Annotated[int, typer.Option(help="Seeded input sets to cycle through.")] = 8,
    threads: Annotated[
        int | None, typer.Option(help="Threads for both arms (default: CPUs available).")
    ] = None,
    cpus: Annotated[str | None, typer.Option(help="Pin to these CPUs, e.g. 0-3.")] = None,
    target_halfwidth: Annotated[
        float,
        typer.Option(
            help="Bill only when the speedup interval is this narrow (relative half-width); "
            "the timed phase runs until it is."
        ),
    ] = 0.05,
    max_duration: Annotated[
        float | None,
        typer.Option(help="Cap of the timed phase, seconds (default max(3 x, +60 s) duration)."),
    ] = None,
    tol: Annotated[
        list[str] | None, typer.Option("--tol", help="Tolerance DTYPE=RTOL,ATOL (repeatable).")
    ] = None,
    baseline_opt: Annotated[
        list[str] | None,
        typer.Option("--baseline-opt", help="KEY=VALUE for the baseline (repeatable)."),
    ] = None,
    baseline_options: Annotated[
        Path | None,
        typer.Option(
            "--baseline-options",
            help="FILE.json of the baseline's own options, e.g. ONNX Runtime SessionOptions.",
        ),
    ] = None,
    price_per_hour: Annotated[
        str | None,
        typer.Option(
            help="Device price per hour, evaluation licenses only (default: the license's)."
        ),
    ] = None,
    fail_below: Annotated[
        float | None,
        typer.Option("--fail-below", help="Exit 1 when the speedup's lower bound is below this."),
    ] = None,
    ci: Annotated[
        bool,
        typer.Option(
            "--ci",
            help="CI step: plain progress lines (also a line per quarter of a long phase), "
            "and benchmark.json (github-action-benchmark), junit.xml and summary.md in "
            "--ci-dir; summary.md is appended to $GITHUB_STEP_SUMMARY when that is set.",
        ),
    ] = False,
    ci_dir: Annotated[Path, typer.Option("--ci-dir", help="Where --ci writes its files.")] = Path(
        "luminal-ci"
    ),
    dim: DimOption = None,
    trust_unsigned: TrustUnsignedOption = False,
    as_json: JsonOption = False,
) -> None:
    """Benchmark a compiled model against the baseline on the original model; sign a report.

    Both arms run in this process, on the same CPUs and thread count, interleaved in blocks
    after a warm-up; outputs are checked against the baseline, and audited during the run.
    The report is written whether the run is VALID or not; exit 5 when it is INVALID.
    Needs a license entitling `bench` (and `compile` to compile).

    Examples:

      luminal bench model.lmnl --baseline onnxruntime -o report.json

      luminal bench model.onnx --compile-first --duration 30 --fail-below 1.2

      luminal bench model.lmnl -b torch --model net.py:build_model

      luminal bench model.lmnl -b onnxruntime --baseline-options ort.json

      luminal bench model.lmnl --ci --fail-below 1.1      # a CI job's step (installers/ci/)
    """
    modes = {
        "both": ("latency", "throughput"),
        "latency": ("latency",),
        "throughput": ("throughput",),
        "llm": ("llm",),
    }
    if scenario not in modes:
        raise UsageError(f"--scenario {scenario}: choose from {', '.join(modes)}")
    if baseline not in registry():
        raise UsageError(f"unknown baseline '{baseline}'; choose from {', '.join(registry())}")
    # --ci: never a live bar, even where the runner fakes a terminal: lines a log keeps
    console = Console(stderr=True, quiet=as_json, force_terminal=False if ci else None)
    status = licensing.check("bench", TARGET)
    for warning in status.warnings:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    out = output or target.with_suffix(".report.json")
    settings = _pairs(baseline_opt)
    model_path, factory = split_module_ref(model) if model is not None else (None, None)
    if factory is not None:
        if "factory" in settings:
            raise UsageError("--model FILE.py:FACTORY and --baseline-opt factory= both name one")
        settings["factory"] = factory
    method = MethodSettings(
        duration_s=duration,
        min_runs=min_runs,
        min_blocks=min_blocks,
        block_s=block_ms / 1e3,
        target_halfwidth=target_halfwidth,
        max_duration_s=max_duration,
        seed=seed,
    )
    if scenario == "llm":
        if model_path is None or compile_first or inputs is not None:
            raise UsageError(
                "--scenario llm takes a decoder artifact and --model DIR (its Hugging Face "
                "model directory, for -b torch) or --model FILE.onnx (its export with past "
                "key/values, for -b onnxruntime); not --compile-first or --inputs"
            )

        def measure(progress: Callable[[str, float, str], None]) -> BenchRun:
            llm = LlmRequest(
                target=target,
                model=model_path,
                baseline=baseline,
                prompt=prompt,
                new_tokens=new_tokens,
                batch=batch,
                seed=seed,
                input_sets=input_sets,
                threads=threads,
                cpus=parse_cpus(cpus),
                method=method,
                terms=_terms(status, price_per_hour),
            )
            return run_llm_bench(llm, progress=progress)
    else:
        request = BenchRequest(
            target=target,
            baseline=baseline,
            model=model_path,
            compile_first=compile_first,
            work_dir=out.parent,
            scenarios=modes[scenario],
            batch=batch,
            max_batch=max_batch,
            inputs=inputs,
            seed=seed,
            input_sets=input_sets,
            threads=threads,
            cpus=parse_cpus(cpus),
            method=method,
            tolerances=parse_tolerances(tol),
            baseline_settings=settings,
            baseline_options=baseline_options,
            dims=parse_dims(dim),
            terms=_terms(status, price_per_hour),
            trust_unsigned=trust_unsigned,
        )

        def measure(progress: Callable[[str, float, str], None]) -> BenchRun:
            return run_bench(request, progress=progress)  # compile_model checks `compile`

    with progress_bar(console) as bar:
        # as `luminal compile`: a bar on a terminal, and one line per finished phase (all a
        # CI log, which is not a terminal, shows)
        task = bar.add_task("preparing", total=None)
        phases: list[tuple[str, str]] = []  # (phase, its latest detail)

        quarter = [0]  # --ci: the last quarter of the current phase that was printed

        def progress(phase: str, done: float, detail: str) -> None:
            if phases and phases[-1][0] == phase:
                phases[-1] = (phase, detail or phases[-1][1])
                if ci and 0 < int(done * 4) < 4 and int(done * 4) > quarter[0]:
                    quarter[0] = int(done * 4)
                    console.print(f"  … {_phase_line(phase, detail)} ({done:.0%})", highlight=False)
            else:
                if phases:
                    console.print(f"  [green]✓[/] {_phase_line(*phases[-1])}", highlight=False)
                phases.append((phase, detail))
                quarter[0] = 0
            label = _phase_line(phase, detail)
            bar.update(task, description=label, total=100, completed=round(100 * done))

        run = measure(progress)
        if phases:
            console.print(f"  [green]✓[/] {_phase_line(*phases[-1])}", highlight=False)
    statement = sign_and_write(run, out)
    results = statement["predicate"]["results"]
    if ci:
        for line in write_ci_files(statement, ci_dir, fail_below):
            console.print(line, highlight=False)
    if as_json:
        typer.echo(json.dumps({"report": str(out), **results}, indent=2))
    else:
        print_summary(Console(), statement)
        typer.echo(f"report: {out}")
    if not results["validity"]["valid"]:
        fix = results["validity"]["fix"]
        raise InvalidResult(
            f"the run is INVALID ({'; '.join(results['validity']['reasons'])})"
            + (f"; to fix: {fix}" if fix else "")
            + f"; report {out}"
        )
    gate(results, fail_below)


def write_ci_files(
    statement: Mapping[str, Any], folder: Path, fail_below: float | None
) -> list[str]:
    """benchmark.json, junit.xml and summary.md in `folder` (atomically), and the summary
    appended to $GITHUB_STEP_SUMMARY when set; the lines that say where they went."""
    files = {
        "benchmark.json": json.dumps(benchmark_action.render(statement), indent=2) + "\n",
        "junit.xml": junit.render(statement, fail_below),
        "summary.md": markdown.render(statement),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            write_atomic(folder / name, text.encode(), mode=0o644)
    except OSError as err:
        raise UsageError(f"--ci-dir {folder}: cannot write ({err.strerror})") from None
    lines = [f"ci: {', '.join(str(folder / n) for n in files)}"]
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        try:
            with open(summary, "a", encoding="utf-8") as f:
                f.write(files["summary.md"] + "\n")
        except OSError as err:
            raise UsageError(
                f"GITHUB_STEP_SUMMARY {summary}: cannot append ({err.strerror})"
            ) from None
        lines.append(f"ci: summary appended to {summary}")
    return lines


def _phase_line(phase: str, detail: str) -> str:
    return f"{phase}: {detail}" if detail else phase


def _pairs(items: list[str] | None) -> dict[str, str]:
    pairs = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--baseline-opt '{item}': expected KEY=VALUE")
        pairs[key] = value
    return pairs


def _terms(status: licensing.LicenseStatus, price: str | None) -> BillingTerms:
    """The report's terms, from the license that allowed the bench (`licensing.terms`):
    `--price-per-hour` only under an evaluation license (exit 2 otherwise)."""
    return license_terms(
        status.claims,
        evaluation=status.evaluation,
        sha256=status.digest,
        device_class=TARGET,
        price_per_hour=price,
    )
