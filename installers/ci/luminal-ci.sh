#!/bin/sh
# The script part of luminal's CI step (installers/ci/github/action.yml and
# installers/ci/gitlab/luminal.gitlab-ci.yml run exactly this): check the machine, compile
# the model, bench it against the baseline, fail the job below a speedup threshold.
#
#   MODEL       the .onnx or .pt2 model to compile (required)
#   BASELINE    what to bench against (default onnxruntime)
#   THRESHOLD   fail when the speedup's lower confidence bound is below this (default 1.0)
#   BUDGET      compile search budget (default 90s)
#   DURATION    seconds of interleaved timing per scenario (default 10)
#   CI_DIR      where the artifact, report and CI files go (default luminal-ci)
#   BENCH_ARGS  extra `luminal bench` options (e.g. --scenario latency)
#   LUMINAL     the luminal command (default luminal)
#
# Exit: 0 pass; 1 below THRESHOLD; 5 INVALID run (noise, parity); others as `luminal --help`.
# Files: CI_DIR/model.lmnl, report.json (signed), benchmark.json (github-action-benchmark,
# customSmallerIsBetter), junit.xml, summary.md (also appended to $GITHUB_STEP_SUMMARY).
set -eu
: "${MODEL:?set MODEL to the .onnx or .pt2 model to compile}"
LUMINAL=${LUMINAL:-luminal}
BASELINE=${BASELINE:-onnxruntime}
THRESHOLD=${THRESHOLD:-1.0}
BUDGET=${BUDGET:-90s}
DURATION=${DURATION:-10}
CI_DIR=${CI_DIR:-luminal-ci}
BENCH_ARGS=${BENCH_ARGS:-}
mkdir -p "$CI_DIR"

echo "==> luminal doctor"
$LUMINAL doctor
echo "==> luminal compile $MODEL"
$LUMINAL compile "$MODEL" -o "$CI_DIR/model.lmnl" --budget "$BUDGET"
echo "==> luminal bench against $BASELINE (fail below $THRESHOLD)"
# shellcheck disable=SC2086  # BENCH_ARGS is a list of options
$LUMINAL bench "$CI_DIR/model.lmnl" --baseline "$BASELINE" --model "$MODEL" \
    -o "$CI_DIR/report.json" --duration "$DURATION" --fail-below "$THRESHOLD" \
    --ci --ci-dir "$CI_DIR" $BENCH_ARGS
