"""RabbitMQ's demo run, matrix rows and findings rows (workloads/presets.py)."""

from __future__ import annotations

from typing import Any

from ..presets import ENQUEUE_THEN_DRAIN, Finding, Preset, Presets

# Producers crash with a publish in flight, twice a second, and publish again.
STREAM_PRODUCER_CRASHES: dict[str, Any] = {
    "system": "rabbitmq",
    "nemesis": ["crash-client"],
    "crash_clients": "producers",
    "nemesis_interval": 0.5,
}


DEMO = Preset(
    "demo-rabbitmq-quorum",
    "RabbitMQ quorum queue, publisher confirms, manual acks",
    {
        "system": "rabbitmq",
        "nemesis": ["partition", "kill", "pause"],
        "system_options": {"queue_type": "quorum", "confirms": True, "ack": "manual"},
    },
)
MATRIX = [
    Preset(
        "rabbitmq-auto-ack",
        "RabbitMQ quorum queue, confirms, auto-ack, naive sink",
        {
            "system": "rabbitmq",
            "sink": "naive",
            "system_options": {"queue_type": "quorum", "ack": "auto"},
        },
    ),
    Preset(
        "rabbitmq-manual-naive",
        "RabbitMQ quorum queue, confirms, manual ack after the effect, naive sink",
        {"system": "rabbitmq", "sink": "naive", "system_options": {"queue_type": "quorum"}},
    ),
    Preset(
        "rabbitmq-manual-dedupe",
        "RabbitMQ quorum queue, confirms, manual ack after the effect, dedupe sink",
        {"system": "rabbitmq", "sink": "dedupe", "system_options": {"queue_type": "quorum"}},
    ),
    Preset(
        "rabbitmq-stream-dedupe",
        "RabbitMQ stream, deduplicating producers, readers storing their offsets (a log: "
        "no sink, every reader reads every message)",
        {"system": "rabbitmq", "system_options": {"queue_type": "stream"}},
    ),
]

# One node's Ra write-ahead log (every quorum queue's on that node) cut at a
# random length while its broker is down (nemesis/file_corruption.py): a torn
# tail, which Ra drops on start. A bit flipped mid-file is a hard stop by
# Ra's design (wal_checksum_validation_failure): that node stays down.
WAL_CUTS = {
    "nemesis": ["file-corruption"],
    "file_faults": ["truncate"],
    "file_kinds": ["quorum-wal"],
    "nemesis_interval": 10.0,
    **ENQUEUE_THEN_DRAIN,
    "system": "rabbitmq",
    "system_options": {"queue_type": "quorum"},
}

# The queue's node leaves the cluster the operator's way (stop_app, then
# forget_cluster_node asked of another node) and comes back as a new node of
# the same name at the stop (reset, join_cluster, start_app): a node
# replaced. Every 5 s: one change a run, 5 to 15 s in, then 10 to 15 s out.
NODE_REPLACED = {
    "nemesis": ["membership"],
    "fault_targets": ["primaries"],
    "nemesis_interval": 5.0,
    **ENQUEUE_THEN_DRAIN,
    "system": "rabbitmq",
}

# The quorum queue leader's wall clock set two hours ahead (libfaketime),
# held a minute: the Erlang VM takes its system time from the OS's clock only
# when it next compares the two (17 to 60 s after a jump, measured here).
LEADER_CLOCK_AHEAD = {
    "nemesis": ["clock"],
    "clock_faults": ["ahead"],
    "clock_max": 7200.0,
    "fault_targets": ["primaries"],
    "nemesis_interval": 60.0,
    "time_limit": 130.0,
    **ENQUEUE_THEN_DRAIN,
    "system": "rabbitmq",
}

FINDINGS = [
    Finding(
        Preset(
            "rabbitmq-mirrored-autoheal",
            "RabbitMQ classic mirrored queue, confirms, manual acks, autoheal, the queue "
            "master isolated",
            {
                "nemesis_profile": "leaders",
                **ENQUEUE_THEN_DRAIN,
                # the master cut off alone, longer than net_ticktime (10 s) so both
                # sides notice; no kills (a killed master's mirror takes over cleanly)
                "nemesis": ["partition"],
                "nemesis_interval": 15.0,
                "system": "rabbitmq",
                "system_options": {"queue_type": "mirrored", "partition_handling": "autoheal"},
            },
        ),
        {"at-least-once": False},
        "autoheal restarts the nodes of the losing side, and the mirrors there throw "
        "away messages the master had confirmed (Jepsen, RabbitMQ 2014)",
    ),
    Finding(
        Preset(
            "rabbitmq-auto-ack",
            "RabbitMQ quorum queue, auto-ack, naive sink, client crashes",
            {
                "nemesis_profile": "client-crashes",
                "system": "rabbitmq",
                "sink": "naive",
                "system_options": {"queue_type": "quorum", "ack": "auto"},
            },
        ),
        {"at-least-once": False, "exactly-once-effect": False},
        "auto-ack hands a message over as acknowledged: a consumer that dies before its "
        "effect loses it for good",
    ),
    Finding(
        Preset(
            "rabbitmq-naive-sink",
            "RabbitMQ quorum queue, manual ack after the effect, naive sink, client crashes",
            {
                "nemesis_profile": "client-crashes",
                "system": "rabbitmq",
                "sink": "naive",
                "system_options": {"queue_type": "quorum"},
            },
        ),
        {"exactly-once-effect": False},
        "at-least-once delivery redelivers what a consumer did not ack: a consumer that "
        "died after its effect and before its ack has the effect applied twice",
    ),
    Finding(
        Preset(
            "rabbitmq-quorum",
            "RabbitMQ quorum queue, confirms, manual acks, queue leaders isolated and killed",
            {
                "nemesis_profile": "leaders",
                **ENQUEUE_THEN_DRAIN,
                "nemesis_interval": 15.0,
                # both kinds strike whatever their order: the second starts up to
                # 45 s in (pace, held, pace); 40 s left the kill never started
                "time_limit": 60.0,
                "system": "rabbitmq",
                "system_options": {"queue_type": "quorum"},
            },
        ),
        {"at-least-once": True},
        "the control: a quorum queue confirms a message once a majority has it, and only "
        "a member with every confirmed message can lead",
    ),
    Finding(
        Preset(
            "rabbitmq-dedupe-sink",
            "RabbitMQ quorum queue, manual ack after the effect, dedupe sink, client crashes",
            {
                "nemesis_profile": "client-crashes",
                "system": "rabbitmq",
                "sink": "dedupe",
                "system_options": {"queue_type": "quorum"},
            },
        ),
        {"exactly-once-effect": True},
        "the control for effects: redeliveries still come, and the sink applies each "
        "message id once",
    ),
    Finding(
        Preset(
            "rabbitmq-stream-no-dedupe",
            "RabbitMQ stream, producers without deduplication publishing again what a "
            "crash left unconfirmed",
            {
                **STREAM_PRODUCER_CRASHES,
                "system_options": {"queue_type": "stream", "stream_dedupe": False},
            },
        ),
        {"per-partition-order": False},
        "a confirm lost with the connection says nothing of the publish: published "
        "again without a producer name and publishing id, a message the stream had "
        "already stored is stored twice (an id at two offsets)",
    ),
    Finding(
        Preset(
            "rabbitmq-stream-dedupe",
            "RabbitMQ stream, deduplicating producers (a name, publishing ids) publishing "
            "again what a crash left unconfirmed",
            {
                **STREAM_PRODUCER_CRASHES,
                "system_options": {"queue_type": "stream", "stream_dedupe": True},
            },
        ),
        {"at-least-once": True, "per-partition-order": True},
        "the control: the broker drops a publishing id it already stored for the "
        "producer's name, so the same publish again is stored once",
    ),
    Finding(
        Preset(
            "rabbitmq-quorum-wal-majority-cut",
            "RabbitMQ quorum queue, confirms, every node killed, a majority's Ra write-ahead "
            "logs cut short, the third started once they have elected",
            # one cut, 20 s in. Started together, the whole member often asked
            # for votes first and the cut ones took their tail back (4 of 10)
            {
                **WAL_CUTS,
                "fault_targets": ["majority"],
                "file_restart": "changed-first",
                "nemesis_interval": 20.0,
            },
        ),
        {"at-least-once": False},
        "a quorum queue confirms once a majority has fsynced a message; cut that majority's "
        "logs and they still elect a leader between them, without what was cut",
    ),
    Finding(
        Preset(
            "rabbitmq-quorum-wal-one-cut",
            "RabbitMQ quorum queue, confirms, one node at a time killed and its Ra "
            "write-ahead log cut short",
            WAL_CUTS,
        ),
        {"at-least-once": True},
        "the control: Ra drops the torn tail of the cut log and the member catches up "
        "from the leader, which holds every confirmed message",
    ),
    *(
        Finding(
            Preset(
                f"rabbitmq-{queue}-power-loss",
                f"RabbitMQ {queue} queue, confirms, persistent messages, data on lazyfs, every "
                "node loses power at once",
                {
                    "nemesis_profile": "power-loss",
                    # each cut once every node serves again: a cut while a node
                    # boots can leave a table Erlang's dets was repairing
                    # unreadable, and the node never starts (docs/findings.md, "RabbitMQ,
                    # a power cut while a table is repaired"), a finding of its own
                    "nemesis_await_recovery": True,
                    **ENQUEUE_THEN_DRAIN,
                    "system": "rabbitmq",
                    "system_options": {"queue_type": queue, "lazyfs": True},
                },
            ),
            {"at-least-once": True},
            teaches,
        )
        for queue, teaches in (
            (
                "quorum",
                "the control: Ra fsyncs its write-ahead log before a member counts a message "
                "written, and a majority must have before the confirm, so a power cut of "
                "every node keeps every confirmed message",
            ),
            (
                "classic",
                "the control: a persistent message on a durable queue is confirmed once it "
                "is on disk (RabbitMQ's confirms guide), so a power cut of every node keeps "
                "every confirmed message",
            ),
        )
    ),
    *(
        Finding(
            Preset(
                name,
                f"RabbitMQ quorum queue, confirms, {kept}, the queue leader's wall clock "
                "set two hours ahead for a minute",
                {
                    **LEADER_CLOCK_AHEAD,
                    "system_options": {"queue_type": "quorum", "faketime": True, **ttl},
                },
            ),
            expect,
            teaches,
        )
        for name, kept, ttl, expect, teaches in (
            (
                "rabbitmq-ttl-clock-ahead",
                "x-message-ttl one hour (longer than the run)",
                {"message_ttl": 3_600_000},
                {"at-least-once": False},
                "a quorum queue stamps each message with its leader's time and expires it "
                "once a later command's time passes the TTL: a leader whose clock jumps past "
                "it drops messages nobody has read",
            ),
            (
                "rabbitmq-clock-ahead-no-ttl",
                "no TTL",
                {},
                {"at-least-once": True},
                "the control: without a TTL nothing a quorum queue does on the wall clock "
                "drops a confirmed message",
            ),
        )
    ),
    Finding(
        Preset(
            "rabbitmq-classic-node-replaced",
            "RabbitMQ classic queue, confirms, its node taken out of the cluster "
            "(forget_cluster_node) and joined again as a new node",
            {
                **NODE_REPLACED,
                "system_options": {"queue_type": "classic", "membership": "cluster"},
            },
        ),
        {"at-least-once": False},
        "a classic queue lives on one node: forgetting that node deletes the queue with "
        "every message it held, confirmed or not",
    ),
    Finding(
        Preset(
            "rabbitmq-quorum-node-replaced",
            "RabbitMQ quorum queue, confirms, its leader's node taken out of the cluster "
            "(forget_cluster_node) and joined again as a new node",
            {
                **NODE_REPLACED,
                "system_options": {"queue_type": "quorum", "membership": "cluster"},
            },
        ),
        {"at-least-once": True},
        "the control: forgetting the node takes its member out of the queue, whose other "
        "two hold every confirmed message; the new node gets a new member that catches up",
    ),
]


PRESETS = Presets(demo=DEMO, matrix=MATRIX, findings=FINDINGS)
