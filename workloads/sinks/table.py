"""The table sinks: the consumer's effect is a row in a real database,
SQLite in the run directory (the embedded default) or a PostgreSQL server
the tool starts, one file each against the EffectsTable protocol.

- naive (unique off): every processing appends a row, then the consumer
  acks. A redelivery (a consumer that died after its effect and before its
  ack) applies the effect again: at-least-once shows up as duplicate effects.
- dedupe (unique on): the effect and the message id are written in one
  transaction under a unique key on the id, so a redelivered message is
  recognised and not applied again. At-least-once delivery plus this is
  exactly-once effect."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

DATABASES = ("sqlite", "postgres")


class EffectsTable(Protocol):
    unique: bool  # one row per id at most (repeats ignored), or a row per insert

    def insert(self, ids: list[int]) -> None:
        """All ids in one database transaction (safe from many threads)."""

    def counts(self) -> Iterator[tuple[int, int]]:
        """(id, rows for it), for every id with a row, in id order."""

    def close(self) -> None: ...


class TableSink:
    """A table sink: `naive` or `dedupe`, the same code but for the table's key."""

    transactional = False

    def __init__(self, name: str, table: EffectsTable):
        self.name = name
        self.table = table

    def apply(self, ids: list[int]) -> None:
        self.table.insert(ids)

    def counts(self) -> Iterator[tuple[int, int]]:
        return self.table.counts()

    def close(self) -> None:
        self.table.close()


def open_table(
    database: str, run_dir: Path, unique: bool, running: Path | None = None
) -> EffectsTable:
    """The effects table of a run, in `database`, its files under `run_dir`;
    a server the tool starts is listed in `running` while it runs, so one a
    killed run left behind can be stopped later (postgres.stop_leftovers)."""
    if database == "sqlite":
        from .sqlite import SQLiteEffects

        return SQLiteEffects(Path(run_dir) / "sink.sqlite", unique)
    if database == "postgres":
        from .postgres import PostgresEffects

        return PostgresEffects(Path(run_dir) / "postgres", unique, running)
    raise ValueError(f"--sink-db: {database!r} is not one of {', '.join(DATABASES)}")
