"""Every licensing test runs in its own LUMINAL_HOME, with no proxy from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

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
