"""The store: one directory per run, `store/<test-name>/<YYYYmmddTHHMMSS>/`.

`store/latest` (and `store/<test-name>/latest`) point at the newest run, so
`queuecheck check store/latest` re-judges the last history.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .options import option

DEFAULT_ROOT = Path(os.environ.get("QUEUECHECK_STORE", "store"))


@dataclass
class StoreOptions:
    store: str = option(str(DEFAULT_ROOT), "store root: one directory per run")


SECRET_KEYS = re.compile(r"pass(word)?|secret|token|private|cookie", re.I)


def scrub(obj: Any) -> Any:
    """The spec without secrets: values under secret-looking keys are masked."""
    if isinstance(obj, dict):
        return {k: ("***" if SECRET_KEYS.search(str(k)) else scrub(v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


def _point(link: Path, target: Path) -> None:
    tmp = link.with_name(f".{link.name}.{os.getpid()}")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(os.path.relpath(target, link.parent))
    tmp.replace(link)


def new_run_dir(test_name: str, root: Path = DEFAULT_ROOT) -> Path:
    """Creates a fresh run directory and points the `latest` links at it."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    base = root / test_name
    base.mkdir(parents=True, exist_ok=True)
    run = base / stamp
    n = 1
    while True:
        try:
            run.mkdir()
            break
        except FileExistsError:  # two runs in one second
            n += 1
            run = base / f"{stamp}-{n}"
    _point(base / "latest", run)
    _point(root / "latest", run)
    return run


def write_test(run: Path, test: dict[str, Any]) -> Path:
    path = run / "test.json"
    path.write_text(json.dumps(scrub(test), indent=2) + "\n")
    return path
