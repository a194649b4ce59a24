"""The dedupe sink: the effect and the message id are written in one
database transaction under a unique key on the id, so a redelivered message
is recognised and not applied again. At-least-once delivery plus this is
exactly-once effect."""

from __future__ import annotations

from .tables import EffectsTable


class DedupeSink:
    name = "dedupe"

    def __init__(self, table: EffectsTable):
        self.table = table  # unique on the id: a repeated insert is ignored

    def apply(self, ids: list[int]) -> None:
        self.table.insert(ids)

    def counts(self):
        return self.table.counts()

    def close(self) -> None:
        self.table.close()
