"""NATS's matrix rows (the exactly-once story on JetStream) and findings rows
(Jepsen's 2025 JetStream findings as known-bad setups, each beside its
control). The demo stays two brokers."""

from __future__ import annotations

from typing import Any

from ..presets import ENQUEUE_THEN_DRAIN, Finding, KnownFinding, Preset, Presets

# every node loses power at once; the stream's writes not yet fsynced go with it
POWER_LOSS: dict[str, Any] = {
    "nemesis_profile": "power-loss",
    **ENQUEUE_THEN_DRAIN,
    "system": "nats",
}

# an R2 stream's members moved by the JetStream API while servers are killed,
# each fault on its own rhythm (a move takes 8-10 s)
MEMBERSHIP_KILLS: dict[str, Any] = {
    "system": "nats",
    "nemesis": ["membership", "kill"],
    "nemesis_interval": 3,
    "nemesis_overlap": True,
    "fault_targets": ["primaries", "one"],
}

# producers crashing with a publish in flight, twice a second, and publishing it again
PRODUCER_CRASHES: dict[str, Any] = {
    "system": "nats",
    "nemesis": ["crash-client"],
    "crash_clients": "producers",
    "nemesis_interval": 0.5,
}

# A server killed and one of its stream's message blocks or Raft log blocks
# bit-flipped or cut short while it is down (nemesis/file_corruption.py),
# every write fsynced before its ack (Jepsen 2025 lost acknowledged messages
# after such changes on a minority of 2.12.1's servers).
FILE_CHANGES: dict[str, Any] = {
    "system": "nats",
    "nemesis": ["file-corruption"],
    "file_faults": ["bitflip", "truncate"],
    "file_kinds": ["stream-block", "raft-log"],
    "nemesis_interval": 10.0,
    **ENQUEUE_THEN_DRAIN,
    "system_options": {"sync": "always"},
}

# Every server killed at once and, 5 s later, its clock set two hours ahead
# (libfaketime's offset, read by the clocked build), so each starts again
# with its clock ahead; the clocks go back 5 s on (the plan
# nemesis/plans/restart-clock-ahead.toml: measured as the flags' overlapping
# rhythm of kill and clock at 10 s, whose moments it keeps).
RESTART_CLOCK_AHEAD: dict[str, Any] = {
    "system": "nats",
    "nemesis_plan": "restart-clock-ahead",
    **ENQUEUE_THEN_DRAIN,
}

# A durable pull consumer with explicit acks, each acknowledged with a double
# ack (AckSync: the server confirms it took the ack) after the effect; the
# publishers put the message id in Nats-Msg-Id. Under the matrix's client
# crashes a delivery whose ack never landed comes again after AckWait.
MATRIX = [
    Preset(
        "nats-ack-naive",
        "NATS JetStream R3 stream, Nats-Msg-Id, double ack after the effect, naive sink",
        {"system": "nats", "sink": "naive"},
    ),
    Preset(
        "nats-ack-dedupe",
        "NATS JetStream R3 stream, Nats-Msg-Id, double ack after the effect, dedupe sink",
        {"system": "nats", "sink": "dedupe"},
    ),
]

# The known findings' measurement, and where they are written up.
MEASURED = "40 s, seeds 1 to 10, NATS 2.15.2"
WRITE_UP = "docs/nats.md: NATS JetStream"

FINDINGS = [
    Finding(
        Preset(
            "nats-default-sync-power-loss",
            "NATS JetStream R3 stream, the default sync_interval (2m), store on lazyfs, every "
            "node loses power at once",
            {**POWER_LOSS, "system_options": {"lazyfs": True}},
        ),
        {"at-least-once": False},
        "JetStream acknowledges a publish once a majority of the replicas stored it, and "
        "fsyncs every two minutes by default: when every replica loses power at once, what "
        "none had synced is gone (nats-server#7564; the docs warn of it)",
    ),
    Finding(
        Preset(
            "nats-sync-always-power-loss",
            "NATS JetStream R3 stream, sync_interval always, store on lazyfs, every node loses "
            "power at once",
            {**POWER_LOSS, "system_options": {"lazyfs": True, "sync": "always"}},
        ),
        {"at-least-once": True},
        "the control: each server fsyncs a message before it is acknowledged, so a "
        "whole-cluster power loss keeps every acknowledged publish",
    ),
    Finding(
        Preset(
            "nats-sync-always-membership-kills",
            "NATS JetStream R2 stream on three servers, sync_interval always, a member taken "
            "out (peer-remove) whenever the JetStream API takes it, while servers are killed",
            {
                **MEMBERSHIP_KILLS,
                "system_options": {"replicas": 2, "sync": "always", "member_moves": "any-time"},
            },
        ),
        {"at-least-once": False},
        "the control for membership changes: every write fsynced before its ack, members "
        "changed only through JetStream's own API, which places a new replica that catches "
        "up from the others",
        known_finding=KnownFinding(1, 10, MEASURED, WRITE_UP),
    ),
    Finding(
        Preset(
            "nats-file-corruption-majority",
            "NATS JetStream R3 stream, sync_interval always, two of three servers killed at "
            "once and an older message block of each (not the one being written) bit-flipped "
            "or cut short",
            # Older blocks: a message damaged in the block being written is
            # still in the server's Raft log, which repairs it at the
            # restart; aimed at any block the row caught 1 of 10 (docs/nats.md).
            # Every 10 s for 60 s: a stream's first block fills after some
            # 40,000 messages, and a strike before that finds no older block
            # (40 s runs struck every 20 s missed so 1 in 15, every 10 s 1 in 5).
            {
                **FILE_CHANGES,
                "file_kinds": ["stream-block-older"],
                "fault_targets": ["majority"],
                "time_limit": 60.0,
            },
        ),
        {"at-least-once": False, "broker-agrees": False},
        "an acknowledged publish is on a majority of the replicas; damage that majority's "
        "older blocks, which their Raft logs no longer hold, and what was damaged is gone "
        "from those servers' stores, never repaired from the third: a read the cluster "
        "serves from a damaged server misses it",
    ),
    Finding(
        Preset(
            "nats-file-corruption-one",
            "NATS JetStream R3 stream, sync_interval always, one server at a time killed and "
            "a message or Raft log block of it bit-flipped or cut short",
            FILE_CHANGES,
        ),
        {"at-least-once": False},
        "the control: two servers hold every acknowledged message, so the damaged one must "
        "be repaired from them (Jepsen 2025 found 2.12.1 lost acknowledged messages here)",
        known_finding=KnownFinding(1, 10, MEASURED, WRITE_UP),
    ),
    Finding(
        Preset(
            "nats-file-corruption-one-older-block",
            "NATS JetStream R3 stream, sync_interval always, one server at a time killed and "
            "an older message block of it (not the one being written) bit-flipped or cut short",
            {**FILE_CHANGES, "file_kinds": ["stream-block-older"]},
        ),
        # broker-agrees violated in 10 of 10 (the damaged server missing what
        # it had acknowledged); at-least-once in 1 of 10 (the read served from it)
        {"at-least-once": False, "broker-agrees": False},
        "the control aimed where the Raft log no longer repairs: two servers hold every "
        "acknowledged message, so the damaged one must be repaired from them; a restarted "
        "server asks its stream's leader only for what follows its last message, so a hole "
        "before it stays (Jepsen 2025's finding on 2.12.1)",
        known_finding=KnownFinding(10, 10, MEASURED, WRITE_UP),
    ),
    Finding(
        Preset(
            "nats-no-msg-id-producer-crash",
            "NATS JetStream, publishers without Nats-Msg-Id publishing again what a crash "
            "left unacknowledged",
            {**PRODUCER_CRASHES, "system_options": {"dedupe_window": "off"}},
        ),
        {"per-partition-order": False},
        "a publish ack lost with the connection says nothing of the publish: published "
        "again without a message id, a message the stream had stored is stored twice "
        "(an id at two sequences)",
    ),
    Finding(
        Preset(
            "nats-msg-id-producer-crash",
            "NATS JetStream, publishers with Nats-Msg-Id publishing again what a crash left "
            "unacknowledged",
            {**PRODUCER_CRASHES, "system_options": {"dedupe_window": "2m"}},
        ),
        {"at-least-once": True, "per-partition-order": True},
        "the control: the stream drops a message id it stored within the duplicate "
        "window, so the same publish again is stored once",
    ),
    Finding(
        Preset(
            "nats-max-age-clock-ahead-restart",
            "NATS JetStream R3 stream, MaxAge one hour (longer than the run), every server "
            "restarted with its wall clock two hours ahead",
            {**RESTART_CLOCK_AHEAD, "system_options": {"faketime": True, "max_age": "1h"}},
        ),
        {"at-least-once": False},
        "a server removes a message once its wall clock says the message is older than "
        "MaxAge; a clock that jumps while it runs is not looked at until the expiry timer, "
        "set on the monotonic clock, comes due, but a server that starts with its clock "
        "ahead removes at once everything its clock calls expired",
    ),
    Finding(
        Preset(
            "nats-clock-ahead-restart",
            "NATS JetStream R3 stream, no MaxAge, every server restarted with its wall clock "
            "two hours ahead",
            {**RESTART_CLOCK_AHEAD, "system_options": {"faketime": True}},
        ),
        {"at-least-once": True},
        "the control: without an age limit, nothing a server does on its wall clock "
        "removes an acknowledged message",
    ),
]

PRESETS = Presets(matrix=MATRIX, findings=FINDINGS)
