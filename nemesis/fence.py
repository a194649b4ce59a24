"""Zombie fencing: while a transactional producer is inside a transaction,
another producer starts with the same transactional id (Kafka's
InitProducerId), as a restarted instance of an application would; the
broker must fence the first: its further sends and its commit fail and
nothing it wrote in that transaction becomes visible to read_committed
readers. The fencer is recorded as the nemesis op's value (the id, whether
its producer was inside a transaction); the fenced producer's transaction
ends `fail` in the history, so a record of it that a reader sees is an
aborted read (G1a): read-committed broken. Redpanda's chaos suite calls
this hijack_tx_ids."""

from __future__ import annotations

import random
from typing import Any

from harness.options import OptionError
from workloads.capabilities import Fencing

from .base import FaultContext, InstantFault, Settings, require


class FenceNemesis(InstantFault):
    name = "fence"
    summary = (
        "a second producer with the transactional id of one inside a transaction (needs "
        "transactional producers)"
    )
    colour = "#ce93d8"
    options = ()

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(db, Fencing, "--nemesis fence", "have no producer identities to fence")
        why = db.cannot_fence(settings.system)
        if why:
            raise OptionError(f"--nemesis fence: {why}")

    @classmethod
    def build(cls, ctx: FaultContext) -> FenceNemesis:
        return cls(ctx.db)

    def __init__(self, db: Any):
        self.db = db

    def start(self, rng: random.Random) -> Any:
        return self.db.fence(rng)
