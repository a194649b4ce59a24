"""Sinks: the consumer's side effect, in a real system, read back at the end
of a run into the history as `effects` ops. One small protocol; the
broker-agnostic table sinks are here (table.py, over SQLite or PostgreSQL);
a broker's own sinks live in its folder (Kafka's kafka-txn:
workloads/kafka/txn_sink.py) and are made by its System."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .table import DATABASES, TableSink, open_table

__all__ = ["DATABASES", "TABLE_SINKS", "Sink", "make_table_sink"]

# name -> one row per id at most (dedupe), or a row per processing (naive)
TABLE_SINKS = {"naive": False, "dedupe": True}


class Sink(Protocol):
    name: str
    # True: the consumer applies the effect and commits its offsets in one
    # transaction through `processor(node, bootstrap, deadline)` (kafka-txn);
    # False: the consumer calls `apply`, then acks.
    transactional: bool

    def apply(self, ids: list[int]) -> None:
        """Applies the effect of each delivered message (safe from many threads)."""

    def counts(self) -> Iterator[tuple[int, int]]:
        """(id, how many times its effect is present), for every id with an effect."""

    def close(self) -> None: ...


def make_table_sink(
    kind: str, run_dir: Path, database: str = DATABASES[0], running: Path | None = None
) -> Sink:
    """A table sink (naive or dedupe) keeping its effects in `database`; a
    server it starts is listed in `running` (see open_table)."""
    if kind not in TABLE_SINKS:
        raise ValueError(f"--sink: {kind!r} is not one of {', '.join(TABLE_SINKS)}")
    return TableSink(kind, open_table(database, run_dir, TABLE_SINKS[kind], running))
