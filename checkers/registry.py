"""The checkers, in the order they run, and all that derives from them: the
properties (in the order reports show them), the counts and anomaly kinds
that decide each property, the anomaly kinds, and when a pass is hollow.

The check job, `--claims`, the console, report.html, junit.xml and
`queuecheck compare` all ask these functions, so they list the same
checkers. A new checker is its file (a class with `name`, `properties`,
`rules`, `anomalies`, `hollow` and `check`: checkers/base.py's Checker)
plus one line in CHECKERS.
"""

from __future__ import annotations

from .base import Checker
from .brokers import BrokerChecker
from .delivery import DeliveryChecker
from .exercise import ExerciseChecker, HollowRule
from .offsets import OffsetChecker
from .ownership import OwnershipChecker
from .share import ShareChecker

CHECKERS: list[type[Checker]] = [
    DeliveryChecker,
    OffsetChecker,
    ShareChecker,
    OwnershipChecker,
    BrokerChecker,
    ExerciseChecker,
]


def new_checkers() -> list[Checker]:
    return [c() for c in CHECKERS]


def properties() -> tuple[str, ...]:
    """Every property some checker decides, in report order."""
    return tuple(dict.fromkeys(p for c in CHECKERS for p in c.properties))


def anomalies() -> dict[str, str]:
    """Every anomaly kind (bad news by definition), with what it means."""
    return {k: what for c in CHECKERS for k, what in c.anomalies.items()}


def hollow_rules() -> dict[str, HollowRule]:
    """Each property's hollow-pass rule, from the checker that owns it."""
    return {p: r for c in CHECKERS for p, r in c.hollow.items()}


def property_rules() -> dict[str, tuple[str, ...]]:
    """Each property and the counts it is made of, from every checker with rules."""
    rules: dict[str, tuple[str, ...]] = {}
    for checker in CHECKERS:
        for name, counts in checker.rules.items():
            rules[name] = tuple(dict.fromkeys(rules.get(name, ()) + tuple(counts)))
    return rules


def property_rule(name: str) -> tuple[str, ...]:
    """The counts that decide a property."""
    return property_rules().get(name, ())
