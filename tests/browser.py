"""A real browser for the tests of pages people read: headless Chromium
(installed by `make setup`), the DOM it made of a page after its scripts ran."""

from __future__ import annotations

import subprocess

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu"]


def dump_dom(url: str, timeout: float = 120) -> str:
    """The page at `url` (file:// or http://) as Chromium rendered it."""
    done = subprocess.run(
        [*CHROMIUM, "--dump-dom", url], capture_output=True, text=True, timeout=timeout
    )
    return done.stdout
