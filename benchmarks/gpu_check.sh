#!/usr/bin/env bash
# The GPU check: the public model suite compiled for --target cuda, its outputs checked
# against ONNX Runtime, and luminal timed against ONNX Runtime's CUDA provider and torch
# (CUDA), in one markdown table (benchmarks/gpu_check.py says how).  At most 5 minutes
# (LUMINAL_GPU_CHECK_SECONDS), installs included.
#
#   benchmarks/gpu_check.sh                              # all four models
#   benchmarks/gpu_check.sh --models mlp,gpt --json gpu.json
#   LUMINAL_WHEELS=/path/to/wheels benchmarks/gpu_check.sh   # no network: wheels from there
#   benchmarks/gpu_check.sh --dry-run                    # no GPU: Triton's interpreter
#
# What it installs goes into a virtual environment (LUMINAL_GPU_VENV, default
# $TMPDIR/luminal-gpu-check) that also sees the packages of the Python it was made from
# (PYTHON, default python3), so a machine's own torch and triton are used and only what is
# missing is installed.  luminal itself is this checkout, linked onto the path: nothing is
# built.  Exit codes: 0 all outputs agree, 1 one does not, 2 no NVIDIA GPU, 3 setup failed,
# 124 out of time.
set -euo pipefail

die() {
    echo "gpu_check: $2" >&2
    exit "$1"
}

limit=${LUMINAL_GPU_CHECK_SECONDS:-300}
dry_run=()
for arg in "$@"; do
    [[ $arg == --dry-run ]] && dry_run=(--dry-run)
done

if [[ ${#dry_run[@]} -eq 0 ]]; then
    command -v nvidia-smi >/dev/null 2>&1 ||
        die 2 "no NVIDIA GPU here: nvidia-smi is not installed (--dry-run runs without one)"
    nvidia-smi -L 2>/dev/null | grep -q '^GPU ' ||
        die 2 "no NVIDIA GPU here: nvidia-smi lists none (--dry-run runs without one)"
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
venv=${LUMINAL_GPU_VENV:-${TMPDIR:-/tmp}/luminal-gpu-check}
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null ||
    die 3 "$python is not a Python 3.11 or newer (set PYTHON)"

if [[ ! -x $venv/bin/python ]]; then
    # --without-pip: the parent's pip serves, and no bundled setuptools shadows its own
    "$python" -m venv --without-pip "$venv" >/dev/null || die 3 "cannot make a venv in $venv"
    site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    "$python" -c 'import site; print("\n".join(site.getsitepackages()))' >"$site/_parent.pth"
fi
py=$venv/bin/python
mkdir -p "$venv/src"
ln -sfn "$root" "$venv/src/luminal"
# vendor/: the evaluation license the check makes for itself when none is installed
export PYTHONPATH=$venv/src:$root/vendor${PYTHONPATH:+:$PYTHONPATH}
cd "$root"

text=$("$py" -m benchmarks.gpu_check --print-missing "${dry_run[@]}") ||
    die 3 "cannot tell what is missing (benchmarks/gpu_check.py --print-missing failed)"
read -r -d '' -a missing <<<"$text" || true
if [[ ${#missing[@]} -gt 0 ]]; then
    from=()
    [[ -n ${LUMINAL_WHEELS:-} ]] && from=(--no-index --find-links "$LUMINAL_WHEELS")
    echo "gpu_check: installing ${missing[*]}" >&2
    timeout $((limit - SECONDS > 1 ? limit - SECONDS : 1)) \
        "$py" -m pip install --quiet "${from[@]}" "${missing[@]}" >&2 ||
        die 3 "could not install ${missing[*]}${LUMINAL_WHEELS:+ from $LUMINAL_WHEELS}"
fi

left=$((limit - SECONDS))
[[ $left -gt 10 ]] || die 124 "out of time after the installs (${SECONDS} s of ${limit} s)"
PYTHONUNBUFFERED=1 timeout "$left" "$py" -m benchmarks.gpu_check "$@" || {
    rc=$?
    [[ $rc -eq 124 ]] && die 124 "stopped at the ${limit} s limit (LUMINAL_GPU_CHECK_SECONDS)"
    exit "$rc"
}
