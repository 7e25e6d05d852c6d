"""A bundle built once per session from a wheel cache, and a vendor whose root stands in
for the release keyring.

The wheels of luminal's dependencies are downloaded once (from the configured package
index) into build/bundle-wheelhouse/KEY, KEY a digest of the dependency list, platform and
Python; every later run builds its bundle from there with no index at all (`--wheelhouse`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from luminal.installers.bundle import BundleResult, BundleSpec, build_bundle, platform_tags
from luminal.licensing import keys
from tests.helpers.licensing_helpers import Vendor

ROOT = Path(__file__).resolve().parents[2]
PLATFORM, PYTHON = "manylinux_2_28_x86_64", "3.11"


def dependencies() -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    deps = dependencies()
    key = hashlib.sha256("\n".join([PLATFORM, PYTHON, *sorted(deps)]).encode()).hexdigest()[:12]
    folder = ROOT / "build" / "bundle-wheelhouse" / key
    if not (folder / ".complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        platforms = [a for tag in platform_tags(PLATFORM) for a in ("--platform", tag)]
        cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", *platforms]
        cmd += ["--python-version", PYTHON, "--implementation", "cp", "--abi", "cp311"]
        done = subprocess.run([*cmd, "-d", str(folder), *deps], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"no wheel cache and no package index to fill it: {done.stderr[-300:]}")
        (folder / ".complete").touch()
    return folder


@pytest.fixture(scope="session")
def bundle_vendor(tmp_path_factory: pytest.TempPathFactory) -> Vendor:
    """The vendor that signs the session's bundles (see `as_release`)."""
    return Vendor.create(tmp_path_factory.mktemp("bundle-vendor"))


@contextmanager
def as_release(vendor: Vendor) -> Iterator[None]:
    """While building: the vendor's root stands in for the release keyring (what a release
    that vendor built would ship).  Only then: other tests see the real shipped keyring."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(keys, "shipped_keyring", vendor.release_keyring)
        yield


@pytest.fixture(scope="session")
def built_bundle(
    tmp_path_factory: pytest.TempPathFactory, wheelhouse: Path, bundle_vendor: Vendor
) -> BundleResult:
    out = tmp_path_factory.mktemp("bundle") / "luminal-bundle"
    spec = BundleSpec(output=out, signing_key=bundle_vendor.key_path, wheelhouse=wheelhouse)
    with as_release(bundle_vendor):
        return build_bundle(spec)


@pytest.fixture
def bundle_copy(built_bundle: BundleResult, tmp_path: Path) -> Path:
    """A copy of the session's bundle (hard links: change a file only by replacing it)."""
    copy = tmp_path / "bundle"
    shutil.copytree(built_bundle.path, copy, copy_function=os.link)
    return copy
