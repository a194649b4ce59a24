"""The dedupe sink: the effect and the message id are written in one
database transaction under a unique key on the id, so a redelivered message
is recognised and not applied again. At-least-once delivery plus this is
exactly-once effect."""

from __future__ import annotations

from pathlib import Path

from .sqlite import SQLiteTable


class DedupeSink:
    name = "dedupe"

    def __init__(self, path: Path):
        self.table = SQLiteTable(
            path, "CREATE TABLE IF NOT EXISTS effects (id INTEGER PRIMARY KEY)"
        )

    def apply(self, ids: list[int]) -> None:
        self.table.write("INSERT OR IGNORE INTO effects (id) VALUES (?)", [(i,) for i in ids])

    def counts(self):
        return self.table.counts()

    def close(self) -> None:
        self.table.close()
