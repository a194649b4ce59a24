"""The checker's JVM starts from a class archive when there is one; a bad
or stale one must never cost a check or a word of output."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from checkers.spark import CLASS_ARCHIVE_DIR, class_archive
from tests.paths import SPEC_EXAMPLE

EXAMPLE = SPEC_EXAMPLE


def test_a_stale_class_archive_is_ignored_quietly(tmp_path):
    """An archive of another class path (here: of a bare `java -version`):
    the check runs and says nothing of it (a JVM told -Xshare:on would
    refuse to start; a noisy one would print between the verdict lines)."""
    home = tmp_path / "home"
    archive = home / class_archive().relative_to(Path.home())
    archive.parent.mkdir(parents=True)
    subprocess.run(
        ["java", f"-XX:ArchiveClassesAtExit={archive}", "-version"],
        capture_output=True,
        check=True,
        timeout=120,
    )
    assert archive.stat().st_size > 0
    shutil.copy(EXAMPLE, tmp_path / "history.jsonl")
    r = subprocess.run(
        [sys.executable, "-m", "harness.commands.cli", "check", str(tmp_path / "history.jsonl")],
        env={**os.environ, "HOME": str(home)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # a guard against a hang, not a speed limit: a JVM without its archive on
        # the niced units worker beside two busy groups took over 300 s in a CI run
        timeout=900,
    )
    # the example loses a message: INVALID, as with no archive at all
    assert r.returncode == 1, r.stdout + r.stderr
    assert "verdict: INVALID" in r.stdout
    assert "cds" not in (r.stdout + r.stderr).lower()
    assert archive.parent.parent == home / CLASS_ARCHIVE_DIR.relative_to(Path.home()).parent
