"""Offset-based checks of Kafka-like histories, named as Jepsen's Kafka
checker (jepsen/tests/kafka.clj) names them where the meaning is the same.

Only message occurrences with both `partition` and `offset` take part in the
offset checks. A history with no offset and no txn (RabbitMQ) is not
scanned at all: the loader's fact pass already says so, and this checker
then reports zero counts (G1a aside: not evaluated, it is aborted-read) and
its two properties.

Every occurrence becomes one narrow row (id, queue, partition, offset, role,
process, history index, place in the op), cached with the logs (rows that
place an id at an offset, shuffled once by queue and partition); one job then
computes every anomaly with group-bys and windows. Only counts, at most five
examples per anomaly and the txn graph's edges reach the driver: networkx
searches that graph (one node per ok txn, about 1 kB each with its edges) on
the driver, which is why it is skipped above TXN_GRAPH_CAP ok txns
(read-committed is then "unknown"). The per-partition windows put a whole
partition's log in one task: fine for tens of millions of messages per
partition, the scale of a test run.

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

from .base import UNKNOWN, CheckResult, Property
from .load import (
    ACK,
    ATTEMPT,
    DELIVER,
    DRAIN,
    FAIL,
    INFO,
    OPEN_ATTEMPT,
    LoadedHistory,
    role_of,
)

EXAMPLES = 5
# The txn graph lives on the driver: about 1 kB per txn with its edges in
# networkx, so 200k txns stay well inside the 4 GB driver.
TXN_GRAPH_CAP = 200_000
# A receive mop of a txn that failed or ended info: it places messages in the
# log, but is no read of committed data.
UNCOMMITTED_READ = 8
# An ok/info assign, subscribe, revoke or crash op of a process: its poll and
# send sequences restart.
RESET = 9
# Roles that place a message in its partition's log.
LOG_ROLES = (ACK, DELIVER, DRAIN, UNCOMMITTED_READ)
RESET_FS = ("assign", "subscribe", "revoke", "crash")

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
    "at-least-once": ("lost-write", "G1a"),
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
    role = (
        F.when(f.isin(*RESET_FS), F.when(~typ.isin("invoke", "fail"), RESET))
        .when((f == "txn") & (mop == "receive") & typ.isin("fail", "info"), UNCOMMITTED_READ)
        .otherwise(role_of(f, typ, mop))
    )
    if history.facts.open_invokes:
        is_open = c("index").isin(history.facts.open_invokes)
        role = F.when((role == ATTEMPT) & is_open, OPEN_ATTEMPT).otherwise(role)
    return (
        history.message_rows(markers=RESET_FS)
        .select(
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
        )
        .filter(c("role").isNotNull() & (c("role") != ATTEMPT))
    )


def _anomaly(df: DataFrame, name: str | Column, sort: Column, **fields: Column) -> DataFrame:
    """(name, sort, ex): one case of an anomaly, its example as JSON text
    (the driver adds "what")."""
    ex = F.struct(*(v.alias(k) for k, v in fields.items()))
    name_col = F.lit(name) if isinstance(name, str) else name
    return df.select(name_col.alias("name"), sort.alias("sort"), F.to_json(ex).alias("ex"))


def placed(r: DataFrame) -> DataFrame:
    """The logs: every occurrence that places an id at an offset, with what
    its partition and its offset know. One shuffle, by (queue, partition):
    every window below is finer, so none needs another; and two sorts, one
    by id and one by offset, each serving all the windows after it."""
    qp = ["queue", "partition"]
    read = c("role").isin(DELIVER, DRAIN)
    log = r.filter(c("role").isin(*LOG_ROLES) & _positioned()).repartition(*qp)
    at = Window.partitionBy(*qp, "offset")
    log = log.select(
        "*",
        F.row_number().over(at.orderBy("id", "index", "pos")).alias("nth_at"),
        # the dense place in the log: Jepsen's index, gaps removed
        F.dense_rank().over(Window.partitionBy(*qp).orderBy("offset")).alias("d"),
        F.min("id").over(at).alias("id_lo"),
        F.max("id").over(at).alias("id_hi"),
        F.min_by("index", "id").over(at).alias("idx_lo"),
        F.max_by("index", "id").over(at).alias("idx_hi"),
    )
    by_id = Window.partitionBy(*qp, "id")
    log = log.select(
        "*",
        F.min("offset").over(by_id).alias("first_off"),
        F.max("offset").over(by_id).alias("last_off"),
    )
    # How far ok reads reached: the highest first offset of an id they saw.
    reached = F.max(F.when(read, F.struct("first_off", "id", "index")))
    log = log.select("*", reached.over(Window.partitionBy(*qp)).alias("reached"))
    return log


def per_id(r: DataFrame, log: DataFrame) -> DataFrame:
    """G1a, duplicate and lost-write: one shuffle by id, of every occurrence
    plus the log rows that are candidate lost writes (acknowledged at or
    below how far reads reached), which count if no ok read saw the id."""
    role = c("role")
    reached = c("last_off") <= c("reached.first_off")
    candidates = log.filter((role == ACK) & reached).select(
        "id",
        F.struct("index", "queue", "partition", "last_off", "reached").alias("lost"),
    )
    where = F.when(role.isin(*LOG_ROLES) & _positioned(), F.struct("queue", "partition", "offset"))
    read = role.isin(DELIVER, DRAIN)
    ids = (
        r.filter(c("id").isNotNull())
        .unionByName(candidates, allowMissingColumns=True)
        .groupBy("id")
        .agg(
            _any(role == ACK).alias("acked"),
            _any(role.isin(INFO, OPEN_ATTEMPT)).alias("unknown"),
            _any(role == FAIL).alias("fails"),
            _any(read).alias("read"),
            F.min(F.when(role == FAIL, c("index"))).alias("fail_idx"),
            F.min(F.when(read, c("index"))).alias("read_idx"),
            F.min(where).alias("lo"),
            F.max(where).alias("hi"),
            F.min_by(c("index"), where).alias("lo_idx"),
            F.max_by(c("index"), where).alias("hi_idx"),
            F.min("lost").alias("lost"),
        )
    )
    failed = ~c("acked") & ~c("unknown") & c("fails")
    names = F.array(
        F.when(failed & c("read"), F.lit("G1a")),
        F.when(c("lo") != c("hi"), F.lit("duplicate")),
        F.when(c("lost").isNotNull() & ~c("read"), F.lit("lost-write")),
    )
    cases = ids.select("*", F.explode(F.array_compact(names)).alias("name"))
    name = c("name")

    def pick(g1a: Column | None, dup: Column | None, lost: Column | None) -> Column:
        col = F.when(name == "G1a", g1a).when(name == "duplicate", dup)
        return col.when(name == "lost-write", lost)

    lo_hi = F.array_sort(F.array_distinct(F.array("lo_idx", "hi_idx")))
    return _anomaly(
        cases,
        name,
        pick(c("fail_idx"), F.least("lo_idx", "hi_idx"), c("lost.index")),
        id=c("id"),
        indexes=pick(
            F.array("fail_idx", "read_idx"), lo_hi, F.array("lost.index", "lost.reached.index")
        ),
        queue=pick(None, c("lo.queue"), c("lost.queue")),
        partition=pick(None, None, c("lost.partition")),
        offset=pick(None, None, c("lost.last_off")),
        places=pick(
            None,
            F.array(
                F.array(c("lo.partition"), c("lo.offset")),
                F.array(c("hi.partition"), c("hi.offset")),
            ),
            None,
        ),
        **{
            "read-offset": pick(None, None, c("lost.reached.first_off")),
            "read-id": pick(None, None, c("lost.reached.id")),
        },
    )


def inconsistent_offsets(log: DataFrame) -> DataFrame:
    return _anomaly(
        log.filter((c("id_lo") != c("id_hi")) & (c("nth_at") == 1)),
        "inconsistent-offsets",
        F.least("idx_lo", "idx_hi"),
        ids=F.array("id_lo", "id_hi"),
        indexes=F.array_sort(F.array_distinct(F.array("idx_lo", "idx_hi"))),
        queue=c("queue"),
        partition=c("partition"),
        offset=c("offset"),
    )


def sequences(r: DataFrame, log: DataFrame) -> DataFrame:
    """poll-skip, nonmonotonic-poll and nonmonotonic-send: each op against
    the same process's previous ok op in that queue and partition."""
    role, f = c("role"), c("f")
    is_read = ((f == "receive") & (role == DELIVER)) | (
        (f == "txn") & role.isin(DELIVER, UNCOMMITTED_READ)
    )
    kind = F.when(is_read, "poll").when(role == ACK, "send")
    here = F.struct("offset", "id", "d")
    cols = ["proc", "index", "kind", "queue", "partition", "offset", "id", "d", "pos", "role"]
    ops = log.select("*", kind.alias("kind")).filter(c("kind").isNotNull()).select(*cols)
    resets = r.filter(role == RESET).select("proc", "index", F.lit("reset").alias("kind"), "role")
    # One shuffle by process serves the grouping per op and both windows.
    seq = (
        ops.unionByName(resets, allowMissingColumns=True)
        .repartition("proc")
        .groupBy("proc", "index", "kind", "queue", "partition")
        .agg(
            F.min_by(here, "pos").alias("first"),
            F.max_by(here, "pos").alias("last"),
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
    last_ok = F.when(c("ok"), F.struct("last.offset", "last.id", "last.d", "index"))
    pairs = seq.select("*", F.last(last_ok, ignorenulls=True).over(before).alias("prev")).filter(
        c("prev").isNotNull()
    )

    # Known offsets strictly between the two: the dense places count them.
    skipped = c("first.d") - c("prev.d") - 1
    name = F.when(
        c("first.offset") <= c("prev.offset"),
        F.when(c("kind") == "poll", "nonmonotonic-poll").otherwise("nonmonotonic-send"),
    ).when((c("kind") == "poll") & (skipped > 0), "poll-skip")
    cases = pairs.select("*", name.alias("name")).filter(c("name").isNotNull())
    return _anomaly(
        cases,
        c("name"),
        c("prev.index"),
        ids=F.array("prev.id", "first.id"),
        indexes=F.array("prev.index", "index"),
        process=c("proc"),
        queue=c("queue"),
        partition=c("partition"),
        offsets=F.array("prev.offset", "first.offset"),
        skipped=F.when(c("name") == "poll-skip", skipped),
    )


def txn_edges(r: DataFrame, log: DataFrame) -> DataFrame:
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
    # the next offset's. log is partitioned by (queue, partition) already:
    # neither the grouping nor the window shuffles.
    at = (
        log.filter(is_txn & (role == ACK))
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
                    "read-committed": Property(
                        True, "no txns or offsets: G1a not evaluated (see aborted-read)"
                    ),
                },
                counts={name: 0 for name in ANOMALIES if name != "G1a"},
            )
        graph_note = None
        if has_txns and facts.ok_txns > TXN_GRAPH_CAP:
            graph_note = f"{facts.ok_txns} ok txns > {TXN_GRAPH_CAP}: cycles not searched"
        # Cached: the one job below reads these two instead of the history.
        r = rows(history).persist(StorageLevel.MEMORY_AND_DISK)
        log = placed(r).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            frames = [per_id(r, log), inconsistent_offsets(log), sequences(r, log)]
            if has_txns and not graph_note:
                frames.append(txn_edges(r, log))
            counts, anomalies, edges = collect(reduce(DataFrame.unionByName, frames))
        finally:
            log.unpersist()
            r.unpersist()
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


def collect(every: DataFrame) -> tuple[dict[str, int], dict[str, dict[str, Any]], list]:
    """Counts, the first examples of each anomaly by history index, and every
    txn edge: the only things that reach the driver."""
    by_name = Window.partitionBy("name")
    got = (
        every.select(
            "name",
            "ex",
            F.count(F.lit(1)).over(by_name).alias("n"),
            F.row_number().over(by_name.orderBy("sort", "ex")).alias("rank"),
        )
        .filter((c("rank") <= EXAMPLES) | (c("name") == "edge"))
        .collect()
    )
    counts = {name: 0 for name in ANOMALIES}
    anomalies: dict[str, dict[str, Any]] = {}
    edges = []
    for row in sorted(got, key=lambda row: (row["name"], row["rank"])):
        ex = json.loads(row["ex"])
        if row["name"] == "edge":
            edges.append((ex["src"], ex["dst"], ex["kind"], ex["why"]))
            continue
        entry = anomalies.setdefault(row["name"], {"count": row["n"], "examples": []})
        ex["what"] = WHAT[row["name"]]
        entry["examples"].append(ex)
        counts[row["name"]] = row["n"]
    return counts, anomalies, edges


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
