"""Two distributions from one repository: `luminal` (what a customer installs) and
`luminal-vendor` (`vendor/`: the vendor's signing tools and service), which must never
travel inside the customer's."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import luminal

ROOT = Path(__file__).parents[1]
MAIN = tomllib.loads((ROOT / "pyproject.toml").read_text())
VENDOR = tomllib.loads((ROOT / "vendor" / "pyproject.toml").read_text())


def test_the_main_distribution_declares_no_vendor_package_script_or_extra() -> None:
    project = MAIN["project"]
    assert project["scripts"] == {"luminal": "luminal.cli.app:main"}
    assert "vendor" not in project["optional-dependencies"]
    packages = MAIN["tool"]["setuptools"]["packages"]
    assert not [p for p in packages if "vendor" in p or p.startswith("luminal.tools")]
    for name in packages:  # every listed package is a folder of the repository root
        folder = ROOT.joinpath(*name.split(".")[1:])
        assert (folder / "__init__.py").is_file(), name


def test_the_vendor_distribution_declares_its_script_and_depends_on_this_luminal() -> None:
    project = VENDOR["project"]
    assert project["name"] == "luminal-vendor"
    assert project["scripts"] == {"luminal-vendor": "luminal_vendor.cli:main"}
    assert VENDOR["tool"]["setuptools"]["packages"] == ["luminal_vendor"]
    deps = {d.split(">")[0].split("=")[0].split("<")[0]: d for d in project["dependencies"]}
    assert {"luminal", "starlette", "uvicorn"} <= set(deps)
    # Released together: the formats it signs are this luminal's.
    assert deps["luminal"] == f"luminal=={luminal.__version__}"
    assert project["version"] == luminal.__version__


def test_the_vendor_script_target_is_the_vendor_cli() -> None:
    from luminal_vendor import cli

    assert callable(cli.main) and cli.app.info.name == "luminal-vendor"


def _wheel(source: Path, out: Path) -> Path:
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    subprocess.run(
        [*pip, "-w", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


def _entry_points(wheel: zipfile.ZipFile) -> configparser.ConfigParser:
    parser = configparser.ConfigParser()
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    parser.read_string(wheel.read(name).decode())
    return parser


@pytest.mark.slow
def test_the_main_wheel_holds_no_vendor_file_and_the_vendor_wheel_does(tmp_path: Path) -> None:
    # Build from a copy: an in-tree build leaves build/ and *.egg-info in the checkout.
    source = tmp_path / "src"
    junk = shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".*cache")
    shutil.copytree(ROOT, source, symlinks=True, ignore=junk)
    main = zipfile.ZipFile(_wheel(source, tmp_path / "main"))
    vendor = zipfile.ZipFile(_wheel(source / "vendor", tmp_path / "vendor"))

    files = main.namelist()
    assert "luminal/licensing/license.py" in files and "luminal/cli/app.py" in files
    leaked = [f for f in files if f.startswith(("luminal_vendor/", "luminal/licensing/vendor/"))]
    leaked += [f for f in files if f.startswith(("luminal/vendor/", "luminal/tools/", "tools/"))]
    assert not leaked
    assert dict(_entry_points(main)["console_scripts"]) == {"luminal": "luminal.cli.app:main"}

    names = vendor.namelist()
    assert {"luminal_vendor/cli.py", "luminal_vendor/app.py", "luminal_vendor/issuer.py"} <= set(
        names
    )
    assert not [f for f in names if f.startswith("luminal/")]  # luminal is a dependency
    scripts = dict(_entry_points(vendor)["console_scripts"])
    assert scripts == {"luminal-vendor": "luminal_vendor.cli:main"}
