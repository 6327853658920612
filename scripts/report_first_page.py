"""Write docs/report-first-page.png: the first page of the demo weekly report's PDF, as Chromium's PDF viewer shows it.

    python scripts/report_first_page.py

Exports workspaces/supply-chain-weekly's report with `python -m lib export --pdf` (over a scratch cache, so the
checkout's data stays as it is), opens the PDF in Chromium and takes a picture of page 1. Needs DASHMEM_CHROMIUM.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "report-first-page.png"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "supply-chain-weekly"
        shutil.copytree(ROOT / "workspaces" / "supply-chain-weekly", folder)
        pdf = Path(tmp) / "report.pdf"
        env = {**os.environ, "DASHMEM_CACHE_DIR": str(Path(tmp) / "cache"), "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-m", "lib", "export", str(folder), "--pdf", str(pdf)], check=True, env=env, cwd=ROOT)

        from playwright.sync_api import sync_playwright

        from lib.core import settings

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(settings.get("DASHMEM_CHROMIUM")), args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 820, "height": 1140})
            page.goto(f"file://{pdf}#page=1&toolbar=0&navpanes=0&view=FitH")
            page.wait_for_timeout(3000)  # the viewer draws the page after the load event
            page.screenshot(path=str(OUT))
            browser.close()
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
