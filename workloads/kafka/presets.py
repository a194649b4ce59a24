"""Kafka's demo run, matrix rows and findings rows (workloads/presets.py)."""

from __future__ import annotations

from typing import Any

from ..presets import ENQUEUE_THEN_DRAIN, Finding, KnownFinding, Preset, Presets

TXN_SINK = "kafka-txn"  # the consume-transform-produce sink (txn_sink.py)

# The faults that catch unclean election. A full cut also cuts the leader from
# the KRaft controllers: its in-sync set cannot shrink and its writes wait (0
# of 10 runs caught). Cut replication alone: the leader shrinks the set to
# itself (replica.lag.time.max.ms, 5 s) and, if min.insync.replicas allows,
# acknowledges alone; 10 s into the cut it is killed, and the controller,
# finding no in-sync replica alive, may elect one that lacks those writes
# (the plan nemesis/plans/kafka-cut-then-kill.toml: measured as the flags'
# overlapping rhythm, `leaders` at 20 s, whose moments it keeps).
REPLICATION_CUT_THEN_KILL = {"nemesis_plan": "kafka-cut-then-kill", **ENQUEUE_THEN_DRAIN}

# REPLICATION_CUT_THEN_KILL with the leader's disk filled instead of a
# kill: its next write fails with ENOSPC, its only log directory goes
# offline and it halts, as a kill would stop it (data on lazyfs).
REPLICATION_CUT_THEN_DISK_FULL = {
    "nemesis": ["partition", "disk-full"],
    "fault_targets": ["primaries"],
    "partition_shapes": ["isolate-primary-data"],
    "nemesis_overlap": True,  # the disk full half an interval into the cut
    "nemesis_interval": 20.0,
    **ENQUEUE_THEN_DRAIN,
}

# Transactions ending under the faults that end them: the transaction
# coordinator killed, and a producer inside a transaction fenced by another
# taking its transactional id.
TXN_COORDINATOR_KILLS_AND_FENCES = {
    "nemesis": ["kill", "fence"],
    "fault_targets": ["txn-coordinator"],
    "nemesis_interval": 5.0,
}
# The group coordinator killed and cut off, and first a consumer that crashes
# once it acknowledged a delivery: with one consumer a partition, its
# partition must change hands (a KIP-848 group keeps its assignment through
# its coordinator's faults).
GROUP_COORDINATOR_FAULTS = {
    "nemesis": ["partition", "kill", "crash-client"],
    "fault_targets": ["group-coordinator"],
    "partition_shapes": ["isolate-coordinator"],
    "crash_point": "after-ack",
    "concurrency": 6,
    "producers": 3,
    # every kind strikes at least once whatever their order: a round gives the
    # partition and the kill an interval of pace and one held each (up to 40 s
    # before the last kind starts); 40 s left the crash never started
    "time_limit": 60.0,
}
# A stopped broker's test-topic log segments bit-flipped or cut short
# (nemesis/file_corruption.py), nothing read before the drain.
SEGMENT_DAMAGE = {
    "nemesis": ["file-corruption"],
    "file_faults": ["bitflip", "truncate"],
    "nemesis_interval": 10.0,
    **ENQUEUE_THEN_DRAIN,
}
# The partition leader's clock set two hours ahead (libfaketime) every 10 s,
# set back at each stop; one partition, so the leader is struck every time.
LEADER_CLOCK_AHEAD = {
    "nemesis": ["clock"],
    "clock_faults": ["ahead"],
    "clock_max": 7200.0,
    "fault_targets": ["primaries"],
    "nemesis_interval": 10.0,
    **ENQUEUE_THEN_DRAIN,
}
# One transaction in ten aborted by its producer once its writes are in the
# log: whether a consumer reads them then depends on its isolation level
# alone, not on a fault landing between a write and its transaction's end.
# Consumers on librdkafka with a dedupe sink, clients crashing at random
# moments of their processing: a crashed confluent consumer is closed (the
# client runs in this process), as an application stopped by a SIGTERM is.
CONFLUENT_CRASHES: dict[str, Any] = {
    "nemesis_profile": "client-crashes",
    "system": "kafka",
    "sink": "dedupe",
    "system_options": {"acks": "all", "client": "confluent"},
}

JAVA_TXN = {"acks": "all", "txn": True, "client": "java", "send_batch": 3, "txn_abort": 0.1}


DEMO = Preset(
    "demo-kafka-acks-all",
    "Kafka KRaft, acks=all, idempotent producer, min.insync.replicas=2, consumer group",
    {
        "system": "kafka",
        "nemesis": ["partition", "kill", "pause"],
        "system_options": {"acks": "all", "idempotence": True},
    },
)
MATRIX = [
    Preset(
        "kafka-acks-all-dedupe",
        "Kafka acks=all, idempotent producer, offsets committed after the effect, dedupe sink",
        {"system": "kafka", "sink": "dedupe", "rate": 5.0, "system_options": {"acks": "all"}},
    ),
    Preset(
        "kafka-transactions",
        "Kafka transactional producers; consume-transform-produce with the offsets in the "
        "output's transaction, read_committed",
        {
            "system": "kafka",
            "sink": TXN_SINK,
            # 20 messages a transaction: with ten transactional clients and three
            # brokers on two cores a transaction takes a few hundred ms
            "system_options": {"acks": "all", "txn": True, "send_batch": 20},
        },
    ),
    *(
        Preset(
            f"kafka-transactions-java-v{tv}",
            f"Kafka transactional producers on the Java client, transactions v{tv} "
            f"(transaction.version={tv}{', KIP-890' if tv == 2 else ''}), read_committed "
            "consumers, dedupe sink",
            {
                "system": "kafka",
                "sink": "dedupe",
                "rate": 5.0,
                "system_options": {
                    "acks": "all",
                    "txn": True,
                    "client": "java",
                    "transaction_version": tv,
                },
            },
        )
        for tv in (1, 2)
    ),
    Preset(
        "kafka-share-dedupe",
        "Kafka share group (KIP-932): records acquired, the effect, then accepted "
        "(or released, rejected); dedupe sink",
        {
            "system": "kafka",
            "sink": "dedupe",
            "rate": 5.0,
            "system_options": {"acks": "all", "client": "confluent", "consumer_mode": "share"},
        },
    ),
]
# A partition leader decommissioned while every client produces (the
# membership fault aimed at the primaries). A static quorum: its partitions
# move through the Admin API alone, in 1-3 s, where a change of a dynamic
# quorum's voters takes two JVMs of kafka-metadata-quorum (10-30 s here, one
# change a run); more moves, more leadership changes under the producers.
DECOMMISSION_LEADER: dict[str, Any] = {
    "nemesis": ["membership"],
    "fault_targets": ["primaries"],
    "nemesis_interval": 5.0,
    **ENQUEUE_THEN_DRAIN,
}

FINDINGS = [
    Finding(
        Preset(
            "kafka-acks1-leader-isolated",
            "Kafka acks=1 (no idempotence), a partition leader isolated",
            {
                "nemesis_profile": "leaders",
                # no kills: with a leader per node, "the leaders" are every
                # broker, and a crash keeps the page cache
                "nemesis": ["partition"],
                "partition_shapes": ["isolate-primary"],  # as measured: no coordinators
                **ENQUEUE_THEN_DRAIN,
                "system": "kafka",
                "system_options": {"acks": "1"},
            },
        ),
        {"at-least-once": False},
        "acks=1 is acknowledged by the leader alone: a leader cut off from its "
        "followers keeps acknowledging, a follower is elected, and the old leader "
        "truncates what only it had",
    ),
    Finding(
        Preset(
            "kafka-unclean-min-isr-1",
            "Kafka acks=all, min.insync.replicas=1, unclean leader election, the "
            "leader's replication cut, then the leader killed",
            {
                **REPLICATION_CUT_THEN_KILL,
                "system": "kafka",
                "system_options": {
                    "acks": "all",
                    "min_insync_replicas": 1,
                    "unclean_leader_election": True,
                    "partitions": 1,  # one leader: the kill strikes it alone
                },
            },
        ),
        {"at-least-once": False},
        "acks=all means all of the in-sync replicas, and with min.insync.replicas=1 that "
        "can be the leader alone; unclean election then makes a replica that lacks its "
        "writes the leader",
    ),
    Finding(
        Preset(
            "kafka-min-isr-2-replication-cut",
            "Kafka acks=all, min.insync.replicas=2, clean election, the leader's "
            "replication cut, then the leader killed",
            {
                # kafka-unclean-min-isr-1's faults, seed for seed: what that row
                # loses comes from its configuration, not from the faults
                **REPLICATION_CUT_THEN_KILL,
                "system": "kafka",
                "system_options": {"acks": "all", "partitions": 1},
            },
        ),
        {"at-least-once": True},
        "the control of kafka-unclean-min-isr-1: the leader cut off from its followers "
        "cannot acknowledge alone (two in-sync replicas needed), and only an in-sync "
        "replica may follow it",
    ),
    Finding(
        Preset(
            "kafka-acks-all-min-isr-2",
            "Kafka acks=all, idempotent producer, min.insync.replicas=2, leaders isolated "
            "and killed",
            {
                "nemesis_profile": "leaders",
                # as measured: the leaders, not the coordinators the profile adds
                "fault_targets": ["primaries"],
                "partition_shapes": ["isolate-primary"],
                **ENQUEUE_THEN_DRAIN,
                "system": "kafka",
                "system_options": {"acks": "all"},
            },
        ),
        {"at-least-once": True},
        "the control: every acknowledged write is on two replicas before the ack, and "
        "only an in-sync replica may lead",
    ),
    Finding(
        Preset(
            "kafka-share-group",
            "Kafka share group (KIP-932), acks=all: consumers crashing with records "
            "acquired (after their effect, before acknowledging), leaders killed",
            {
                "system": "kafka",
                "nemesis_profile": "leaders",
                "fault_targets": ["primaries"],  # as measured: no coordinators
                # one fault at a time: under partitions the share consumers of
                # confluent-kafka 2.16 stall, and the drain would do all the work
                "nemesis": ["crash-client", "kill"],
                "crash_point": "after-effect",
                "system_options": {
                    "acks": "all",
                    "client": "confluent",
                    "consumer_mode": "share",
                },
            },
        ),
        {"share-at-least-once": True, "share-delivery-limit": True, "share-redelivery": True},
        "the control: a record whose consumer died comes back when its lock expires, a "
        "released one at once, until the delivery limit archives it",
    ),
    Finding(
        Preset(
            "kafka-acks-all-power-loss",
            "Kafka acks=all, min.insync.replicas=2, data on lazyfs, every node loses power at once",
            {
                "nemesis_profile": "power-loss",
                **ENQUEUE_THEN_DRAIN,
                "system": "kafka",
                "system_options": {"acks": "all", "lazyfs": True},
            },
        ),
        # Gone whether or not a consumer had read it: an acknowledged write is
        # lost, or its offset comes back holding another write
        {"at-least-once": False, "per-partition-order": False},
        "Kafka acknowledges once the in-sync replicas hold a write, in memory, and leaves "
        "the fsync to the OS: when every replica loses power at once, what none had "
        "synced is gone, acks=all or not, and its offsets are handed out again",
    ),
    Finding(
        Preset(
            "kafka-flush-every-message-power-loss",
            "Kafka acks=all, log.flush.interval.messages=1, data on lazyfs, every node "
            "loses power at once",
            {
                "nemesis_profile": "power-loss",
                **ENQUEUE_THEN_DRAIN,
                "system": "kafka",
                "system_options": {"acks": "all", "lazyfs": True, "flush_messages": 1},
            },
        ),
        {"at-least-once": True, "per-partition-order": True},
        "the control: each replica fsyncs a write before it counts as in sync, so a "
        "whole-cluster power loss keeps every acknowledged write (at a throughput cost)",
    ),
    Finding(
        Preset(
            "kafka-acks1-unclean-disk-full",
            "Kafka acks=1, unclean leader election, data on lazyfs, the leader's "
            "replication cut, then its disk full",
            {
                **REPLICATION_CUT_THEN_DISK_FULL,
                "system": "kafka",
                "system_options": {
                    "acks": "1",
                    "unclean_leader_election": True,
                    "lazyfs": True,
                    "partitions": 1,  # one leader: the disk fills under it alone
                },
            },
        ),
        {"at-least-once": False},
        "a leader cut off from its followers acknowledges alone (acks=1) and shrinks its "
        "in-sync set to itself; its full disk halts it, and unclean election makes a "
        "follower that lacks everything since the cut the leader",
    ),
    Finding(
        Preset(
            "kafka-acks-all-disk-full",
            "Kafka acks=all, min.insync.replicas=2, data on lazyfs, the partition leader's "
            "disk full",
            {
                "nemesis": ["disk-full"],
                "fault_targets": ["primaries"],  # one partition: its leader every time
                **ENQUEUE_THEN_DRAIN,
                "system": "kafka",
                "system_options": {"acks": "all", "lazyfs": True, "partitions": 1},
            },
        ),
        {"at-least-once": True},
        "the control: an acknowledged write is on two replicas before the ack, so a "
        "leader halting on a full disk takes none of them with it",
    ),
    *(
        Finding(
            Preset(
                f"kafka-elr-{elr}-power-loss-all-but-one",
                f"Kafka acks=all, min.insync.replicas=2, data on lazyfs, eligible leader "
                f"replicas {elr}, all nodes but one lose power at once, the last one standing "
                "struck next",
                {
                    "nemesis": ["power-loss"],
                    # every node but one; the survivor of a cut is struck in the next
                    "fault_targets": ["all-but-one"],
                    # the next cut 3-6 s after the power comes back (half an
                    # interval to one): every 10 s, two runs in ten struck after
                    # the restarted replicas had fetched everything back
                    "nemesis_interval": 6.0,
                    **ENQUEUE_THEN_DRAIN,
                    "system": "kafka",
                    "system_options": {"acks": "all", "lazyfs": True, "elr": elr},
                },
            ),
            {"at-least-once": False},
            teaches,
        )
        for elr, teaches in (
            (
                "off",
                "the survivor of a power cut holds, in memory, the only copies of the "
                "acknowledged writes the others lost with their power; struck next, before the "
                "restarted replicas fetched them back, it takes them along, and without "
                "eligible leader replicas (4.0's default) a replica that came back empty may "
                "even be elected over one that had caught up, which then truncates",
            ),
            (
                "on",
                "eligible leader replicas keep a replica that lost its unsynced writes from "
                "being elected over one that holds them, but cannot bring back writes whose "
                "only copies were in the memory of the nodes that lost power: the same cuts "
                "lose the same way",
            ),
        )
    ),
    Finding(
        Preset(
            "kafka-java-txn-read-uncommitted",
            "Kafka transactions on the Java client (v2), read_uncommitted consumers, the "
            "transaction coordinator killed and producers fenced",
            {
                **TXN_COORDINATOR_KILLS_AND_FENCES,
                "system": "kafka",
                "system_options": {**JAVA_TXN, "isolation_level": "read_uncommitted"},
            },
        ),
        {"read-committed": False},
        "a read_uncommitted consumer is handed a transaction's records as soon as they "
        "are written: those of a transaction then aborted (by its producer, fenced, or "
        "its coordinator gone) are read (aborted reads, G1a)",
    ),
    Finding(
        Preset(
            "kafka-java-txn-v2-fenced",
            "Kafka transactions on the Java client, transactions v2 (KIP-890), "
            "read_committed consumers, the transaction coordinator killed and producers "
            "fenced",
            {
                # kafka-java-txn-read-uncommitted's faults, seed for seed
                **TXN_COORDINATOR_KILLS_AND_FENCES,
                "system": "kafka",
                "system_options": {**JAVA_TXN, "transaction_version": 2},
            },
        ),
        {"read-committed": True, "at-least-once": True},
        "the control: a fenced or coordinator-less transaction is aborted and a "
        "read_committed consumer never sees its records; what committed is all there",
        min_acknowledged=100,  # measured: 135 to 1,536 acknowledged a run (transactions)
    ),
    *(
        Finding(
            Preset(
                f"kafka-kip848-coordinator-faults-{client}",
                f"Kafka consumer group on KIP-848's consumer protocol ({client}): the group "
                "coordinator killed and cut off, a consumer crashing after it acknowledged "
                "a delivery, one consumer a partition",
                {
                    **GROUP_COORDINATOR_FAULTS,
                    "system": "kafka",
                    "system_options": {
                        "acks": "all",
                        "client": client,
                        "group_protocol": "consumer",
                    },
                },
            ),
            {"at-least-once": True, "single-owner": True},
            "the control: the coordinator's faults and a member's crash move partitions, "
            "and none is read by two members at once (KAFKA-16147) or lost",
        )
        for client in ("confluent", "java")
    ),
    Finding(
        Preset(
            "kafka-java-share-coordinator",
            "Kafka share group (KIP-932) on the Java client's KafkaShareConsumer: its "
            "share coordinator killed, consumers crashing with records acquired (after "
            "their effect, before acknowledging)",
            {
                "system": "kafka",
                "nemesis": ["crash-client", "kill"],
                "fault_targets": ["share-coordinator"],
                "crash_point": "after-effect",
                "system_options": {"acks": "all", "client": "java", "consumer_mode": "share"},
            },
        ),
        {"share-at-least-once": True, "share-delivery-limit": True, "share-redelivery": True},
        "the control: the share partitions' state survives its coordinator's deaths: a "
        "record whose consumer died comes back, none past the delivery limit",
    ),
    Finding(
        Preset(
            "kafka-transactions",
            "Kafka transactions, consume-transform-produce, client crashes",
            {
                "nemesis_profile": "client-crashes",
                "system": "kafka",
                "sink": TXN_SINK,
                "system_options": {"acks": "all", "txn": True, "send_batch": 20},
            },
        ),
        {"exactly-once-effect": True},
        "the control for effects: the output and the consumed offsets commit in one "
        "transaction, so a crashed consumer's work is aborted and redone once",
    ),
    Finding(
        Preset(
            "kafka-python-txn-missed-generation",
            "Kafka transactions on kafka-python, consume-transform-produce, the transaction "
            "coordinator killed and producers fenced, client crashes",
            {
                "system": "kafka",
                "sink": TXN_SINK,
                "nemesis": ["kill", "fence", "crash-client"],
                "fault_targets": ["txn-coordinator"],
                "nemesis_interval": 5.0,
                "system_options": {"acks": "all", "txn": True, "client": "kafka-python"},
            },
        ),
        {"exactly-once-effect": False},
        "kafka-python's eager rebalance keeps a partition's position across a generation "
        "its member missed (a SyncGroup that failed on a new rebalance): given the "
        "partition back, it reads from where it was, not from the offset the member "
        "that held it meanwhile committed, and its transactions commit that input's "
        "output a second time; Java's consumer forgets the positions on every eager "
        "revoke (KIP-447's exactly-once rests on that)",
        known_finding=KnownFinding(
            1,
            17,
            "40 s, seeds 1 to 10 once and 1 to 5 with seed 2 twice, Kafka 4.3.1, "
            "kafka-python 3.0.12",
            "docs/findings.md: kafka-python, a missed generation",
        ),
    ),
    Finding(
        Preset(
            "kafka-auto-commit-confluent",
            "Kafka consumer group on librdkafka with enable.auto.commit, dedupe sink, client "
            "crashes",
            {
                **CONFLUENT_CRASHES,
                "system_options": {**CONFLUENT_CRASHES["system_options"], "auto_commit": True},
            },
        ),
        {"exactly-once-effect": False},
        "librdkafka stores a record's offset as it hands the record over and commits what "
        "it stored on a timer and as the consumer closes: a consumer stopped after its "
        "poll and before its effect (closed, as on a SIGTERM) has committed records it never "
        "processed, and no one gets them again (the at-most-once consumer)",
    ),
    Finding(
        Preset(
            "kafka-commit-after-effect-confluent",
            "Kafka consumer group on librdkafka committing after each effect, dedupe sink, "
            "client crashes",
            CONFLUENT_CRASHES,
        ),
        {"exactly-once-effect": True},
        "the control: the row above's crashes, seed for seed, with the offsets committed "
        "only once the effect is applied; a stopped consumer's records come again and the "
        "sink applies each id once",
    ),
    Finding(
        Preset(
            "kafka-file-corruption-every-replica",
            "Kafka acks=all, min.insync.replicas=2, every broker killed at once and a log "
            "segment of each bit-flipped or cut short",
            {
                **SEGMENT_DAMAGE,
                "fault_targets": ["all"],
                "system": "kafka",
                "system_options": {"acks": "all", "idempotence": True},
            },
        ),
        {"at-least-once": False},
        "each broker truncates its log at the damage it finds on its unclean start; a "
        "damaged replica can be elected leader, and the others then truncate to it: "
        "acknowledged writes past its cut are gone from every replica",
    ),
    Finding(
        Preset(
            "kafka-file-corruption-one-replica",
            "Kafka acks=all, min.insync.replicas=2, one broker at a time killed and a log "
            "segment of its bit-flipped or cut short",
            {
                **SEGMENT_DAMAGE,
                "system": "kafka",
                "system_options": {"acks": "all", "idempotence": True},
            },
        ),
        {"at-least-once": True, "per-partition-order": True},
        "the control: the damaged broker truncates at the damage and fetches the rest "
        "from the leader, which holds every acknowledged write",
    ),
    Finding(
        Preset(
            "kafka-file-corruption-one-replica-cluster-crash",
            "Kafka acks=all, min.insync.replicas=2, one partition, every broker killed at "
            "once and the partition leader's log segment cut short",
            {
                **SEGMENT_DAMAGE,
                "file_faults": ["truncate"],
                "file_kinds": ["log"],
                "file_restart": "cluster-crash",
                "fault_targets": ["primaries"],
                "system": "kafka",
                "system_options": {"acks": "all", "idempotence": True, "partitions": 1},
            },
        ),
        {"at-least-once": False},
        "the control a reader expects of two whole replicas, not one Kafka promises: after "
        "every broker crashed, the controller hands the partition to the replica it last "
        "saw in sync (the one left alone in the in-sync set; with eligible leader "
        "replicas, the last known leader), whatever its log holds; when that is the one "
        "cut short, the other two truncate to it",
        known_finding=KnownFinding(
            8,
            10,
            "40 s, seeds 1 to 10, Kafka 4.3.1, ELR on",
            "docs/faults.md: Eligible leader replicas",
        ),
    ),
    *(
        Finding(
            Preset(
                name,
                f"Kafka acks=all, min.insync.replicas=2, {kept}, the partition leader's wall "
                "clock set two hours ahead",
                {
                    **LEADER_CLOCK_AHEAD,
                    "system": "kafka",
                    "system_options": {
                        "acks": "all",
                        "faketime": True,
                        "partitions": 1,
                        **retention,
                    },
                },
            ),
            expect,
            teaches,
        )
        for name, kept, retention, expect, teaches in (
            (
                "kafka-retention-clock-ahead",
                "retention.ms one hour (longer than the run)",
                {"retention_ms": 3_600_000},
                {"at-least-once": False},
                "time-based retention compares a segment's newest timestamp, set by the "
                "producer's clock, with the broker's own wall clock: one broker whose clock "
                "jumps past the retention deletes records nobody has read, and as their "
                "leader it moves the log's start forward on every replica",
            ),
            (
                "kafka-clock-ahead-default-retention",
                "Kafka's default retention (7 days)",
                {},
                {"at-least-once": True},
                "the control: the same jumps stay inside a week's retention, and nothing else "
                "Kafka times on the wall clock (the in-sync set, sessions) drops an "
                "acknowledged write",
            ),
        )
    ),
    *(
        Finding(
            Preset(
                name,
                f"Kafka {acks}, replication factor 2, a partition leader decommissioned "
                "while producers write: its partitions reassigned to the broker outside "
                "their replicas",
                {
                    **DECOMMISSION_LEADER,
                    "system": "kafka",
                    "system_options": {**client, "replication_factor": 2},
                },
            ),
            expect,
            teaches,
        )
        for name, acks, client, expect, teaches in (
            (
                "kafka-acks1-decommission-leader",
                "acks=1",
                {"acks": "1"},
                {"at-least-once": False},
                "a reassignment moves leadership to a caught-up replica, but acks=1 is "
                "acknowledged by the old leader alone: what it took after its followers' "
                "last fetch, until it learns it leads no more, goes with it",
            ),
            (
                "kafka-acks-all-decommission-leader",
                "acks=all, idempotent",
                {"acks": "all", "idempotence": True},
                {"at-least-once": True},
                "the control: acks=all waits for the in-sync replicas, and leadership moves "
                "only to one of them",
            ),
        )
    ),
]

PRESETS = Presets(demo=DEMO, matrix=MATRIX, findings=FINDINGS)
