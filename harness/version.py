"""queuecheck's own version, as `--version` and each run's test.json say it:
the package's version and, from a git checkout, its commit (a run is
re-analysable only by the code that can read it)."""

from __future__ import annotations

import subprocess
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


@cache
def tool_version() -> str:
    """ "0.1.0 (git 1bcc203, changed)"; the package version alone outside a checkout."""
    try:
        text = version("queuecheck")
    except PackageNotFoundError:
        text = "unknown"
    try:
        commit = subprocess.run(
            ["git", "-C", str(CHECKOUT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if commit.returncode != 0:
            return text
        dirty = subprocess.run(
            ["git", "-C", str(CHECKOUT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return text
    changed = ", changed" if dirty.returncode == 0 and dirty.stdout.strip() else ""
    return f"{text} (git {commit.stdout.strip()}{changed})"
