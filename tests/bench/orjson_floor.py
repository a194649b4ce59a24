"""The floor a user compares a checker with: one pass over the JSONL with
orjson in one process, computing the delivery counts alone (no contract
check, no offsets, no examples). What the checker does on top of this, it
must not do at many times this cost."""

from __future__ import annotations

from pathlib import Path

import orjson

OK, INFO, FAIL = 3, 2, 1  # a sent id's strongest outcome: ok > unknown > failed


def delivery_counts(path: Path) -> dict[str, int]:
    sent: dict[int, int] = {}
    delivered: dict[int, int] = {}
    drained: set[int] = set()
    effects: dict[int, int] = {}
    strength = {"ok": OK, "info": INFO, "fail": FAIL, "invoke": INFO}
    with open(path, "rb") as fh:
        for line in fh:
            if not line.strip():
                continue
            op = orjson.loads(line)
            f, typ, v = op["f"], op["type"], op.get("value") or {}
            if op["process"] == "nemesis":
                continue
            if f == "send" or f == "txn":
                msgs = v.get("msgs") or [
                    m for mop in v.get("mops") or () if mop.get("f") == "send" for m in mop["msgs"]
                ]
                s = strength[typ]
                for m in msgs:
                    if sent.get(m["id"], 0) < s:
                        sent[m["id"]] = s
                if f == "txn" and typ == "ok":
                    for mop in v.get("mops") or ():
                        if mop.get("f") == "receive":
                            for m in mop.get("msgs") or ():
                                delivered[m["id"]] = delivered.get(m["id"], 0) + 1
            elif f == "receive" and typ == "ok":
                for m in v["msgs"]:
                    delivered[m["id"]] = delivered.get(m["id"], 0) + 1
            elif f == "drain" and typ == "ok":
                drained.update(m["id"] for m in v["msgs"])
            elif f == "effects" and typ == "ok":
                for e in v["effects"]:
                    effects[e["id"]] = effects.get(e["id"], 0) + e["count"]
    acked = {i for i, s in sent.items() if s == OK}
    seen = delivered.keys() | drained
    return {
        "attempted": len(sent),
        "acknowledged": len(acked),
        "delivered": len(delivered),
        "lost": len(acked - seen),
        "duplicated": sum(1 for n in delivered.values() if n > 1),
        "unexpected": len(seen - sent.keys()),
    }
