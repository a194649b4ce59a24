"""A tiny reference implementation of the spec's counts and properties.

Written to be obviously correct, not fast: sets and counters straight from
the definitions of the history contract (harness/history/README.md). The Spark checker and the
in-memory baseline must agree with it exactly.
"""

from collections import Counter


def _ids(msgs):
    return [m["id"] for m in msgs or []]


def reference(ops):
    attempted, ok, fail, info = set(), set(), set(), set()
    outcome = {"ok": ok, "fail": fail, "info": info}
    deliveries, effects = Counter(), Counter()
    seen = set()
    open_invokes = {}
    effects_ops = drains_invoked = drains_ok = 0

    def sent(t, ids):
        (attempted if t == "invoke" else outcome[t]).update(ids)

    for op in ops:
        if op["process"] == "nemesis":
            continue
        f, t, v = op["f"], op["type"], op.get("value") or {}
        if f in ("send", "receive", "drain", "txn"):
            if t == "invoke":
                open_invokes[op["process"]] = op
            else:
                open_invokes.pop(op["process"], None)
        if f == "send":
            sent(t, _ids(v["msgs"]))
        elif f == "txn":
            for mop in v["mops"]:
                if mop["f"] == "send":
                    sent(t, _ids(mop.get("msgs")))
                elif t == "ok":
                    deliveries.update(_ids(mop.get("msgs")))
                    seen.update(_ids(mop.get("msgs")))
        elif f == "receive" and t == "ok":
            deliveries.update(_ids(v["msgs"]))
            seen.update(_ids(v["msgs"]))
        elif f == "drain":
            drains_invoked += t == "invoke"
            if t == "ok":
                drains_ok += 1
                seen.update(_ids(v["msgs"]))
        elif f == "effects" and t == "ok":
            effects_ops += 1
            for e in v["effects"]:
                effects[e["id"]] += e["count"]

    # A test that ends with an invocation still open treats it as info.
    for op in open_invokes.values():
        if op["f"] == "send":
            info.update(_ids(op["value"]["msgs"]))
        elif op["f"] == "txn":
            for mop in op["value"]["mops"]:
                if mop["f"] == "send":
                    info.update(_ids(mop.get("msgs")))

    acknowledged = ok
    indeterminate = info - ok
    failed = fail - ok - info
    has_effects = effects_ops > 0
    with_effect = {i for i, n in effects.items() if n > 0}
    counts = {
        "attempted": len(attempted),
        "acknowledged": len(acknowledged),
        "failed": len(failed),
        "indeterminate": len(indeterminate),
        "delivered": len(deliveries),
        "lost": len(acknowledged - seen),
        "duplicated": sum(1 for n in deliveries.values() if n > 1),
        "unexpected": len(seen - attempted),
        "recovered": len(indeterminate & seen),
        "aborted-read": len(failed & seen),
        "effect-lost": len(acknowledged - with_effect) if has_effects else 0,
        "effect-duplicated": sum(1 for n in effects.values() if n > 1),
        "effect-unexpected": len(with_effect - attempted),
        "effect-aborted": len(with_effect & failed),
    }
    c = counts
    final_read = drains_ok > 0 and drains_ok == drains_invoked
    at_least_once = not (c["lost"] or c["unexpected"] or c["aborted-read"])
    if not at_least_once and not (c["unexpected"] or c["aborted-read"]) and not final_read:
        at_least_once = "unknown"
    effect_ok = not (
        c["effect-lost"] or c["effect-duplicated"] or c["effect-unexpected"] or c["effect-aborted"]
    )
    valid = {
        "at-most-once": not (c["duplicated"] or c["unexpected"] or c["aborted-read"]),
        "at-least-once": at_least_once,
        "exactly-once-effect": effect_ok if has_effects else "unknown",
    }
    return counts, valid
