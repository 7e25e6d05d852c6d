"""`luminal bundle`: everything an air-gapped machine needs to install luminal, signed.

    luminal-bundle-VERSION/
        wheels/*.whl            luminal and every dependency, for one platform and Python
        requirements.lock       NAME==VERSION --hash=sha256:... per wheel (pip --require-hashes)
        sbom.cdx.json           CycloneDX 1.6 (installers/sbom.py)
        bundle.json             what the bundle is for: version, platform, python, extras
        keyring.json            the release keyring's vendor roots (compare out of band)
        signer.cert.json        the signing key's certificate from a vendor root
        install.sh              verify, then install into a venv offline, then `luminal doctor`
        verify_bundle.py        the standalone verifier install.sh runs first
        SHA256SUMS              sha256 of every file above
        SHA256SUMS.dsse.json    DSSE envelope over SHA256SUMS, by the signing key

The signing key is a vendor signing key certified by a vendor root (the chain of
licensing/chain.py: `luminal-vendor keygen` + `certify`); its certificate must verify
against this release's keyring before anything is written.  Stages, in order: check key,
build luminal's wheel, resolve and download wheels (pip, `--only-binary :all:` for the
target platform; `--wheelhouse DIR` resolves from a folder only, no index), lock, SBOM,
sums, sign, write (a folder, or a .tar.gz, atomically).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from luminal._version import __version__
from luminal.errors import IntegrityError, LicenseError, UsageError
from luminal.installers import sbom
from luminal.installers.verify_bundle import (
    CERT,
    ENVELOPE,
    KEYRING,
    MANIFEST,
    SUMS,
    SUMS_TYPE,
    sha256_file,
)
from luminal.licensing import dsse, keys
from luminal.licensing.chain import verify_certificate
from luminal.licensing.keys import key_id, load_private
from luminal.licensing.timeutil import to_iso

SCHEMA = "luminal-bundle/1"
LOCK = "requirements.lock"
SBOM = "sbom.cdx.json"
#: The scripts shipped in every bundle, from this package.
SCRIPTS = ("install.sh", "verify_bundle.py")
#: What a source tree holds that is no part of luminal's wheel.
BUILD_LEFTOVERS = (".git", "build", "dist", ".venv", "*.egg-info", "__pycache__", ".*_cache")
EXTRAS = ("torch", "toolchain", "onnxruntime", "gpu", "nvml", "tvm", "openvino")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BundleSpec:
    output: Path  # a folder, or a path ending in .tar.gz / .tgz
    signing_key: Path  # PREFIX.key, with PREFIX.cert.json beside it
    platform: str = "manylinux_2_28_x86_64"
    python: str = "3.11"
    extras: tuple[str, ...] = ()
    wheelhouse: Path | None = None  # resolve from this folder only (no index)
    source: Path | None = None  # luminal's source tree (default: this package, if a checkout)
    luminal_wheel: Path | None = None  # or a wheel of luminal already built
    constraint: Path | None = None  # pip constraints (e.g. a CPU torch build)


@dataclass(frozen=True)
class BundleResult:
    path: Path
    wheels: tuple[sbom.Wheel, ...]
    bytes: int
    signer: str
    root: str
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "wheels": [{"name": w.name, "version": w.version, "file": w.file} for w in self.wheels],
            "bytes": self.bytes,
            "signer": self.signer,
            "root": self.root,
            "seconds": self.seconds,
        }


def build_bundle(spec: BundleSpec, progress: Progress | None = None) -> BundleResult:
    say = progress or (lambda _line: None)
    _check_spec(spec)
    seconds: dict[str, float] = {}

    def stage(name: str, t0: float) -> None:
        seconds[name] = round(time.monotonic() - t0, 2)
        say(f"{name} ({seconds[name]:.1f}s)")

    t = time.monotonic()
    key, cert_data, root = _signer(spec.signing_key)
    stage("check signing key", t)
    spec.output.absolute().parent.mkdir(parents=True, exist_ok=True)
    # beside the output, so that a folder bundle is renamed into place, not copied
    with tempfile.TemporaryDirectory(
        prefix=".luminal-bundle-", dir=spec.output.absolute().parent
    ) as tmp:
        work = Path(tmp)
        folder = work / f"luminal-bundle-{__version__}"
        wheels = folder / "wheels"
        wheels.mkdir(parents=True)
        t = time.monotonic()
        own = _luminal_wheel(spec, work / "own")
        stage("build luminal wheel", t)
        t = time.monotonic()
        _download(spec, own, wheels)
        stage(f"download wheels for {spec.platform}, Python {spec.python}", t)
        t = time.monotonic()
        found = sorted(
            (sbom.read_wheel(p, sha256_file(p)) for p in wheels.glob("*.whl")), key=lambda w: w.name
        )
        if not any(w.name == "luminal" for w in found):
            raise UsageError("the resolved wheels do not include luminal itself")
        created = to_iso(datetime.now(UTC))
        (folder / LOCK).write_text(_lock(found))
        (folder / SBOM).write_text(json.dumps(sbom.cyclonedx(found, "luminal", created), indent=2))
        manifest = {
            "schema": SCHEMA,
            "luminal": next(w.version for w in found if w.name == "luminal"),
            "platform": spec.platform,
            "python": spec.python,
            "extras": list(spec.extras),
            "created": created,
            "signer": key_id(key.public_key()),
            "wheels": len(found),
        }
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (folder / KEYRING).write_text(json.dumps(keys.shipped_keyring().to_json(), indent=2) + "\n")
        (folder / CERT).write_text(json.dumps(cert_data, indent=2) + "\n")
        here = resources.files("luminal.installers")
        for name in SCRIPTS:
            target = folder / name
            target.write_bytes(here.joinpath(name).read_bytes())
            target.chmod(0o755)
        stage(f"lock and SBOM ({len(found)} wheels)", t)
        t = time.monotonic()
        sums = "".join(
            f"{sha256_file(p)}  {p.relative_to(folder).as_posix()}\n"
            for p in sorted(folder.rglob("*"))
            if p.is_file()
        ).encode()
        (folder / SUMS).write_bytes(sums)
        envelope = dsse.sign(SUMS_TYPE, sums, {key_id(key.public_key()): key})
        (folder / ENVELOPE).write_bytes(envelope.dumps())
        stage("sign SHA256SUMS", t)
        t = time.monotonic()
        out = _write(folder, spec.output)
        stage(f"write {out}", t)
    size = (
        out.stat().st_size
        if out.is_file()
        else sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    )
    return BundleResult(out, tuple(found), size, key_id(key.public_key()), root, seconds)


def platform_tags(platform: str) -> list[str]:
    """pip's --platform list for a target: manylinux_2_X_ARCH also takes every older
    manylinux wheel (2_17 and the manylinux2014 alias); anything else as given."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not m:
        return [platform]
    glibc, arch = int(m.group(1)), m.group(2)
    tags = [f"manylinux_2_{v}_{arch}" for v in range(glibc, 16, -1)]
    return [*tags, f"manylinux2014_{arch}"] if glibc >= 17 else tags


def _check_spec(spec: BundleSpec) -> None:
    if not re.fullmatch(r"3\.\d+", spec.python):
        raise UsageError(f"--python {spec.python}: expected a version such as 3.11")
    unknown = [e for e in spec.extras if e not in EXTRAS]
    if unknown:
        raise UsageError(f"--extras {','.join(unknown)}: choose from {', '.join(EXTRAS)}")
    out = spec.output
    if out.exists() and (out.is_file() or any(out.iterdir())):
        raise UsageError(f"-o {out}: already exists; remove it or give a new path")
    if spec.wheelhouse is not None and not spec.wheelhouse.is_dir():
        raise UsageError(f"--wheelhouse {spec.wheelhouse}: not a folder")


def _signer(key_path: Path) -> tuple[Ed25519PrivateKey, object, str]:
    """The signing key, its certificate (JSON data) and the root that certified it."""
    key = load_private(key_path)
    stem = key_path.name.removesuffix(".key")
    cert_path = key_path.with_name(f"{stem}.cert.json")
    try:
        cert_data = json.loads(cert_path.read_text())
    except FileNotFoundError:
        raise UsageError(
            f"{cert_path}: no certificate beside the signing key (`luminal-vendor certify`)"
        ) from None
    except (OSError, ValueError) as err:
        raise UsageError(f"{cert_path}: not JSON ({err})") from None
    try:
        trusted = verify_certificate(cert_data, keys.shipped_keyring())
    except LicenseError as err:
        raise IntegrityError(f"{cert_path}: {err}") from None
    if trusted.keyid != key_id(key.public_key()):
        raise UsageError(f"{cert_path} certifies key {trusted.keyid}, not {key_path}")
    if not trusted.valid_at(datetime.now(UTC)):
        raise IntegrityError(f"{cert_path}: key {trusted.keyid} is outside its window now")
    return key, cert_data, trusted.certified_by


def _luminal_wheel(spec: BundleSpec, into: Path) -> Path:
    if spec.luminal_wheel is not None:
        if not spec.luminal_wheel.is_file():
            raise UsageError(f"--luminal-wheel {spec.luminal_wheel}: no such file")
        return spec.luminal_wheel
    source = spec.source or Path(__file__).resolve().parents[1]
    if not (source / "pyproject.toml").is_file():
        raise UsageError(
            f"{source}: not a luminal source tree (no pyproject.toml); give --source or "
            "--luminal-wheel"
        )
    # from a clean copy: an in-tree build reuses build/lib, which keeps files since removed
    clean = into.parent / "source"
    shutil.copytree(source, clean, symlinks=True, ignore=shutil.ignore_patterns(*BUILD_LEFTOVERS))
    isolation = ["--no-build-isolation"] if _has_setuptools() else []
    _pip("wheel", "--no-deps", *isolation, "-w", str(into), str(clean))
    built = sorted(into.glob("luminal-*.whl"))
    if not built:
        raise UsageError(f"pip built no luminal wheel from {source}")
    return built[-1]


def _has_setuptools() -> bool:
    """Build luminal's wheel with this environment's setuptools when it has one (no index
    needed); else pip's isolated build fetches setuptools from the index."""
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return False
    return True


def _download(spec: BundleSpec, own: Path, wheels: Path) -> None:
    py = spec.python
    args = ["download", "--only-binary=:all:", "--dest", str(wheels)]
    for tag in platform_tags(spec.platform):
        args += ["--platform", tag]
    args += ["--python-version", py, "--implementation", "cp", "--abi", f"cp{py.replace('.', '')}"]
    if spec.wheelhouse is not None:
        args += ["--no-index", "--find-links", str(spec.wheelhouse)]
    if spec.constraint is not None:
        args += ["--constraint", str(spec.constraint)]
    extras = f"[{','.join(spec.extras)}]" if spec.extras else ""
    _pip(*args, f"{own}{extras}")
    if not (wheels / own.name).exists():  # pip may take it from the cache: keep the one built
        shutil.copy2(own, wheels / own.name)


def _pip(*args: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PIP_REQUIRE_VIRTUALENV"}
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        tail = [ln for ln in done.stderr.splitlines() if ln.strip()][-3:]
        raise UsageError(f"pip {args[0]} failed: {' | '.join(tail) or done.returncode}")


def _lock(wheels: list[sbom.Wheel]) -> str:
    lines = [
        "# luminal offline bundle: install with pip --no-index --require-hashes -r this file",
        *(f"{w.name}=={w.version} --hash=sha256:{w.sha256}" for w in wheels),
    ]
    return "\n".join(lines) + "\n"


def _write(folder: Path, output: Path) -> Path:
    output = output.absolute()
    if output.exists() and (output.is_file() or any(output.iterdir())):
        raise UsageError(f"-o {output}: already exists; remove it or give a new path")
    if output.name.endswith((".tar.gz", ".tgz")):
        fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                with tarfile.open(fileobj=f, mode="w:gz", compresslevel=1) as tar:
                    tar.add(folder, arcname=folder.name)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, output)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return output
    if output.exists():
        output.rmdir()  # an empty folder given as the target
    os.replace(folder, output)
    return output
