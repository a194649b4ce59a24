"""The naive sink: every processing appends an effect row, then the
consumer acks. A redelivery (a consumer that died after its effect and
before its ack) applies the effect again: at-least-once delivery shows up
as duplicate effects."""

from __future__ import annotations

from pathlib import Path

from .sqlite import SQLiteTable


class NaiveSink:
    name = "naive"

    def __init__(self, path: Path):
        self.table = SQLiteTable(path, "CREATE TABLE IF NOT EXISTS effects (id INTEGER NOT NULL)")

    def apply(self, ids: list[int]) -> None:
        self.table.write("INSERT INTO effects (id) VALUES (?)", [(i,) for i in ids])

    def counts(self):
        return self.table.counts()

    def close(self) -> None:
        self.table.close()
