"""NATS's options, configuration and claims, without a cluster: what a
server's nats.conf says, what is refused by name, what each setup claims."""

import pytest

from harness.nodes.existing import Existing, ExistingNode
from harness.nodes.remote import NodeSpec
from harness.options import OptionError
from workloads.nats.client import NatsQueueOptions, seconds
from workloads.nats.db import Nats, NatsOptions, group_behind
from workloads.nats.dist import check_version, version_key
from workloads.nats.files import DEFAULT_FILE_KINDS, FILE_KINDS, file_kind, with_older_blocks
from workloads.nats.system import NatsSystem


class Node:
    def __init__(self, name: str, host: str):
        self.name = name
        self.spec = NodeSpec(name=name, host=host)


NODES = [Node(f"n{i}", f"10.0.0.{i}") for i in (1, 2, 3)]


def test_each_server_listens_on_its_own_address_and_routes_to_the_others():
    db = Nats(NODES, NatsOptions(base="/data"))
    conf = db.config(NODES[1])
    assert 'server_name: "n2"' in conf
    assert 'listen: "10.0.0.2:4222"' in conf and 'http: "10.0.0.2:8222"' in conf
    assert 'routes: ["nats://10.0.0.1:6222", "nats://10.0.0.3:6222"]' in conf
    assert 'store_dir: "/data/n2/nats/data"' in conf
    assert "sync_interval" not in conf  # the server's own default (2m) is left alone
    always = Nats(NODES, NatsOptions(base="/data", sync="always")).config(NODES[0])
    assert 'sync_interval: "always"' in always
    assert db.identity(NODES[0]) == "-c /data/n1/nats/etc/nats.conf"


@pytest.mark.parametrize(
    "given, named",
    [
        ({"sync": "sometimes"}, "--nats-sync"),
        ({"sync": "0s"}, "--nats-sync"),
        ({"version": "latest"}, "--nats-version"),
        # 2.9's config parser refuses the field (found on a run): refused before any node
        ({"version": "debian", "sync": "always"}, "--nats-sync: Debian's nats-server .* no sync"),
        ({"version": "debian", "upgrade_to": "2.15.2", "sync": "1s"}, "--nats-sync: Debian"),
        ({"upgrade_to": "debian"}, "--nats-upgrade-to debian: not newer than --nats-version"),
        ({"version": "2.15.2", "upgrade_to": "2.15.2"}, "--nats-upgrade-to 2.15.2: not newer"),
        ({"upgrade_to": "2.16"}, "--nats-upgrade-to: '2.16' is not x.y.z"),
        ({"dedupe_window": "2 minutes"}, "--dedupe-window"),
        ({"replicas": 6}, "--replicas"),
        ({"replicas": 5}, "--replicas"),  # more than the 3 nodes
        ({"ack_wait": 0.1}, "--ack-wait"),
        ({"max_deliver": -1}, "--max-deliver"),
        ({"consumers": "push"}, "--nats-consumers"),
        ({"consumers": "ordered", "max_age": "1h"}, "--nats-consumers ordered: not with --max-age"),
        ({"no_such": 1}, "no_such"),
    ],
)
def test_bad_options_are_refused_by_name(given, named):
    with pytest.raises((OptionError, ValueError), match=named):
        NatsSystem.settings(given, nodes=3)


def test_versions_and_windows_read_as_the_server_reads_them():
    check_version("2.15.2")
    check_version("debian")
    assert version_key("debian") < version_key("2.10.0") < version_key("2.15.2")
    assert seconds("2m") == 120 and seconds("30s") == 30 and seconds("1h") == 3600
    assert NatsQueueOptions(dedupe_window="off").msg_ids is False
    assert NatsQueueOptions().msg_ids is True


def test_a_rolling_upgrade_starts_each_node_on_the_server_it_runs_now():
    db = Nats(NODES, NatsOptions(base="/data", version="debian", upgrade_to="2.15.2"))
    assert db.versions() == ["debian", "2.15.2"]
    assert db.node_versions() == {"n1": "debian", "n2": "debian", "n3": "debian"}
    assert db.server("debian") == "/usr/sbin/nats-server"
    assert NatsSystem.gate_rolling("debian", "2.15.2") == {
        "version": "debian",
        "upgrade_to": "2.15.2",
    }


def test_claims_follow_the_dedupe_window_and_quote_the_sync_interval():
    base = {"sync": "2m", "dedupe_window": "2m", "cross_check": "off"}
    claims, notes = NatsSystem.claims_of(base)
    assert claims == ["at-least-once", "per-partition-order"]
    assert any("may fail to recover the most recently acknowledged" in n for n in notes)
    claims, notes = NatsSystem.claims_of({**base, "dedupe_window": "off"})
    assert claims == ["at-least-once"]
    assert any("without Nats-Msg-Id" in n for n in notes)
    _, notes = NatsSystem.claims_of({**base, "sync": "always"})
    assert any("fsync after every message" in n for n in notes)


def test_ordered_readers_claim_what_durable_consumers_do_but_need_no_sink():
    base = {"sync": "2m", "dedupe_window": "2m", "cross_check": "off"}
    for consumers in ("durable", "ordered"):
        claims, notes = NatsSystem.claims_of({**base, "consumers": consumers})
        assert claims == ["at-least-once", "per-partition-order"], consumers
        told = [n for n in notes if n.startswith("no at-most-once claim")]
        assert len(told) == 1 and ("every ordered reader" in told[0]) == (consumers == "ordered")
    with pytest.raises(OptionError, match="--nats-consumers ordered: no --sink"):
        NatsSystem.settings({"consumers": "ordered"}, sink="dedupe", nodes=3)
    NatsSystem.settings({"consumers": "durable"}, sink="dedupe", nodes=3)


def test_a_max_age_shorter_than_the_run_claims_no_at_least_once():
    base = {"sync": "2m", "dedupe_window": "2m", "cross_check": "off", "span_s": 900.0}
    claims, notes = NatsSystem.claims_of({**base, "max_age": "14m"})
    assert claims == ["per-partition-order"]
    assert any("MaxAge is shorter than the run" in n for n in notes)
    for kept in ("15m", "1h", "off"):
        claims, notes = NatsSystem.claims_of({**base, "max_age": kept})
        assert claims == ["at-least-once", "per-partition-order"], kept
        assert not any("MaxAge" in n for n in notes)
    with pytest.raises(ValueError, match="--max-age: '2 hours' is not a duration"):
        NatsQueueOptions(max_age="2 hours")
    with pytest.raises(ValueError, match="--max-age: 1m is shorter than --dedupe-window 2m"):
        NatsQueueOptions(max_age="1m")
    NatsQueueOptions(max_age="1m", dedupe_window="1m")
    NatsQueueOptions(max_age="1s", dedupe_window="off")


def existing(**credentials) -> Existing:
    node = ExistingNode("n1", "10.0.0.1:4222", {}, [], None)
    return Existing("nats", "nats", {"n1": node}, credentials)


@pytest.mark.parametrize(
    "given, credentials, named",
    [
        ({"version": "2.14.9"}, {}, "--nats-version: configures brokers the tool runs"),
        ({"sync": "always"}, {}, "--nats-sync: configures brokers"),
        ({}, {"vhost": "/"}, "'vhost' is not for NATS's clients"),
        ({}, {"user": "app"}, "'user' needs its 'password'"),
        ({}, {"credentials_file": "/nonexistent/app.creds"}, "'credentials_file' .* not a file"),
    ],
)
def test_an_existing_cluster_keeps_its_settings_and_needs_usable_credentials(
    given, credentials, named
):
    with pytest.raises(OptionError, match=named):
        NatsSystem.settings(given, existing=existing(**credentials), nodes=3)


def test_an_existing_cluster_s_credentials_reach_the_clients_connection(tmp_path):
    creds = tmp_path / "app.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\n")
    _, q = NatsSystem.settings(
        {"replicas": 1}, existing=existing(user="app", password="s3"), nodes=1
    )
    assert q.credentials() == {"user": "app", "password": "s3"}
    assert "s3" not in repr(q)
    _, q = NatsSystem.settings({}, existing=existing(credentials_file=str(creds)), nodes=3)
    assert q.credentials() == {"user_credentials": str(creds)}
    assert NatsQueueOptions().credentials() == {}  # the tool's own servers: none


@pytest.mark.parametrize(
    "rel, kind",
    [
        ("$G/streams/qc-jobs/msgs/1.blk", "stream-block"),
        ("$G/streams/qc-jobs/msgs/12.blk", "stream-block"),
        ("$G/streams/qc-jobs/msgs/index.db", "stream-index"),
        ("$G/streams/qc-jobs/meta.inf", "stream-meta"),
        ("$G/streams/qc-jobs/meta.sum", "stream-meta"),
        ("$G/streams/qc-jobs/obs/queuecheck/o.dat", "consumer"),
        ("$SYS/_js_/S-R3F-x7Hk2/msgs/1.blk", "raft-log"),
        ("$SYS/_js_/_meta_/msgs/index.db", "raft-log"),
        ("$SYS/_js_/C-R3F-a1/snapshots/snap.2.180", "raft-snapshot"),
        ("$SYS/_js_/_meta_/tav.idx", "raft-state"),
        ("$SYS/_js_/_meta_/peers.idx", "raft-state"),
        ("$G/streams/qc-jobs/msgs/1.blk.tmp", None),
        ("$G/accounts.json", None),
    ],
)
def test_each_file_of_the_store_has_its_kind(rel, kind):
    assert file_kind(rel) == kind
    assert kind is None or kind in FILE_KINDS
    assert set(DEFAULT_FILE_KINDS) <= set(FILE_KINDS) == set(Nats.FILE_KINDS)


def test_older_blocks_are_each_streams_blocks_but_its_last():
    """stream-block-older: every message block but the one a server writes
    (the highest-numbered of its stream, 10 after 9, not after 2); asked
    with stream-block, that one keeps its kind and no block comes twice."""
    s = "/d/jetstream/$G/streams"
    found = [
        ("raft-log", "/d/jetstream/$SYS/_js_/S-R3F-x/msgs/1.blk", 70),
        ("stream-block", f"{s}/a/msgs/1.blk", 90),
        ("stream-block", f"{s}/a/msgs/10.blk", 10),
        ("stream-block", f"{s}/a/msgs/2.blk", 90),
        ("stream-block", f"{s}/b/msgs/3.blk", 40),
    ]
    older = [("stream-block-older", f"{s}/a/msgs/{n}.blk", 90) for n in (1, 2)]
    assert with_older_blocks(found, ["stream-block-older"]) == older
    assert with_older_blocks(found, ["stream-block-older", "stream-block"]) == [
        ("stream-block", f"{s}/a/msgs/10.blk", 10),
        ("stream-block", f"{s}/b/msgs/3.blk", 40),
        *older,
    ]
    assert with_older_blocks(found, ["stream-block", "raft-log"]) == sorted(found)
    assert "stream-block-older" in FILE_KINDS


def test_a_group_is_whole_only_with_a_leader_and_every_replica_current():
    """What the membership move waits for before taking a member out: the
    cluster info of a stream's or consumer's Raft group, as the servers give it."""
    whole = {"leader": "n1", "replicas": [{"name": "n2", "current": True, "lag": 0}]}
    assert group_behind("stream s", whole) is None
    assert group_behind("stream s", {}) == "stream s: no leader"
    late = {"leader": "n1", "replicas": [{"name": "n3", "current": False, "lag": 812}]}
    assert group_behind("consumer c", late) == "consumer c: n3's replica not current (lag 812)"
    assert group_behind("stream s", {"leader": "n2"}) is None  # R1: no followers


def jsz(leader, replicas=None, num_replicas=3):
    cluster = {"name": "queuecheck", "leader": leader}
    if replicas is not None:
        cluster["replicas"] = [{"name": r, "current": True} for r in replicas]
    return [{"name": "qc-jobs", "cluster": cluster, "config": {"num_replicas": num_replicas}}]


@pytest.mark.parametrize(
    "answers, leader",
    [
        # just restarted, no Raft group yet: each names itself, with no
        # replicas (clusterInfo's placeholder); nobody leads
        ({"n1": jsz("n1"), "n2": jsz("n2"), "n3": []}, None),
        # a follower names the leader; the leader says so itself, with replicas
        ({"n1": jsz("n2"), "n2": jsz("n2", ["n1", "n3"]), "n3": []}, "n2"),
        # a placeholder beside a follower's word: the follower is believed
        ({"n1": jsz("n1"), "n2": jsz("n3"), "n3": []}, "n3"),
        # a stream of one replica: its host names itself, and that is so
        ({"n1": [], "n2": jsz("n2", num_replicas=1), "n3": []}, "n2"),
    ],
)
def test_a_stream_s_leader_is_one_a_server_that_has_its_raft_group_names(
    monkeypatch, answers, leader
):
    db = Nats(NODES, NatsOptions(base="/data"))
    db.test_streams = ["qc-jobs"]
    monkeypatch.setattr(db, "streams_on", lambda node, config=False: answers[node.name])
    assert db.primaries() == ([leader] if leader else [])
