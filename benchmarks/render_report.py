"""Render a report's HTML page in headless Chromium and save a screenshot.

    python -m benchmarks.render_report build/demo-report.html -o build/demo-report.png

Needs Debian's `chromium` (apt-get install chromium).  The page is self-contained (inline
CSS and SVG, no scripts), so it renders with the network off.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path


def screenshot(page: Path, png: Path, width: int = 1100, height: int = 2200) -> Path:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="luminal-chromium-") as profile:
        subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png.absolute()}",
                page.absolute().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )
    return png


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("page", type=Path)
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--height", type=int, default=2200)
    args = parser.parse_args(argv)
    out = screenshot(args.page, args.output or args.page.with_suffix(".png"), height=args.height)
    print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
