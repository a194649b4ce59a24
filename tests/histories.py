"""Small conformant histories for tests: a builder that keeps the contract
(every completion pairs with its process's open invoke, info retires the
process) while the caller decides what happens."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol


class Builder:
    def __init__(self) -> None:
        self.ops: list[dict[str, Any]] = []
        self.open: dict[int, dict[str, Any]] = {}

    def _add(self, **op: Any) -> dict[str, Any]:
        op = {"index": len(self.ops), "time": 1000 * len(self.ops), **op}
        self.ops.append(op)
        return op

    def invoke(self, process: int, f: str, value: Any) -> dict:
        assert process not in self.open, f"process {process} already has an open op"
        op = self._add(process=process, type="invoke", f=f, value=value)
        self.open[process] = op
        return op

    def complete(self, process: int, type: str, value: Any = None, **extra: Any) -> dict:
        inv = self.open.pop(process)
        if value is None and inv["f"] == "send":
            value = inv["value"]  # fail/info of a send repeats its msgs
        return self._add(process=process, type=type, f=inv["f"], value=value, **extra)

    # Shorthands for the queue workload's ops.
    def send(self, process: int, ids: list[int], type: str = "ok", queue: str = "q") -> None:
        msgs = [{"id": i, "queue": queue} for i in ids]
        self.invoke(process, "send", {"msgs": msgs})
        self.complete(process, type, {"msgs": msgs})

    def receive(self, process: int, ids: list[int], f: str = "receive", queue: str = "q") -> None:
        self.invoke(process, f, {"queue": queue})
        self.complete(process, "ok", {"msgs": [{"id": i, "queue": queue} for i in ids]})

    def effects(self, counts: dict[int, int], process: int = 99) -> None:
        self._add(
            process=process,
            type="ok",
            f="effects",
            value={"effects": [{"id": i, "count": n} for i, n in counts.items()]},
        )

    def nemesis(self, f: str, value: Any = None) -> None:
        self._add(process="nemesis", type="info", f=f, value=value)

    def write(self, path: Path, sidecar: bool = False) -> Path:
        path.write_text("".join(json.dumps(op) + "\n" for op in self.ops))
        if sidecar:
            from harness.history.sidecar import SidecarWriter

            w = SidecarWriter(path)
            for op in self.ops:
                w.add(op)
            w.close(path.stat().st_size)
        return path


# Random histories ------------------------------------------------------------
#
# One generator for the agreement test (hypothesis draws the choices, and
# shrinks them) and for tests/fuzz.py (a seeded random.Random draws them):
# `random_history(choices)` asks `choices` for every decision.


class Choices(Protocol):
    def int(self, lo: int, hi: int) -> int: ...  # lo..hi inclusive
    def pick(self, seq: Sequence[Any]) -> Any: ...
    def chance(self, percent: int) -> bool: ...  # shrinks towards False


class RandomChoices:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.rng.randrange(len(seq))]

    def chance(self, percent: int) -> bool:
        return self.rng.randrange(100) < percent


QUEUES = ("t1", "t2")
OUTCOMES = ("ok", "ok", "ok", "fail", "info")
ACTIONS = (
    "send",
    "send",
    "retry",
    "receive",
    "receive",
    "drain",
    "txn",
    "txn",
    "effects",
    "nemesis",
    "other",
)
# A profile that sends and polls a lot: poll and send sequences.
SEQ_HEAVY = ("send",) * 3 + ("receive",) * 4
NEVER_SENT = 900_000  # ids from here on are read but never sent
FINAL_PROCESS = 1_000_000

# Planted faults of the simulated Kafka broker, in percent per chance.
PLANT = {
    "gap": 10,  # an offset left unused (a txn marker): no anomaly
    "rewind": 8,  # the partition's end goes back: offsets reused, sends go backwards
    "lost": 5,  # acknowledged, never visible to a reader
    "double": 4,  # one send appended twice: one id at two offsets
    "fail-lie": 8,  # a failed send appended anyway: an aborted read if read
    "skip": 6,  # a poll starts past its position: a skipped offset
    "back": 6,  # a poll starts before its position: offsets going backwards
    "stray": 3,  # a read of an id never sent, at some offset
    "uncommitted": 8,  # a poll sees pending and aborted txn writes
    "no-rollback": 20,  # an aborted or unknown txn's polls still move the position
    "drain-miss": 5,  # the final drain misses one message
    "half-position": 2,  # a message with a partition but no offset, or the reverse
    "shuffle": 5,  # a poll hands its records over out of offset order
}

_STRINGS = ("", "n1", "ü→✓", 'quote" and \\ back', "line\nbreak", '{"msgs": []}')

# Hostile mode (`random_history(..., hostile=True)`): every name a string
# field may carry is one a printer could misread (rich markup, LaTeX for a
# plot's labels, HTML, control bytes, the empty string, a very long one), and
# nemesis ops of every shape "value may have any shape" allows. The contract
# says nothing of names: each must come out as it went in.
HOSTILE_NAMES = (
    "[/bold]q",
    "[red]",
    "[bold red]x[/]",
    "$\\undefinedmacro{x}$",
    "$x_{",
    "ü→✓ 日本語",
    "",
    "q" * 5000,
    "<script>alert(1)</script>",
    "'\"&amp;<b>",
    "%s %(x)s {0} {}",
    "line\nbreak\ttab",
    "\x1b[31mansi\x1b[0m",
    "back\\slash\\",
    "0.q",
    "t1",
)
HOSTILE_FAULT_FS = (
    "start-$\\undefinedmacro{x}$",
    "stop-$\\undefinedmacro{x}$",
    "start-kill",
    "stop-kill",
    "start-kill",
    "start-partition",
    "stop-partition",
    "start-[/bold]",
    "stop-[red]",
    "start-",
    "stop-",
    "start-start-",
    "start-file-corruption",
    "stop-file-corruption",
    "start-disk-full",
    "stop-disk-full",
    "start-fence",
    "start-membership",
    "start-upgrade",
    "stop-upgrade",
    "start-" + "k" * 300,
    "pause",
    "",
    "[/]",
)
HOSTILE_FAULT_VALUES: tuple[Any, ...] = (
    None,
    0,
    -1,
    1.5,
    10**12,
    True,
    "",
    "[/bold]",
    "$\\undefinedmacro{x}$",
    [],
    [None],
    [1, None, "n1"],
    {},
    {"nodes": [1, 2]},
    {"nodes": None},
    {"nodes": "n1"},
    {"nodes": [None, "[/bold]"]},
    {"crashed": [1, None]},
    {"crashed": None},
    {"node": None, "target": "[red]", "fallback": None},
    {"recovered-after": None, "not-recovered-after": "soon"},
    {"recovered-after": 1.5, "nodes": ["n1"]},
    {"a": {"b": {"c": [None, {"d": []}]}}},
    {"changes": [{"change": "bitflip", "flips": [{"offset": 1, "bit": None}]}, None]},
    {"changes": None, "skipped": "$\\undefinedmacro{x}$"},
    {"changes": "none"},
    {"hit": None, "did": {"n1": None}, "space": "[/]"},
    {"did": [1, 2], "seconds": {}},
    {"fenced": "unknown", "transactional-id": None, "producer-id": [1]},
    {"member": {"x": 1}, "before": None, "after": [None]},
    {"started-again": None, "version": 3},
    {"grudge": {"n1": None, "[/x]": ["n2"]}},
)
HOSTILE_OTHER_FS = (
    "[/bold]",
    "$\\undefinedmacro{x}$",
    "",
    "start-kill",
    "stop-kill",
    "ü",
    "x" * 300,
)
_KEYS = ("nodes", "msgs", "value", "queue", "mops", "effects", "x", "partitions", "offset")


def json_value(ch: Choices, depth: int = 0) -> Any:
    """Any JSON: scalars, lists, objects, and objects shaped like the
    contract's values (which an op that is no message op must not be read as)."""
    kinds = ("null", "bool", "int", "str") + (("list", "obj", "contract") if depth < 2 else ())
    kind = ch.pick(kinds)
    if kind == "null":
        return None
    if kind == "bool":
        return ch.chance(50)
    if kind == "int":
        return ch.pick((0, 1, -3, 42, 1.5, 10**12))
    if kind == "str":
        return ch.pick(_STRINGS)
    if kind == "list":
        return [json_value(ch, depth + 1) for _ in range(ch.int(0, 3))]
    if kind == "obj":
        return {ch.pick(_KEYS): json_value(ch, depth + 1) for _ in range(ch.int(0, 3))}
    return ch.pick(
        (
            {"msgs": [{"id": 7, "queue": "t1", "partition": 0, "offset": 3}]},
            {"msgs": [{"id": 8, "queue": "t2"}]},
            {"mops": [{"f": "send", "msgs": [{"id": 9, "partition": 1, "offset": 0}]}]},
            {"effects": [{"id": 1, "count": 3}]},
            {"queue": 5, "partitions": "all"},
            {"nodes": ["n1", "n2"], "grudge": {"n1": ["n2"]}},
        )
    )


class _Sim:
    """A client pool against a simulated broker: queue-shaped (no positions,
    reads return any ids) or Kafka-shaped (partitions and offsets from a
    simulated log, with PLANT faults)."""

    def __init__(self, ch: Choices, kafka: bool, hostile: bool = False) -> None:
        self.ch, self.kafka, self.hostile = ch, kafka, hostile
        self.names = HOSTILE_NAMES if hostile else ()  # more node and error names
        self.b = Builder()
        n = ch.int(2, 4)
        self.procs = list(range(n))
        self.next_proc = n
        # Kafka: how many topics and partitions, and what the clients mostly do.
        self.queues = QUEUES[: ch.pick((1, 1, 2))] if kafka else ("q",)
        self.partitions = ch.pick((1, 2, 2))
        self.actions = ACTIONS + ch.pick(((), ("txn",) * 4 + ("receive",) * 2, SEQ_HEAVY))
        # How often a client repeats its last action: runs of polls or sends.
        self.repeat = ch.pick((0, 50, 70))
        self.last: dict[int, str] = {}
        self.next_id = 1
        self.ids: list[int] = []
        self.retryable: list[int] = []  # ids whose send failed or is unknown
        if hostile:
            self.queues = tuple(ch.pick(HOSTILE_NAMES) for _ in range(ch.int(1, 3)))
            self.actions += ("nemesis", "nemesis", "other")
        self.with_queue = not ch.chance(10)  # sometimes no queue field (the queue "")
        if not self.with_queue:
            self.queues = self.queues[:1]
        # Kafka: (queue, partition) -> entries {off, id, state}; state is
        # committed, pending (an open txn's write), aborted or lost.
        self.log: dict[tuple, list[dict]] = {}
        self.end: dict[tuple, int] = {}
        self.pos: dict[tuple, int] = {}  # (process, queue, partition) -> next offset
        self.group: dict[tuple, int] = {}  # (queue, partition) -> committed position
        self.txns: dict[int, dict] = {}  # open txns: process -> {todo, placed}

    # -- messages ------------------------------------------------------------

    def msg(self, i: int, queue: str, part: int | None = None, off: int | None = None) -> dict:
        m: dict[str, Any] = {"id": i}
        if self.with_queue and not (self.hostile and self.ch.chance(5)):
            m["queue"] = queue
        if self.hostile and self.ch.chance(10):
            m["key"] = self.ch.pick(HOSTILE_NAMES)
        if part is not None and off is not None and self.ch.chance(PLANT["half-position"]):
            part, off = self.ch.pick(((None, off), (part, None), (part, None)))
        if part is not None:
            m["partition"] = part
        if off is not None:
            m["offset"] = off
        return m

    def new_ids(self, n: int) -> list[int]:
        batch = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        self.ids.extend(batch)
        return batch

    def any_ids(self) -> list[int]:
        pool = self.ids + [NEVER_SENT + self.ch.int(0, 3)]
        return [self.ch.pick(pool) for _ in range(self.ch.int(0, 4))]

    def queue(self) -> str:
        return self.ch.pick(self.queues)

    def read_queue(self, inv: dict | None = None) -> str:
        """The queue a queue-shaped read names: "q" (the one queue), or in
        hostile mode the queue its invoke named, or any."""
        if not self.hostile:
            return "q"
        return ((inv or {}).get("value") or {}).get("queue") or self.queue()

    def partition(self) -> int:
        return self.ch.int(0, self.partitions - 1)

    # -- the simulated log ---------------------------------------------------

    def append(self, qp: tuple, i: int, state: str) -> dict:
        ch, end = self.ch, self.end.get(qp, 0)
        if ch.chance(PLANT["gap"]):
            end += 1
        if end and ch.chance(PLANT["rewind"]):
            end = max(0, end - ch.int(1, 3))
        if state == "committed" and ch.chance(PLANT["lost"]):
            state = "lost"
        entry = {"off": end, "id": i, "state": state}
        self.log.setdefault(qp, []).append(entry)
        self.end[qp] = end + 1
        return entry

    def poll(self, p: int, uncommitted: bool, advance: bool, queue: str) -> list[dict]:
        ch = self.ch
        seen = ("committed", "pending", "aborted") if uncommitted else ("committed",)
        out, moved = [], {}
        parts = ((0,),) if self.partitions == 1 else ((0,), (1,), (0, 1), (1, 0))
        for part in ch.pick(parts):
            qp = (queue, part)
            start = self.pos.get((p, *qp), self.group.get(qp, 0))
            if ch.chance(PLANT["skip"]):
                start += ch.int(1, 2)
                moved[(p, *qp)] = start  # the consumer jumped, read or not
            if ch.chance(PLANT["back"]):
                start = max(0, start - ch.int(1, 3))
            visible = sorted(
                (e for e in self.log.get(qp, []) if e["off"] >= start and e["state"] in seen),
                key=lambda e: e["off"],
            )
            got = visible[: ch.int(0, 4) or 1]
            if len(got) > 1 and ch.chance(PLANT["shuffle"]):
                k = ch.int(1, len(got) - 1)
                got = got[k:] + got[:k]  # rotated: its first record is not its lowest
            out += [self.msg(e["id"], queue, part, e["off"]) for e in got]
            if got:
                moved[(p, *qp)] = got[-1]["off"] + 1
        if ch.chance(PLANT["stray"]):
            part = self.partition()
            off = ch.int(0, self.end.get((queue, part), 0))
            out.append(self.msg(NEVER_SENT + ch.int(0, 3), queue, part, off))
        if advance:
            for key, nxt in moved.items():
                self.pos[key] = nxt
                self.group[key[1:]] = max(self.group.get(key[1:], 0), nxt)
        return out

    def drain(self) -> list[dict]:
        out = [
            self.msg(e["id"], qp[0], qp[1], e["off"])
            for qp in sorted(self.log)
            for e in sorted(self.log[qp], key=lambda e: e["off"])
            if e["state"] == "committed"
        ]
        if out and self.ch.chance(PLANT["drain-miss"]):
            del out[self.ch.int(0, len(out) - 1)]
        return out

    # -- ops -----------------------------------------------------------------

    def retire(self, p: int) -> None:
        """Jepsen: after info (or a crash) the client goes on under a new number."""
        if p in self.procs:
            self.procs[self.procs.index(p)] = self.next_proc
            self.next_proc += 1

    def extra(self, typ: str) -> dict:
        ch, out = self.ch, {}
        if ch.chance(30):
            out["node"] = ch.pick(("n1", "n2", "n3", None) + self.names)
        if typ in ("fail", "info") and ch.chance(50):
            out["error"] = ch.pick(("timeout", "NOT_LEADER", None, "ü") + self.names)
        return out

    def step(self) -> None:
        ch, b = self.ch, self.b
        p = self.procs[ch.int(0, len(self.procs) - 1)]
        if p in b.open:
            if ch.chance(3):
                return self.other(p, "crash")
            if self.kafka and self.txns.get(p, {}).get("todo") and ch.chance(50):
                return self.produce(p)
            return self.complete(p)
        action = self.last.get(p) if ch.chance(self.repeat) else None
        action = action or ch.pick(self.actions)
        self.last[p] = action
        if action in ("send", "retry"):
            if action == "retry" and (self.retryable or self.ids):
                batch = [ch.pick(self.retryable or self.ids)]
            else:
                batch = self.new_ids(ch.int(1, 3))
            q = self.queue()
            b.invoke(p, "send", {"msgs": [self.msg(i, q) for i in batch]})
        elif action in ("receive", "drain"):
            b.invoke(p, action, ch.pick(({"queue": self.queue()}, None)))
        elif action == "txn":
            self.invoke_txn(p)
        elif action == "effects":
            b.effects({i: ch.int(0, 2) for i in self.any_ids()}, process=ch.pick((99, p)))
        elif action == "nemesis":
            self.nemesis()
        else:
            fs = ("assign", "revoke", "subscribe", "crash", "log")
            self.other(p, ch.pick(fs + (HOSTILE_OTHER_FS if self.hostile else ())))

    def nemesis(self) -> None:
        if self.hostile:
            f = self.ch.pick(HOSTILE_FAULT_FS)
            if self.ch.chance(70):
                value = self.ch.pick(HOSTILE_FAULT_VALUES)
            else:
                value = json_value(self.ch)
            self.b._add(process="nemesis", type="info", f=f, value=value, **self.extra("info"))
            return
        f = self.ch.pick(("start-kill", "stop-kill", "start-partition", "stop-partition", "pause"))
        if self.ch.chance(10):
            self.b._add(process="nemesis", type="info", f=f)  # no value at all
        else:
            self.b.nemesis(f, json_value(self.ch))

    def other(self, p: int, f: str) -> None:
        """Ops no checker pairs: assign/revoke/subscribe (a Kafka consumer's
        partitions changed), crash (retires the process), anything else."""
        ch = self.ch
        if f == "crash":
            typ, value = "info", {"point": ch.pick(("after-effect", "before-ack"))}
        elif f == "log" or f in HOSTILE_OTHER_FS:
            typ, value = ch.pick(("invoke", "ok", "fail", "info")), json_value(ch)
            if self.hostile and ch.chance(30):
                value = ch.pick(HOSTILE_FAULT_VALUES)
        else:
            typ = ch.pick(("ok", "ok", "info", "invoke", "fail"))
            value = {"queue": self.queue(), "partitions": [0, 1]}
            if ch.chance(30):
                value = json_value(ch)
        self.b._add(process=p, type=typ, f=f, value=value, **self.extra(typ))
        if f == "crash":
            self.retire(p)

    def invoke_txn(self, p: int) -> None:
        ch = self.ch
        mops: list[dict] = []
        todo = []
        for _ in range(ch.int(0, 2)):
            q = self.queue()
            batch = self.new_ids(ch.int(1, 2))
            mops.append({"f": "send", "msgs": [self.msg(i, q) for i in batch]})
            todo += [(i, q) for i in batch]
        for _ in range(ch.int(0, 2)):
            mop = ch.pick(({"f": "receive"}, {"f": "receive", "msgs": []}))
            mops.insert(ch.int(0, len(mops)), dict(mop))
        self.txns[p] = {"todo": todo, "placed": {}}
        self.b.invoke(p, "txn", {"mops": mops})

    def produce(self, p: int) -> None:
        """An open txn writes one of its messages now: concurrent txns
        interleave in the partitions they share."""
        t = self.txns[p]
        i, q = t["todo"].pop(self.ch.int(0, len(t["todo"]) - 1))
        qp = (q, self.partition())
        t["placed"][i] = (qp, self.append(qp, i, "pending"))

    def complete(self, p: int) -> None:
        ch, b = self.ch, self.b
        inv = b.open[p]
        f, typ = inv["f"], ch.pick(OUTCOMES)
        if f == "send":
            value = self.send_value(inv, typ)
        elif f == "txn":
            value = self.txn_value(p, inv, typ)
        elif typ != "ok":
            value = None
            if self.kafka and ch.chance(10):  # msgs of a failed read: they never count
                value = {"msgs": self.poll(p, False, False, self.queue())}
        elif not self.kafka:
            q = self.read_queue(inv)
            value = {"msgs": [self.msg(i, q) for i in self.any_ids()]}
        elif f == "receive":
            q = (inv["value"] or {}).get("queue") or self.queue()
            value = {"msgs": self.poll(p, ch.chance(PLANT["uncommitted"]), True, q)}
        else:
            value = {"msgs": self.drain()}
        b.complete(p, typ, value, **self.extra(typ))
        if f == "send" and typ != "ok":
            self.retryable.extend(m["id"] for m in inv["value"]["msgs"])
        if typ == "info":
            self.retire(p)

    def send_value(self, inv: dict, typ: str) -> dict:
        ch = self.ch
        msgs = inv["value"]["msgs"]
        if not self.kafka:
            return {"msgs": [dict(m) for m in msgs]}
        part = self.partition()
        out = []
        for m in msgs:
            qp = (m.get("queue", self.queues[0]), part)
            placed = None
            if typ == "ok":
                placed = self.append(qp, m["id"], "committed")
                if ch.chance(PLANT["double"]):
                    self.append(qp, m["id"], "committed")
            elif typ == "fail" and ch.chance(PLANT["fail-lie"]):
                placed = self.append(qp, m["id"], "committed")
            elif typ == "info" and ch.chance(50):
                placed = self.append(qp, m["id"], "committed")
            if placed and (typ == "ok" or ch.chance(50)):
                out.append(self.msg(m["id"], qp[0], part, placed["off"]))
            elif typ == "fail" and ch.chance(30):  # a position that places nothing
                out.append(self.msg(m["id"], qp[0], part, self.end.get(qp, 0)))
            else:
                out.append(dict(m))
        return {"msgs": out}

    def txn_value(self, p: int, inv: dict, typ: str) -> dict:
        ch = self.ch
        t = self.txns.pop(p, {"todo": [], "placed": {}})
        mops = []
        # Reads happen inside the txn, before it commits or aborts.
        for mop in inv["value"]["mops"]:
            if mop["f"] == "receive":
                if self.kafka:
                    advance = typ == "ok" or ch.chance(PLANT["no-rollback"])
                    uncommitted = ch.chance(PLANT["uncommitted"])
                    msgs = self.poll(p, uncommitted, advance, self.queue())
                else:
                    q = self.read_queue()
                    msgs = [self.msg(i, q) for i in self.any_ids()] if typ == "ok" else []
                mops.append({"f": "receive", "msgs": msgs})
            else:
                mops.append(mop)
        if self.kafka:
            while t["todo"] and (typ == "ok" or ch.chance(50)):
                self.txns[p] = t
                self.produce(p)
            self.txns.pop(p, None)
            commit = typ == "ok" or (typ == "info" and ch.chance(50))
            for _qp, e in t["placed"].values():
                if e["state"] == "pending":
                    e["state"] = "committed" if commit else "aborted"
            for mop in mops:
                if mop["f"] == "send":
                    mop["msgs"] = [self.placed_msg(m, t, typ) for m in mop["msgs"]]
        return {"mops": mops}

    def placed_msg(self, m: dict, t: dict, typ: str) -> dict:
        if m["id"] not in t["placed"] or (typ != "ok" and self.ch.chance(50)):
            return dict(m)
        (q, part), e = t["placed"][m["id"]]
        return self.msg(m["id"], q, part, e["off"])

    def final(self) -> None:
        """The final phase: drains by fresh processes, then a sink read."""
        ch, b = self.ch, self.b
        for k in range(ch.int(0, 2)):
            p = FINAL_PROCESS + k
            q = self.queue()
            b.invoke(p, "drain", {"queue": q})
            if ch.chance(95):
                typ = ch.pick(("ok", "ok", "ok", "fail", "info"))
                q = q if self.hostile else "q"
                msgs = self.drain() if self.kafka else [self.msg(i, q) for i in self.any_ids()]
                b.complete(p, typ, {"msgs": msgs} if typ == "ok" else None)
        if ch.chance(50):
            counts = {i: ch.pick((1, 1, 1, 0, 2)) for i in self.ids if ch.chance(90)}
            b.effects(counts, process=FINAL_PROCESS + 10)


def random_history(ch: Choices, shape: str | None = None, hostile: bool = False) -> Builder:
    """A random, conformant history: queue-shaped or Kafka-shaped (`shape`
    "queue" or "kafka"; drawn when None). `hostile`: queue, key, node and
    error names from HOSTILE_NAMES (queue-shaped ones several queues too),
    some messages without their queue, nemesis ops of HOSTILE_FAULT_FS
    with values of every shape, and ops of unknown `f`s named to confuse;
    without it the choices asked are the same as ever (tests/fuzz.py's
    seeds keep their histories)."""
    kafka = (shape or ch.pick(("queue", "kafka", "kafka"))) == "kafka"
    sim = _Sim(ch, kafka, hostile)
    for _ in range(ch.int(1, 80 if kafka else 40)):
        sim.step()
    if ch.chance(60):
        sim.final()
    return sim.b


def assert_same_facts(made: dict, kept: dict) -> None:
    """A converted sidecar's manifest (or a converter's facts) holds what
    the harness writer's manifest `kept` holds for the same history."""
    for key in ("ops", "effects_ops", "drains_invoked", "drains_ok", "offset_ops", "ok_txns"):
        assert made[key] == kept[key], key
    assert made["open_invokes"] == kept["open_invokes"]
    assert sorted(map(tuple, made["tally"])) == sorted(map(tuple, kept["tally"]))
