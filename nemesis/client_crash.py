"""Client crashes: a few client processes drop their connection at their
next operation, without acking what they hold, and continue under new
process numbers. With auto-ack this is how a consumer loses the messages
it was holding; with manual acks they come back."""

from __future__ import annotations

import random
from typing import Any


class ClientCrashNemesis:
    name = "crash-client"
    instant = True

    def __init__(self, interpreter, slots: list[int], per_crash: int = 1, point: str = "next-op"):
        """`slots`: the interpreter slots it may crash (e.g. the consumers);
        `point`: when (before the next op, or at a moment of processing the
        next delivery: before-effect, after-effect, after-ack)."""
        self.interpreter = interpreter
        self.point = point
        self.slots = slots
        self.per_crash = per_crash

    def setup(self) -> None:
        pass

    def start(self, rng: random.Random) -> Any:
        chosen = rng.sample(self.slots, min(self.per_crash, len(self.slots)))
        return {"crashed": self.interpreter.crash(chosen, self.point)}

    def stop(self) -> Any:
        return None

    def active(self) -> bool:
        return False

    def teardown(self) -> None:
        pass
