"""The store: one directory per run, `store/<test-name>/<YYYYmmddTHHMMSS>/`
(its files: rundir.py).

`store/latest` (and `store/<test-name>/latest`) point at the newest run, so
`queuecheck check store/latest` re-judges the last history.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from .names import bad_name
from .options import OptionError, option
from .rundir import RunDir

DEFAULT_ROOT = Path(os.environ.get("QUEUECHECK_STORE", "store"))
LATEST = "latest"


@dataclass
class StoreOptions:
    store: str = option(str(DEFAULT_ROOT), "store root: one directory per run")


def ensure_store(root: str | os.PathLike) -> Path:
    """The store's root, made if missing; an OS error names the option."""
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot write in {path}")
    except OSError as e:
        raise OptionError(f"--store {root}: not a directory runs can be kept in ({e})") from None
    return path


def name_problem(name: str) -> str | None:
    """Why a test name cannot name a directory of the store (it would reach
    outside it, or hold a separator), or None."""
    return bad_name("--name", name)


def _point(link: Path, target: Path) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(os.path.relpath(target, link.parent))
    tmp.replace(link)


def new_run_dir(test_name: str, root: Path = DEFAULT_ROOT) -> RunDir:
    """Creates a fresh run directory (`latest` is pointed at it only once the
    run is judged: point_latest)."""
    why = name_problem(test_name)
    if why:
        raise OptionError(why)
    try:
        return RunDir.at(fresh_dir(ensure_store(root) / test_name))
    except OSError as e:
        raise OptionError(f"--store {root}: cannot make a run directory there ({e})") from None


def fresh_dir(base: Path) -> Path:
    """A new directory `base/<time>` (`<time>-2` ... when two are made in
    one second), its parents created."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        out = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            out.mkdir()
            return out
        except FileExistsError:
            n += 1


def point_latest(run: RunDir) -> None:
    """`store/latest` and `store/<test>/latest` name `run`: a run that was
    judged (or recorded whole, when asked not to be judged). A run that
    failed or was interrupted never moves them, so a nightly comparison
    with `latest` compares with the last good run."""
    _point(run.path.parent / LATEST, run.path)
    _point(run.path.parent.parent / LATEST, run.path)
