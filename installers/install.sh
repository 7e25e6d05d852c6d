#!/bin/sh
# Install luminal from this offline bundle: verify first, then install with no index.
#
#   ./install.sh [--prefix DIR] [--python PYTHON3.11] [--keyring FILE] [--no-doctor]
#
# 1. verify_bundle.py checks the vendor chain (keyring.json roots, or --keyring FILE: a
#    copy of the vendor's roots you got out of band), the DSSE signature over SHA256SUMS
#    and every file's sum.  Any mismatch stops here, before anything is installed (exit 4).
# 2. A new venv PREFIX/luminal-VERSION-ID gets the bundle's wheels with
#    pip --no-index --require-hashes (no index, no network; only requirements.lock).
# 3. PREFIX/current is switched to it atomically and PREFIX/bin/luminal points there; the
#    previous version's folder stays (roll back by pointing `current` at it).
# 4. `luminal doctor` runs; its exit code is this script's (7: something is missing).
#
# LUMINAL_HOME (license, install key, tuning database, ledger) is never touched: it lives
# outside PREFIX (default ~/.local/share/luminal), so an upgrade keeps it as it was.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
PREFIX=${LUMINAL_PREFIX:-/opt/luminal}
PYTHON=${PYTHON:-python3.11}
KEYRING=""
DOCTOR=1

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) PREFIX=$2; shift 2 ;;
        --python) PYTHON=$2; shift 2 ;;
        --keyring) KEYRING=$2; shift 2 ;;
        --no-doctor) DOCTOR=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

command -v "$PYTHON" >/dev/null 2>&1 || { echo "install.sh: $PYTHON not found (luminal needs Python 3.11; --python PATH)" >&2; exit 2; }
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "install.sh: $PYTHON is not Python 3.11" >&2; exit 2; }

echo "==> verifying the bundle"
if [ -n "$KEYRING" ]; then
    "$PYTHON" -I "$HERE/verify_bundle.py" "$HERE" --keyring "$KEYRING" || { echo "install.sh: verification failed; nothing was installed" >&2; exit 4; }
else
    "$PYTHON" -I "$HERE/verify_bundle.py" "$HERE" || { echo "install.sh: verification failed; nothing was installed" >&2; exit 4; }
fi

VERSION=$("$PYTHON" -I -c 'import json,sys; print(json.load(open(sys.argv[1]))["luminal"])' "$HERE/bundle.json")
ID=$("$PYTHON" -I -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest()[:12])' "$HERE/SHA256SUMS")
TARGET="$PREFIX/luminal-$VERSION-$ID"

mkdir -p "$PREFIX/bin"
if [ -f "$TARGET/.luminal-installed" ]; then
    echo "==> $TARGET is already installed from this bundle"
else
    echo "==> installing luminal $VERSION into $TARGET (no index, hashes required)"
    rm -rf "$TARGET"
    "$PYTHON" -m venv "$TARGET"
    # pip may read an index, find-links or constraints from the environment or a config
    # file: none of them, only the bundle's wheels and lock.  -I: no PYTHONPATH or user
    # site, where another luminal would look "already installed" to pip
    env -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL -u PIP_FIND_LINKS -u PIP_CONSTRAINT \
        -u PIP_REQUIREMENT PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 \
        "$TARGET/bin/python" -I -m pip install --quiet --disable-pip-version-check \
        --no-index --find-links "$HERE/wheels" --require-hashes --only-binary=:all: \
        -r "$HERE/requirements.lock" || { rm -rf "$TARGET"; echo "install.sh: pip failed; $PREFIX/current is unchanged" >&2; exit 1; }
    "$TARGET/bin/python" -I -c 'import importlib.metadata as m; m.version("luminal")' \
        || { rm -rf "$TARGET"; echo "install.sh: luminal is not in the new venv; $PREFIX/current is unchanged" >&2; exit 1; }
    cp "$HERE/bundle.json" "$TARGET/luminal-bundle.json"
    touch "$TARGET/.luminal-installed"
fi

ln -sfn "luminal-$VERSION-$ID" "$PREFIX/current.new"
mv -T "$PREFIX/current.new" "$PREFIX/current"
ln -sfn ../current/bin/luminal "$PREFIX/bin/luminal.new"
mv -T "$PREFIX/bin/luminal.new" "$PREFIX/bin/luminal"
echo "==> luminal $VERSION installed: $PREFIX/bin/luminal (add $PREFIX/bin to PATH)"

if [ "$DOCTOR" = 1 ]; then
    echo "==> luminal doctor"
    rc=0
    env -u PYTHONPATH -u PYTHONHOME "$PREFIX/bin/luminal" doctor || rc=$?
    if [ "$rc" != 0 ]; then
        echo "install.sh: installed, but luminal doctor found problems (exit $rc)" >&2
        exit "$rc"
    fi
fi
