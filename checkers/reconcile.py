"""One judgement per record across checkers, after they have all run.

Each checker judges what it can see; where two see the same records from
different sides, the better-informed one decides, here and only here:

- a share group (KIP-932) archives a record at its delivery limit, and a
  record acquired by a read nobody saw is archived unseen: loss in a share
  run is share-at-least-once's to judge, so at-least-once (delivery's
  `lost`, the offsets' `lost-write`) is not decided there;
- an acknowledged id that no read returned, yet every replica read after
  the run still holds (the brokers checker's `unread`), was missed by the
  final read, not lost by the brokers: while every `lost` id is such a one,
  at-least-once is unknown, never violated. `unread` ids are never read
  and acknowledged, so each is `lost` too: the same count means the same
  ids (a lost id read on another queue, or held nowhere whole, keeps the
  counts apart).
"""

from __future__ import annotations

from typing import Any

from .base import UNKNOWN, CheckResult, Property
from .share import applies as is_share_run

PROPERTY = "at-least-once"


def reconcile(result: CheckResult, test: dict[str, Any]) -> CheckResult:
    prop = result.properties.get(PROPERTY)
    if prop is None or prop.valid is not False:
        return result
    counts = result.counts
    if is_share_run(test):
        why = (
            f"not judged in a share run ({prop.reason}): a share group archives records at "
            "their delivery limit, some acquired unseen; share-at-least-once judges loss here"
        )
        result.properties[PROPERTY] = Property(UNKNOWN, why)
        return result
    lost, unread = counts.get("lost", 0), counts.get("unread", 0)
    if lost and unread == lost and not counts.get("lost-write"):
        why = (
            f"lost={lost} by the history, but every replica read after the run still holds "
            f"all {lost}: the final read did not reach them (unread), nothing proves a loss"
        )
        result.properties[PROPERTY] = Property(UNKNOWN, why)
    return result
