"""The SQLite database both sinks write to: one file, one connection shared
under a lock (the consumers are threads of one process), WAL so the final
read does not wait on writers."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path


class SQLiteTable:
    def __init__(self, path: Path, schema: str):
        self.path = Path(path)
        self.db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(schema)
        self.lock = threading.Lock()

    def write(self, sql: str, rows: list[tuple]) -> None:
        """All rows in one transaction: either every effect is there or none."""
        if not rows:
            return
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                self.db.executemany(sql, rows)
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
