"""NATS's findings rows: Jepsen's 2025 JetStream findings as known-bad
setups, each beside its control. The demo stays two brokers."""

from __future__ import annotations

from typing import Any

from ..presets import ENQUEUE_THEN_DRAIN, Finding, Preset, Presets

# every node loses power at once; the stream's writes not yet fsynced go with it
POWER_LOSS: dict[str, Any] = {
    "nemesis_profile": "power-loss",
    **ENQUEUE_THEN_DRAIN,
    "system": "nats",
}

# producers crashing with a publish in flight, twice a second, and publishing it again
# an R2 stream's members moved by the JetStream API while servers are killed,
# each fault on its own rhythm (a move takes 8-10 s)
MEMBERSHIP_KILLS: dict[str, Any] = {
    "system": "nats",
    "nemesis": ["membership", "kill"],
    "nemesis_interval": 3,
    "nemesis_overlap": True,
    "fault_targets": ["primaries", "one"],
}

PRODUCER_CRASHES: dict[str, Any] = {
    "system": "nats",
    "nemesis": ["crash-client"],
    "crash_clients": "producers",
    "nemesis_interval": 0.5,
}

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
            "out (peer-remove) while servers are killed",
            {**MEMBERSHIP_KILLS, "system_options": {"replicas": 2, "sync": "always"}},
        ),
        {"at-least-once": True},
        "the control for membership changes: every write fsynced before its ack, members "
        "changed only through JetStream's own API, which places a new replica that catches "
        "up from the others",
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
]

PRESETS = Presets(findings=FINDINGS)
