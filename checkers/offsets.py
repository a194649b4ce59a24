"""Offset-based checks of Kafka-like histories, named as Jepsen's Kafka
checker (jepsen/tests/kafka.clj) names them where the meaning is the same.

Only message occurrences with both `partition` and `offset` take part in the
offset checks. A history with no offset and no txn (RabbitMQ) is not
scanned at all: the loader's fact pass already says so, and this checker
then reports zero counts (G1a aside: not evaluated, it is aborted-read) and
its two properties.

Every occurrence becomes one narrow row (id, queue, partition, offset, role,
process, history index, place in the op); one job then computes every
anomaly in three shuffles of those rows, each split evenly across tasks: by
id (G1a, duplicate, lost-write, and how far reads reached in each
partition), by offset (inconsistent-offsets, and the known offsets), and by
process (the sequences, ordered by a window per process). Its aggregations
keep only numbers, in hash maps; for the few cases shown, `describe` fetches
their rows and the driver words the examples. Only counts, at most five
examples per anomaly and the txn graph's edges reach the driver: networkx
searches that graph (one node per ok txn, about 1 kB each with its edges) on
the driver, which is why it is skipped above TXN_GRAPH_CAP ok txns
(read-committed is then "unknown").

The log of a partition ("version order" in Jepsen) is what ok sends (and
send mops of ok txns) acknowledged, plus what every read saw: ok receives and
drains, and receive mops of txns whichever way they ended (Kafka's pollers
must return committed data even in a txn that then aborts). Sends that failed
or ended info do not place a message.

    lost-write        an id acknowledged at (q, p, o), never read by any ok
                      read, while an ok read in (q, p) saw an id whose first
                      offset there is >= the id's last offset there
    inconsistent-offsets  a (q, p, o) holding two or more ids
    duplicate         an id at two or more (q, p, o) places (ids are unique
                      per test, so in practice: of one queue)
    poll-skip         per process, queue and partition: a read whose first
                      offset lies past known offsets after the last offset
                      of that process's previous ok read there
    nonmonotonic-poll the same pair, the read starting at or before where the
                      previous ok read ended
    nonmonotonic-send per process and partition: an ok send whose first
                      offset is at or before the last offset of that
                      process's previous ok send there
    G1a               an id whose send certainly failed (delivery's
                      `failed`) read by an ok receive, drain or ok txn
    G0, G1c           cycles among ok txns of ww edges only (G0), or of ww
                      and wr edges with at least one wr (G1c); one cycle is
                      reported per strongly connected component. ww: every
                      txn whose send was acknowledged at offset o precedes
                      every txn of the next txn-written offset of the
                      partition (txns acknowledged at one offset, an
                      inconsistent-offsets, are not ordered between
                      themselves); wr: writer precedes reader (ok txns only).
                      Note: Kafka txns writing one partition concurrently
                      interleave offsets, which is a ww cycle; Jepsen infers
                      ww edges only on request and always allows G0.

Poll and send sequences restart after an ok/info `assign`, `subscribe`,
`revoke` or `crash` op of the process (Jepsen keeps the partitions still
assigned; the value of those ops is not in our contract, so all are
forgotten); a process that crashed continues under a new number anyway.
Polls are ok receives and txn receive mops (a txn that failed or ended info
can be the later op of a pair, never the earlier); drains are no polls.
"""

from __future__ import annotations

import json
from functools import reduce
from typing import Any

import networkx as nx
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from harness.history.roles import (
    ACK,
    ATTEMPT,
    DELIVER,
    FAIL,
    INFO,
    OPEN_ATTEMPT,
    RESET,
    RESET_FS,
    UNCOMMITTED_READ,
)
from harness.history.roles import DRAIN_READ as DRAIN

from .base import UNKNOWN, CheckResult, Property
from .columns import message_role
from .exercise import (
    TXN_ABORTED_OR_UNKNOWN,
    HollowRule,
    fault_seen,
    info_above_zero,
    no_fault,
)
from .load import LoadedHistory
from .spark import by_id, local_rows

EXAMPLES = 5
# The txn graph lives on the driver: about 1 kB per txn with its edges in
# networkx, so 200k txns stay well inside the 4 GB driver.
TXN_GRAPH_CAP = 200_000
# Roles that place a message in its partition's log: UNCOMMITTED_READ, a
# receive mop of a txn that failed or ended info, is no read of committed
# data but does; RESET (an ok/info assign, subscribe, revoke or crash op of a
# process) restarts its poll and send sequences.
LOG_ROLES = (ACK, DELIVER, DRAIN, UNCOMMITTED_READ)

ANOMALIES = (
    "lost-write",
    "inconsistent-offsets",
    "duplicate",
    "poll-skip",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "G1a",
    "G0",
    "G1c",
)

PROPERTY_RULES = {
    "at-most-once": ("G1a",),
    "at-least-once": ("lost-write",),
    # In order and once: an id at two offsets breaks what an idempotent (or
    # deduplicating) producer promises, a write kept once across its retries.
    "per-partition-order": (
        "duplicate",
        "nonmonotonic-send",
        "nonmonotonic-poll",
        "inconsistent-offsets",
        "poll-skip",
    ),
    # Not G0: Kafka promises no order between concurrent transactions, whose
    # writes to shared partitions interleave into write cycles (Jepsen allows
    # G0 too). G0 is still counted and shown, it just decides nothing.
    "read-committed": ("G1a", "G1c"),
}

WHAT = {
    "lost-write": "acknowledged at an offset below one a read reached, never read",
    "inconsistent-offsets": "two ids at one offset",
    "duplicate": "one id at two offsets",
    "poll-skip": "a process's next read skipped offsets known to exist",
    "nonmonotonic-poll": "a process's next read went back to or before where it was",
    "nonmonotonic-send": "a process's next send landed at or before its previous one",
    "G1a": "send failed, yet the message was read (aborted read)",
    "G0": "write cycle among committed txns (ww edges only)",
    "G1c": "cycle among committed txns with at least one wr edge",
}

c = F.col


def _any(cond: Column) -> Column:
    return F.coalesce(F.bool_or(cond), F.lit(False))


def _positioned() -> Column:
    return c("partition").isNotNull() & c("offset").isNotNull()


def rows(history: LoadedHistory) -> DataFrame:
    """(index, proc, f, pos, id, queue, partition, offset, role) for every
    message of a completion (and of invokes that never completed)."""
    f, typ, mop = c("f"), c("type"), c("mop")
    msgs = history.message_rows(markers=RESET_FS)
    if "role" in msgs.columns:  # the sidecar's writer set it (harness/history/roles.py)
        role = c("role").cast("int")
    else:
        role = message_role(f, typ, mop)
    if history.facts.open_invokes:
        is_open = c("index").isin(history.facts.open_invokes)
        role = F.when((role == ATTEMPT) & is_open, OPEN_ATTEMPT).otherwise(role)
    return msgs.select(
        "index",
        "proc",
        "f",
        "pos",
        "id",
        # null queues group (and join) together as ""
        F.coalesce(c("queue"), F.lit("")).alias("queue"),
        "partition",
        "offset",
        role.alias("role"),
    ).filter(c("role").isNotNull() & (c("role") != ATTEMPT))


def _anomaly(df: DataFrame, name: str | Column, sort: Column, **fields: Column) -> DataFrame:
    """(name, sort, ex): one case of an anomaly, its example as JSON text
    (the driver adds "what")."""
    ex = F.struct(*(v.alias(k) for k, v in fields.items()))
    name_col = F.lit(name) if isinstance(name, str) else name
    return df.select(name_col.alias("name"), sort.alias("sort"), F.to_json(ex).alias("ex"))


def _held(df: DataFrame, held: list[DataFrame]) -> DataFrame:
    """`df` cached for the one job that reads it from several branches (a
    branch would compute it again), and listed to be dropped after it."""
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    held.append(df)
    return df


def _log(r: DataFrame) -> DataFrame:
    """The rows that place an id at an offset of a partition's log."""
    return r.filter(c("role").isin(*LOG_ROLES) & _positioned())


# The passes below aggregate only numbers and booleans, so Spark keeps their
# state in hash maps; a minimum of a struct (or a string) would make it sort
# every row first. The few cases an example is shown for are then described
# exactly by `describe`, from the rows of those cases alone.


def per_id(r: DataFrame, held: list[DataFrame]) -> DataFrame:
    """G1a, duplicate and lost-write, and how far reads reached in each
    partition: one shuffle by id. Each id's rows are grouped by its queue and
    partition first (an id is normally in one), then by the id (in place: the
    rows are already partitioned by id)."""
    role, index = c("role"), c("index")
    read = role.isin(DELIVER, DRAIN)
    log = role.isin(*LOG_ROLES) & _positioned()
    places = (
        r.filter(c("id").isNotNull())
        .repartition("id")
        .groupBy("id", "queue", "partition")
        .agg(
            _any(role == ACK).alias("acked"),
            _any(role.isin(INFO, OPEN_ATTEMPT)).alias("unknown"),
            _any(role == FAIL).alias("fails"),
            _any(read).alias("read"),
            _any(read & log).alias("read_here"),
            F.min(F.when(role == FAIL, index)).alias("fail_idx"),
            F.min(F.when(read, index)).alias("read_idx"),
            F.min(F.when(log, index)).alias("log_idx"),
            F.min(F.when(log & (role == ACK), index)).alias("ack_idx"),
            F.min(F.when(log, c("offset"))).alias("first_off"),
            F.max(F.when(log, c("offset"))).alias("last_off"),
        )
    )
    places = _held(places, held)  # read twice below: computed once
    # How far ok reads reached: the highest first offset of an id they saw.
    reached = (
        places.filter(c("read_here"))
        .groupBy("queue", "partition")
        .agg(F.max("first_off").alias("reached"))
    )
    lost_here = c("ack_idx").isNotNull() & (c("last_off") <= c("reached"))
    ids = (
        places.join(F.broadcast(reached), ["queue", "partition"], "left")
        .groupBy("id")
        .agg(
            _any(c("acked")).alias("acked"),
            _any(c("unknown")).alias("unknown"),
            _any(c("fails")).alias("fails"),
            _any(c("read")).alias("read"),
            F.min("fail_idx").alias("fail_idx"),
            F.min("read_idx").alias("read_idx"),
            F.min("log_idx").alias("log_idx"),
            F.count("first_off").alias("partitions"),
            _any(c("first_off") != c("last_off")).alias("moved"),
            F.min(F.when(lost_here, c("ack_idx"))).alias("lost_idx"),
        )
    )
    failed = ~c("acked") & ~c("unknown") & c("fails")
    found = {
        "G1a": failed & c("read"),
        "duplicate": (c("partitions") > 1) | c("moved"),
        "lost-write": c("lost_idx").isNotNull() & ~c("read"),
    }
    names = F.array_compact(F.array(*(F.when(v, F.lit(k)) for k, v in found.items())))
    cases = (
        ids.select("*", names.alias("names"))
        .filter(F.size("names") > 0)
        .select("*", F.explode("names").alias("name"))
    )
    name = c("name")
    sort = (
        F.when(name == "G1a", c("fail_idx"))
        .when(name == "duplicate", c("log_idx"))
        .otherwise(c("lost_idx"))
    )
    g1a = F.when(name == "G1a", F.array("fail_idx", "read_idx"))
    return _anomaly(cases, name, sort, id=c("id"), indexes=g1a).unionByName(
        _anomaly(
            reached,
            "reached",
            F.lit(0),
            queue=c("queue"),
            partition=c("partition"),
            reached=c("reached"),
        )
    )


def known_offsets(log: DataFrame, held: list[DataFrame]) -> tuple[DataFrame, DataFrame]:
    """Every known offset of every partition, with its rank among them, and
    the offsets that hold two or more ids (inconsistent-offsets): one
    shuffle by offset. How many known offsets lie strictly between two is
    then a difference of ranks: no step walks the offsets a gap covers, so
    a read that jumps across a whole log costs what any other does."""
    qp = ["queue", "partition"]
    at = log.groupBy(*qp, "offset").agg(
        F.min("id").alias("id_lo"), F.max("id").alias("id_hi"), F.min("index").alias("idx")
    )
    at = _held(at, held)  # read twice: computed once
    inconsistent = _anomaly(
        at.filter(c("id_lo") != c("id_hi")),
        "inconsistent-offsets",
        c("idx"),
        queue=c("queue"),
        partition=c("partition"),
        offset=c("offset"),
    )
    rank = F.row_number().over(Window.partitionBy(*qp).orderBy("offset"))
    known = at.select(*qp, "offset", rank.alias("rank"))
    return known, inconsistent


def sequences(r: DataFrame, known: DataFrame) -> DataFrame:
    """poll-skip, nonmonotonic-poll and nonmonotonic-send: each op against
    the same process's previous ok op in that queue and partition."""
    role = c("role")
    kind = F.when(role.isin(DELIVER, UNCOMMITTED_READ), "poll").when(role == ACK, "send")
    cols = ["proc", "index", "kind", "queue", "partition", "offset", "id", "pos", "role"]
    ops = _log(r).select("*", kind.alias("kind")).filter(c("kind").isNotNull()).select(*cols)
    resets = r.filter(role == RESET).select("proc", "index", F.lit("reset").alias("kind"), "role")
    # One shuffle by process serves the grouping per op and both windows.
    seq = (
        ops.unionByName(resets, allowMissingColumns=True)
        .repartition("proc")
        .groupBy("proc", "index", "kind", "queue", "partition")
        .agg(
            F.min_by("offset", "pos").alias("first_off"),
            F.min_by("id", "pos").alias("first_id"),
            F.max_by("offset", "pos").alias("last_off"),
            F.max_by("id", "pos").alias("last_id"),
            _any(role != UNCOMMITTED_READ).alias("ok"),
        )
    )
    upto = (
        Window.partitionBy("proc")
        .orderBy("index", "kind")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    epoch = F.sum(F.when(c("kind") == "reset", 1).otherwise(0)).over(upto)
    seq = seq.select("*", epoch.alias("epoch")).filter(c("kind") != "reset")
    before = (
        Window.partitionBy("proc", "epoch", "kind", "queue", "partition")
        .orderBy("index")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    last = F.struct(c("last_off").alias("offset"), c("last_id").alias("id"), "index")
    last_ok = F.when(c("ok"), last)
    pairs = seq.select("*", F.last(last_ok, ignorenulls=True).over(before).alias("prev")).filter(
        c("prev").isNotNull()
    )
    pair = ["proc", "index", "queue", "partition", "first_off", "first_id", "prev"]
    backwards = pairs.filter(c("first_off") <= c("prev.offset")).select(
        *pair,
        F.lit(None).cast("long").alias("skipped"),
        F.when(c("kind") == "poll", "nonmonotonic-poll")
        .otherwise("nonmonotonic-send")
        .alias("name"),
    )
    # A read past a gap in the offsets: a known offset strictly between the
    # two makes it a skip (how many were skipped, the example says): the
    # difference of the two offsets' ranks among the partition's known ones.
    gap = (c("kind") == "poll") & (c("first_off") > c("prev.offset") + 1)
    qp = ["queue", "partition"]
    rank_of = known.select(*qp, c("offset").alias("first_off"), c("rank").alias("first_rank"))
    prev_rank = known.select(*qp, c("offset").alias("prev_off"), c("rank").alias("prev_rank"))
    gaps = (
        pairs.filter(gap)
        .select(*pair, c("prev.offset").alias("prev_off"))
        .join(rank_of, [*qp, "first_off"])
        .join(prev_rank, [*qp, "prev_off"])
        .select(*pair, (c("first_rank") - c("prev_rank") - 1).alias("skipped"))
        .filter(c("skipped") > 0)
        .select("*", F.lit("poll-skip").alias("name"))
    )
    cases = backwards.unionByName(gaps)
    return _anomaly(
        cases,
        c("name"),
        c("prev.index"),
        ids=F.array("prev.id", "first_id"),
        indexes=F.array("prev.index", "index"),
        process=c("proc"),
        queue=c("queue"),
        partition=c("partition"),
        offsets=F.array("prev.offset", "first_off"),
        skipped=c("skipped"),
    )


def txn_edges(r: DataFrame) -> DataFrame:
    """Rows named "edge": ok txn -> ok txn, wr from a write to its reads, ww
    from every txn that wrote at an offset to every txn that wrote at the
    next txn-written offset of its partition (as the sends acknowledged
    them), with one witness message each (the later write). Txns tied at
    one offset get no edge between them: nothing orders them, and the tie
    is an inconsistent-offsets already."""
    role, is_txn = c("role"), c("f") == "txn"
    writes = r.filter(is_txn & (role == ACK)).select("id", c("index").alias("w"))
    reads = r.filter(is_txn & (role == DELIVER)).select("id", "queue", "partition", "index")
    wr = (
        writes.join(reads, "id")
        .filter(c("w") != c("index"))
        .select(
            c("w").alias("src"),
            c("index").alias("dst"),
            F.lit("wr").alias("kind"),
            "id",
            "queue",
            "partition",
        )
    )
    # The txns at each txn-written offset, then each offset's txns against
    # the next offset's: txn writes only, few beside the whole log.
    at = (
        _log(r)
        .filter(is_txn & (role == ACK))
        .groupBy("queue", "partition", "offset")
        .agg(
            F.collect_set("index").alias("srcs"),
            F.collect_set(F.struct("index", "id")).alias("dsts"),
        )
    )
    order = Window.partitionBy("queue", "partition").orderBy("offset")
    ww = (
        at.select("queue", "partition", "srcs", F.lead("dsts").over(order).alias("next"))
        .filter(c("next").isNotNull())
        .select("queue", "partition", "next", F.explode("srcs").alias("src"))
        .select("queue", "partition", "src", F.explode("next").alias("n"))
        .filter(c("src") != c("n.index"))
        .select(
            "src",
            c("n.index").alias("dst"),
            F.lit("ww").alias("kind"),
            c("n.id").alias("id"),
            "queue",
            "partition",
        )
    )
    edges = (
        wr.unionByName(ww)
        .groupBy("src", "dst", "kind")
        .agg(F.min_by(F.struct("id", "queue", "partition"), "id").alias("why"))
    )
    return _anomaly(
        edges, "edge", c("src"), src=c("src"), dst=c("dst"), kind=c("kind"), why=c("why")
    )


def _key(ex: dict[str, Any]) -> Any:
    """What a described case is known by: its id, or its (queue, partition,
    offset) for inconsistent-offsets."""
    return ex["id"] if "id" in ex else (ex["queue"], ex["partition"], ex["offset"])


def describe(
    r: DataFrame, cases: dict[str, list[dict]], reached: list[dict]
) -> dict[str, dict[Any, dict[str, Any]]]:
    """The examples of the cases shown (a few per anomaly) whose passes kept
    only their keys. One pass over the rows keeps those of these cases (the
    rows of a few ids and offsets, and the reads at how far reads reached in
    each partition): a few hundred rows, which the driver describes. Returns
    {name: {key: example}}, key being the id (or, for inconsistent-offsets,
    (queue, partition, offset))."""
    ids = [e["id"] for n in ("duplicate", "lost-write") for e in cases.get(n, [])]
    keys = [_key(e) for e in cases.get("inconsistent-offsets", [])]
    wanted = c("id").isin(ids)
    for q, p, o in keys:
        wanted = wanted | ((c("queue") == q) & (c("partition") == p) & (c("offset") == o))
    how_far = local_rows(
        r.sparkSession,
        [(x["queue"], x["partition"], x["reached"]) for x in reached],
        "queue string, partition long, reached long",
    )
    read = c("role").isin(DELIVER, DRAIN)
    got = (
        _log(r)
        .join(F.broadcast(how_far), ["queue", "partition"], "left")
        .filter(wanted | (read & (c("offset") == c("reached"))))
        .select("id", "queue", "partition", "offset", "index", read.alias("read"), "role")
        .collect()
    )
    rows = [x.asDict() for x in got]
    out: dict[str, dict[Any, dict[str, Any]]] = {name: {} for name in DESCRIBED}
    for e in cases.get("duplicate", []):
        out["duplicate"][e["id"]] = _duplicate(e["id"], [x for x in rows if x["id"] == e["id"]])
    for key in keys:
        at = [x for x in rows if (x["queue"], x["partition"], x["offset"]) == key]
        out["inconsistent-offsets"][key] = _inconsistent(key, at)
    far = {(x["queue"], x["partition"]): x["reached"] for x in reached}
    for e in cases.get("lost-write", []):
        out["lost-write"][e["id"]] = _lost(e["id"], rows, far)
    return out


def _first_index(rows: list[dict], key) -> dict[Any, int]:
    """key(row) -> the lowest history index of the rows with that key."""
    first: dict[Any, int] = {}
    for x in rows:
        k = key(x)
        first[k] = min(first.get(k, x["index"]), x["index"])
    return first


def _duplicate(id_: int, rows: list[dict]) -> dict[str, Any]:
    """Its lowest and highest place, each with the first op that put it there."""
    places = _first_index(rows, lambda x: (x["queue"], x["partition"], x["offset"]))
    lo, hi = min(places), max(places)
    return {
        "id": id_,
        "indexes": sorted({places[lo], places[hi]}),
        "queue": lo[0],
        "places": [[lo[1], lo[2]], [hi[1], hi[2]]],
    }


def _inconsistent(key: tuple, rows: list[dict]) -> dict[str, Any]:
    """Its lowest and highest id, each with the first op that put it there."""
    first = _first_index(rows, lambda x: x["id"])
    lo, hi = min(first), max(first)
    q, p, o = key
    return {
        "ids": [lo, hi],
        "indexes": sorted({first[lo], first[hi]}),
        "queue": q,
        "partition": p,
        "offset": o,
    }


def _lost(id_: int, rows: list[dict], far: dict[tuple, int]) -> dict[str, Any]:
    """The first acknowledgement of the id at or below how far reads reached
    in its partition, and the (highest) id read there."""
    mine: dict[tuple, list[dict]] = {}
    for x in rows:
        if x["id"] == id_:
            mine.setdefault((x["queue"], x["partition"]), []).append(x)
    cands = []
    for qp, xs in mine.items():
        last = max(x["offset"] for x in xs)
        acks = [x["index"] for x in xs if x["role"] == ACK]
        if acks and qp in far and last <= far[qp]:
            cands.append((min(acks), *qp, last))
    ack, q, p, last = min(cands)
    there = (q, p, far[(q, p)])
    reads = [
        (x["id"], x["index"])
        for x in rows
        if x["read"] and (x["queue"], x["partition"], x["offset"]) == there
    ]
    by = max(reads) if reads else (None, None)
    return {
        "id": id_,
        "indexes": [ack, by[1]],
        "queue": q,
        "partition": p,
        "offset": last,
        "read-offset": far[(q, p)],
        "read-id": by[0],
    }


def _cycle_through(g: nx.DiGraph, u: Any, v: Any) -> list:
    """The shortest cycle that uses edge u -> v: [u, v, ..., u]."""
    return [u, *nx.shortest_path(g, v, u)]


def find_cycles(edges: list[tuple[int, int, str, dict]]) -> dict[str, list[dict[str, Any]]]:
    """G0: one cycle per strongly connected component of the ww graph; G1c:
    one cycle through a wr edge per component of the ww+wr graph that holds a
    wr edge inside it."""
    g = nx.DiGraph()
    for src, dst, kind, why in edges:
        if g.has_edge(src, dst):
            g[src][dst]["kinds"][kind] = why
        else:
            g.add_edge(src, dst, kinds={kind: why})

    def describe(cycle: list, name: str) -> dict[str, Any]:
        """The first step of a G1c cycle is its wr edge; other steps say ww
        where both kinds link the pair."""
        steps = []
        for i, (a, b) in enumerate(zip(cycle, cycle[1:], strict=False)):
            kinds = g[a][b]["kinds"]
            kind = "wr" if name == "G1c" and i == 0 else ("ww" if "ww" in kinds else "wr")
            steps.append({"type": kind, "from": a, "to": b, **kinds[kind]})
        return {"indexes": sorted(set(cycle)), "cycle": cycle, "steps": steps, "what": WHAT[name]}

    out: dict[str, list[dict[str, Any]]] = {"G0": [], "G1c": []}
    ww = nx.DiGraph((a, b) for a, b, k in g.edges(data="kinds") if "ww" in k)
    for comp in sorted(sorted(s) for s in nx.strongly_connected_components(ww) if len(s) > 1):
        sub = ww.subgraph(comp)
        u = comp[0]
        v = min(sub.successors(u))
        out["G0"].append(describe(_cycle_through(sub, u, v), "G0"))
    for comp in sorted(sorted(s) for s in nx.strongly_connected_components(g) if len(s) > 1):
        sub = g.subgraph(comp)
        wr = sorted((a, b) for a, b, k in sub.edges(data="kinds") if "wr" in k)
        if wr:
            u, v = wr[0]
            out["G1c"].append(describe(_cycle_through(sub, u, v), "G1c"))
    return out


class OffsetChecker:
    name = "offsets"
    properties = ("per-partition-order", "read-committed")
    rules = PROPERTY_RULES
    anomalies = WHAT
    hollow: dict[str, HollowRule] = {
        "per-partition-order": (fault_seen, no_fault("could disturb the order of a partition")),
        "read-committed": (
            info_above_zero(TXN_ABORTED_OR_UNKNOWN),
            "no transaction aborted or ended unknown: there was nothing uncommitted to read",
        ),
    }

    def check(self, history: LoadedHistory, test: dict[str, Any]) -> CheckResult:
        facts = history.facts
        has_offsets, has_txns = facts.offset_ops > 0, facts.ok_txns > 0
        if not (has_offsets or has_txns):
            # Nothing to read: RabbitMQ histories pay nothing. Without offsets
            # or txns there is no case of any anomaly but G1a, which is not
            # evaluated here: delivery's aborted-read counts the same ids.
            return CheckResult(
                properties={
                    "per-partition-order": Property(UNKNOWN, "no message has an offset"),
                    # no evidence, no "held": delivery's aborted-read can still break it
                    "read-committed": Property(
                        UNKNOWN, "no offsets and no ok txn: nothing shows what reads committed"
                    ),
                },
                counts={name: 0 for name in ANOMALIES if name != "G1a"},
            )
        graph_note = None
        if has_txns and facts.ok_txns > TXN_GRAPH_CAP:
            graph_note = f"{facts.ok_txns} ok txns > {TXN_GRAPH_CAP}: cycles not searched"
        # Cached: every pass below reads these rows instead of the history.
        held: list[DataFrame] = []
        # by_id from the start: a cached frame's plan is made when it is cached
        with by_id(history.spark):
            try:
                # Not cached: each pass reads the few columns it needs from
                # the sidecar faster than a cache of every row is built.
                r = rows(history)
                known, inconsistent = known_offsets(_log(r), held)
                frames = [per_id(r, held), inconsistent, sequences(r, known)]
                if has_txns and not graph_note:
                    frames.append(txn_edges(r))
                every = collect(reduce(DataFrame.unionByName, frames))
                counts, anomalies, edges, reached = every
                shown = {n: anomalies[n]["examples"] for n in DESCRIBED if n in anomalies}
                if shown:
                    found = describe(r, shown, reached)
                    for name, examples in shown.items():
                        for i, ex in enumerate(examples):
                            examples[i] = {**found[name][_key(ex)], "what": WHAT[name]}
            finally:
                for df in held:
                    df.unpersist()
        if has_txns and not graph_note:
            for name, cycles in find_cycles(edges).items():
                counts[name] = len(cycles)
                if cycles:
                    anomalies[name] = {"count": len(cycles), "examples": cycles[:EXAMPLES]}
        return CheckResult(
            properties=decide(counts, has_offsets, graph_note),
            counts=counts,
            anomalies=anomalies,
            info={"txn-graph": graph_note} if graph_note else {},
        )


# The anomalies whose passes keep only their keys (`describe` adds the rest).
DESCRIBED = ("duplicate", "inconsistent-offsets", "lost-write")


def collect(
    every: DataFrame,
) -> tuple[dict[str, int], dict[str, dict[str, Any]], list, list[dict]]:
    """Counts, the first examples of each anomaly by history index, every
    txn edge and how far reads reached in each partition: the only things
    that reach the driver."""
    by_name = Window.partitionBy("name")
    got = (
        every.select(
            "name",
            "ex",
            F.count(F.lit(1)).over(by_name).alias("n"),
            F.row_number().over(by_name.orderBy("sort", "ex")).alias("rank"),
        )
        .filter((c("rank") <= EXAMPLES) | c("name").isin("edge", "reached"))
        .collect()
    )
    counts = {name: 0 for name in ANOMALIES}
    anomalies: dict[str, dict[str, Any]] = {}
    edges, reached = [], []
    for row in sorted(got, key=lambda row: (row["name"], row["rank"])):
        ex = json.loads(row["ex"])
        if row["name"] == "edge":
            edges.append((ex["src"], ex["dst"], ex["kind"], ex["why"]))
            continue
        if row["name"] == "reached":
            reached.append(ex)
            continue
        entry = anomalies.setdefault(row["name"], {"count": row["n"], "examples": []})
        ex["what"] = WHAT[row["name"]]
        entry["examples"].append(ex)
        counts[row["name"]] = row["n"]
    return counts, anomalies, edges, reached


def decide(
    counts: dict[str, int], has_offsets: bool, graph_note: str | None
) -> dict[str, Property]:
    props: dict[str, Property] = {}
    for name, rule in PROPERTY_RULES.items():
        broken = [f"{k}={counts[k]}" for k in rule if counts[k] > 0]
        if broken:
            props[name] = Property(False, ", ".join(broken))
        elif name == "per-partition-order" and not has_offsets:
            props[name] = Property(UNKNOWN, "no message has an offset")
        elif name == "read-committed" and graph_note:
            props[name] = Property(UNKNOWN, graph_note)
        else:
            props[name] = Property(True)
    return props
