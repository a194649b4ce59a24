"""Where the naive and dedupe sinks keep their effects: one table in a real
database, SQLite in the run directory (the embedded default) or a
PostgreSQL server the tool starts. One per file against this protocol."""

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


def open_table(database: str, run_dir: Path, unique: bool) -> EffectsTable:
    """The effects table of a run, in `database`, its files under `run_dir`."""
    if database == "sqlite":
        from .sqlite import SQLiteEffects

        return SQLiteEffects(Path(run_dir) / "sink.sqlite", unique)
    if database == "postgres":
        from .postgres import PostgresEffects

        return PostgresEffects(Path(run_dir) / "postgres", unique)
    raise ValueError(f"--sink-db: {database!r} is not one of {', '.join(DATABASES)}")
