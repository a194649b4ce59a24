# ruff: noqa: E501 - the brokers' log lines, as written
"""What a Kafka state read takes from the brokers' own logs in a share run
(workloads/kafka/state.py): each acquisition on a last attempt, read by grep
on the node (this machine as one), and whether the run's versions log every
one (then its absence is evidence: checkers/share.py)."""

from __future__ import annotations

from types import SimpleNamespace

from tests.here import Here
from workloads.kafka.state import LAST_ATTEMPT, last_attempts, share_events

# Kafka 4.3.1's words (SharePartition), as its brokers wrote them here: the
# share partition is `group-topicId:topic-partition`
LOG = """\
[2026-11-27 15:33:13,268] WARN [SharePartition] The offset 6514 is on last delivery attempt in share partition: queuecheck-test-5-Xy3_-q9aTn2Kc1bL0dE4fA:qc-jobs-1, should be delivered alone in this fetch (kafka.server.share.SharePartition)
[2026-11-27 15:33:13,300] WARN The offset 6515 is on last delivery attempt in share partition: queuecheck-test-5-Xy3_-q9aTn2Kc1bL0dE4fA:qc-jobs-1, should be delivered alone in next fetch (kafka.server.share.SharePartition)
[2026-11-27 15:33:13,360] WARN The offset 6563 is on last delivery attempt in share partition: g-AAAAAAAAAAAAAAAAAAAAAA:qc-jobs-10, should be delivered alone in this fetch (kafka.server.share.SharePartition)
[2026-11-27 15:33:13,361] WARN The offset 7 is on last delivery attempt in share partition: g-AAAAAAAAAAAAAAAAAAAAAA:other-0, should be delivered alone in this fetch (kafka.server.share.SharePartition)
[2026-11-27 15:33:14,000] INFO [GroupCoordinator 1]: Member left (kafka.coordinator.group.GroupCoordinator)
"""


def test_an_acquisition_on_a_last_attempt_is_read_with_its_place():
    """'in next fetch' is a record left for later (not acquired); another
    topic's records are not the run's."""
    assert last_attempts(LOG, ["qc-jobs"]) == [
        {"topic": "qc-jobs", "partition": 1, "offset": 6514},
        {"topic": "qc-jobs", "partition": 10, "offset": 6563},
    ]


def db_on(tmp_path, versions, limit, logs=("n1", "n2")):
    """A Kafka DB of nodes on this machine, each with a log directory."""
    nodes = []
    for name in logs:
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "server.log").write_text(LOG if name == "n1" else "")
        nodes.append(Here(name))
    return SimpleNamespace(
        nodes=nodes,
        log_files=lambda node: [str(tmp_path / node.name)],
        versions=lambda: versions,
        coordinated={"share": True, "share_limit": limit},
    )


def test_the_state_says_which_versions_log_every_last_attempt(tmp_path):
    doc = {"unreadable": {}}
    share_events(db_on(tmp_path, ["4.3.1"], 3), ["qc-jobs"], doc)
    assert doc["logged"] == [LAST_ATTEMPT] and doc["unreadable"] == {}
    assert [(e["node"], e["event"], e["offset"]) for e in doc["events"]] == [
        ("n1", LAST_ATTEMPT, 6514),
        ("n1", LAST_ATTEMPT, 6563),
    ]
    # 4.2 acquires on a last attempt without a word; at a limit of 2 no
    # version logs it; an upgrade from 4.2 did not log all along
    for versions, limit in ((["4.2.1"], 3), (["4.3.1"], 2), (["4.2.1", "4.3.1"], 3)):
        doc = {"unreadable": {}}
        share_events(
            db_on(tmp_path / "-".join([*versions, str(limit)]), versions, limit), ["qc-jobs"], doc
        )
        assert doc["logged"] == [], (versions, limit)


def test_a_node_whose_log_cannot_be_read_is_named_and_nothing_is_claimed_logged(tmp_path):
    db = db_on(tmp_path, ["4.3.1"], 3)
    db.log_files = lambda node: [str(tmp_path / node.name / "missing")]  # grep exits 2
    doc = {"unreadable": {}}
    share_events(db, ["qc-jobs"], doc)
    assert set(doc["unreadable"]) == {"events/n1", "events/n2"}
    assert doc["logged"] == [] and doc["events"] == []
