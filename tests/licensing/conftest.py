"""Every licensing test runs in its own LUMINAL_HOME, with no proxy from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from luminal.licensing import keys
from luminal.licensing.home import Home
from tests.helpers.licensing_helpers import Vendor


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    root = tmp_path / "luminal-home"
    monkeypatch.setenv("LUMINAL_HOME", str(root))
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("LUMINAL_ACTIVATION_KEY", raising=False)
    return Home(root)


@pytest.fixture
def vendor(tmp_path: Path) -> Vendor:
    return Vendor.create(tmp_path / "vendor")


@pytest.fixture
def vendor_root(vendor: Vendor, monkeypatch: pytest.MonkeyPatch) -> Vendor:
    """The test vendor's root stands in for the shipped release keyring (what a release
    built by that vendor would ship), so the CLI verifies the chain end to end."""
    monkeypatch.setattr(keys, "shipped_keyring", vendor.release_keyring)
    return vendor
