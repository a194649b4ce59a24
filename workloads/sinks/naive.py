"""The naive sink: every processing appends an effect row, then the
consumer acks. A redelivery (a consumer that died after its effect and
before its ack) applies the effect again: at-least-once delivery shows up
as duplicate effects."""

from __future__ import annotations

from .tables import EffectsTable


class NaiveSink:
    name = "naive"

    def __init__(self, table: EffectsTable):
        self.table = table  # not unique: every insert is a row

    def apply(self, ids: list[int]) -> None:
        self.table.insert(ids)

    def counts(self):
        return self.table.counts()

    def close(self) -> None:
        self.table.close()
