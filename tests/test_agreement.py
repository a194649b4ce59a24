"""Generated histories: the Spark checker, the in-memory baseline and the
tiny reference must agree exactly (counts, properties, and for the two
checkers the examples too)."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.history import read_history
from tests.histories import Builder
from tests.reference import reference

OUTCOMES = st.sampled_from(["ok", "ok", "ok", "fail", "info"])


def random_history(draw) -> Builder:
    """Random but conformant: sends (some retried), receives, drains, txns,
    effects and nemesis ops, with processes retired after info."""
    b = Builder()
    procs = list(range(4))
    next_proc = 4
    next_id = 1
    ids: list[int] = []
    retryable: list[int] = []  # ids whose send failed or is unknown

    def some_ids():
        pool = ids + [10_000 + draw(st.integers(0, 3))]  # sometimes never sent
        return draw(st.lists(st.sampled_from(pool), max_size=4))

    for _ in range(draw(st.integers(1, 60))):
        slot = draw(st.integers(0, len(procs) - 1))
        p = procs[slot]
        if p in b.open:
            inv = b.open[p]
            typ = draw(OUTCOMES)
            value = None
            if inv["f"] in ("receive", "drain") and typ == "ok":
                value = {"msgs": [{"id": i, "queue": "q"} for i in some_ids()]}
            elif inv["f"] == "txn":
                mops = [dict(m) for m in inv["value"]["mops"]]
                for m in mops:
                    if m["f"] == "receive" and typ == "ok":
                        m["msgs"] = [{"id": i, "queue": "q"} for i in some_ids()]
                value = {"mops": mops}
            b.complete(p, typ, value)
            if inv["f"] == "send" and typ != "ok":
                retryable.extend(m["id"] for m in inv["value"]["msgs"])
            if typ == "info":  # Jepsen: the process continues under a new number
                procs[slot] = next_proc
                next_proc += 1
            continue
        action = draw(
            st.sampled_from(
                ["send", "retry", "retry", "receive", "drain", "txn", "effects", "nemesis"]
            )
        )
        if action in ("send", "retry"):
            if action == "retry" and (retryable or ids):
                batch = [draw(st.sampled_from(retryable or ids))]
            else:
                batch = list(range(next_id, next_id + draw(st.integers(1, 3))))
                next_id += len(batch)
                ids.extend(batch)
            b.invoke(p, "send", {"msgs": [{"id": i, "queue": "q"} for i in batch]})
        elif action in ("receive", "drain"):
            b.invoke(p, action, {"queue": "q"})
        elif action == "txn":
            batch = [next_id]
            next_id += 1
            ids.extend(batch)
            b.invoke(
                p,
                "txn",
                {
                    "mops": [
                        {"f": "receive", "msgs": []},
                        {"f": "send", "msgs": [{"id": i, "queue": "q"} for i in batch]},
                    ]
                },
            )
        elif action == "effects":
            b.effects({i: draw(st.integers(0, 2)) for i in some_ids()})
        else:
            b.nemesis(
                draw(st.sampled_from(["start-partition", "kill", "pause"])), {"nodes": ["n1"]}
            )
    return b


@pytest.mark.slow
@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_spark_baseline_and_reference_agree(spark, tmp_path_factory, data):
    from checkers.delivery import DeliveryChecker
    from checkers.load import load_history
    from tests.bench.inmemory import InMemoryChecker

    b = random_history(data.draw)
    path = b.write(tmp_path_factory.mktemp("h") / "history.jsonl", sidecar=True)
    ref_counts, ref_valid = reference(list(read_history(path)))
    sp = DeliveryChecker().check(load_history(spark, path, use_sidecar=False), {})
    columnar = load_history(spark, path)
    assert columnar.source == "sidecar"
    assert DeliveryChecker().check(columnar, {}) == sp
    mem = InMemoryChecker().check_path(path)
    assert sp.counts == mem.counts
    assert {k: v for k, v in sp.counts.items()} == ref_counts
    assert {k: p.valid for k, p in sp.properties.items()} == ref_valid
    assert {k: p.valid for k, p in mem.properties.items()} == ref_valid
    assert sp.anomalies == mem.anomalies
    assert sp.info == mem.info
