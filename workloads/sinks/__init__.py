"""Sinks: the consumer's side effect, in a real system. One per file
against one small protocol; at the end of a run the sink is read back and
written to the history as `effects` ops.

- naive, dedupe: a table in a database (tables.py: SQLite in the run
  directory, or a PostgreSQL server the tool starts);
- kafka-txn: the effect is an output record, written in the same Kafka
  transaction as the consumed offsets (kafka_txn.py; Kafka runs only).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .tables import DATABASES, open_table

__all__ = ["DATABASES", "SINKS", "TABLE_SINKS", "Sink", "make_sink"]

SINKS = ("naive", "dedupe", "kafka-txn")
TABLE_SINKS = ("naive", "dedupe")


class Sink(Protocol):
    name: str

    def apply(self, ids: list[int]) -> None:
        """Applies the effect of each delivered message (safe from many threads)."""

    def counts(self) -> Iterator[tuple[int, int]]:
        """(id, how many times its effect is present), for every id with an effect."""

    def close(self) -> None: ...


def make_sink(kind: str, run_dir: Path, database: str = "sqlite") -> Sink:
    """A table sink (naive or dedupe) keeping its effects in `database`."""
    if kind not in SINKS:
        raise ValueError(f"--sink: {kind!r} is not one of {', '.join(SINKS)}")
    if kind not in TABLE_SINKS:
        raise ValueError(f"--sink: {kind!r} is made by its system (kafka-txn: --system kafka)")
    if kind == "naive":
        from .naive import NaiveSink

        return NaiveSink(open_table(database, run_dir, unique=False))
    from .dedupe import DedupeSink

    return DedupeSink(open_table(database, run_dir, unique=True))
