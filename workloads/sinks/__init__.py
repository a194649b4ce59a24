"""Sinks: the consumer's side effect, in a real database (SQLite in the run
directory). One per file against one small protocol; at the end of a run the
sink is read back and written to the history as `effects` ops."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

SINKS = ("naive", "dedupe")


class Sink(Protocol):
    name: str

    def apply(self, ids: list[int]) -> None:
        """Applies the effect of each delivered message (safe from many threads)."""

    def counts(self) -> Iterator[tuple[int, int]]:
        """(id, how many times its effect is present), for every id with an effect."""

    def close(self) -> None: ...


def make_sink(kind: str, path: Path) -> Sink:
    if kind == "naive":
        from .naive import NaiveSink

        return NaiveSink(path)
    if kind == "dedupe":
        from .dedupe import DedupeSink

        return DedupeSink(path)
    raise ValueError(f"--sink: {kind!r} is not one of {', '.join(SINKS)}")
