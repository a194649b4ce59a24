"""The effects table in SQLite (the embedded default, a file in the run
directory): one connection shared under a lock (the consumers are threads
of one process), WAL so the final read does not wait on writers."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path


class SQLiteEffects:
    """`unique`: one row per id at most, a repeated insert is ignored (dedupe);
    otherwise every insert appends a row (naive)."""

    def __init__(self, path: Path, unique: bool):
        self.path = Path(path)
        self.unique = unique
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        key = "INTEGER PRIMARY KEY" if unique else "INTEGER NOT NULL"
        self.db.execute(f"CREATE TABLE IF NOT EXISTS effects (id {key})")
        self.lock = threading.Lock()

    def insert(self, ids: list[int]) -> None:
        """All ids in one transaction: either every effect is there or none."""
        if not ids:
            return
        verb = "INSERT OR IGNORE" if self.unique else "INSERT"
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(f"{verb} INTO effects (id) VALUES (?)", [(i,) for i in ids])
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def counts(self) -> Iterator[tuple[int, int]]:
        with self.lock:
            rows = self.db.execute("SELECT id, COUNT(*) FROM effects GROUP BY id ORDER BY id")
            yield from rows

    def close(self) -> None:
        with self.lock:
            self.db.close()
