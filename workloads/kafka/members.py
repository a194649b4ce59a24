"""Kafka's replicated groups changed at run time (nemesis/membership.py), as
an operator decommissioning a broker does while clients run:

- the test topics' partitions: every partition the node replicates is
  reassigned (the Admin API's AlterPartitionReassignments, what
  kafka-reassign-partitions.sh sends) to a broker outside its replicas, the
  one holding fewest; the new replica catches up and the old one is dropped,
  leadership moving off it if it led;
- with `--kraft-quorum dynamic`, the controller quorum too (KIP-853): a
  voter is removed (`kafka-metadata-quorum remove-controller`, the active
  controller when aimed at it) and an observer is added in its place
  (`add-controller`, run on that observer, which reads its own metadata
  directory), so the quorum keeps its size.

The stop waits (bounded) for the reassignments to end, and adds back a
removed voter while the quorum is short of its size; the partitions stay
where they went, as after a decommission."""

from __future__ import annotations

import base64
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from kafka.structs import TopicPartition

from harness.nodes.remote import Remote

from ..capabilities import Membership
from ..db import first_answer
from .admin import Admin, quick_admin, quorum_state

T = TypeVar("T")
REASSIGN_WAIT_S = 60.0  # a stop waits this long for the replicas it moved
ADD_VOTER_WAIT_S = 30.0  # and asks this long for a voter's add
Quorum = tuple[dict[int, str], list[int]]  # ({voter id: directory id}, [observer ids])


def kafka_uuid(value: Any) -> str:
    """A directory id as Kafka's tools print and take it (URL-safe base64 of
    its 16 bytes), from kafka-python's UUID or its hex string."""
    if isinstance(value, str) and len(value) == 36:  # kafka-python's: 8-4-4-4-12 hex
        value = uuid.UUID(value)
    if isinstance(value, uuid.UUID):
        return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
    return str(value)


def voters_and_observers(described: dict[str, Any]) -> Quorum:
    """({voter id: directory id}, [observer ids]) from a DescribeQuorum answer
    (the Admin API's, what `kafka-metadata-quorum describe --status` asks)."""
    part = quorum_state(described)
    voters = {
        int(v["replica_id"]): kafka_uuid(v.get("replica_directory_id"))
        for v in part.get("current_voters") or []
    }
    observers = {int(o["replica_id"]) for o in part.get("observers") or []}
    return voters, sorted(observers - set(voters))


def reassigned(
    replicas: dict[tuple[str, int], list[int]], broker: int, brokers: list[int]
) -> dict[tuple[str, int], list[int]]:
    """New replicas for each partition `broker` replicates: it replaced, in its
    place, by the broker outside that partition's replicas that holds fewest
    (lowest id on a tie); partitions with no such broker are left out."""
    load = Counter({b: 0 for b in brokers})
    load.update(b for rs in replicas.values() for b in rs)
    out = {}
    for tp, rs in sorted(replicas.items()):
        if broker not in rs:
            continue
        spare = sorted((b for b in brokers if b not in rs), key=lambda b: (load[b], b))
        if spare:
            out[tp] = [spare[0] if b == broker else b for b in rs]
            load[spare[0]] += 1
            load[broker] -= 1
    return out


class KafkaMembers(Membership):
    """members/remove_member/restore_members for the Kafka DB (db.py): it has
    `nodes`, `opts`, `test_topics`, `directory_ids`, `taken_out`, node_id,
    bootstrap, tool, pid, dir, running_nodes, initial_voters."""

    nodes: list[Remote]
    test_topics: list[str]
    directory_ids: dict[str, str]
    taken_out: set[str]

    @classmethod
    def cannot_change_members(cls, settings: tuple[Any, ...], nodes: int | None) -> str | None:
        opts = settings[0] if settings else None
        rf = getattr(opts, "replication_factor", None)
        if rf is not None and nodes is not None and rf >= nodes:
            return (
                f"the topic's {rf} replicas span all {nodes} nodes: a partition taken off a "
                "broker has nowhere to go (--replication-factor below --nodes)"
            )
        return None

    # -- what the groups are now --------------------------------------------
    def _by_id(self, broker: int) -> str:
        return next((n.name for n in self.nodes if self.node_id(n) == broker), f"broker {broker}")

    def _ask(self, what: Callable[[Admin], T]) -> T | None:
        """`what(admin)` of the first running node that answers; None when none does."""

        def ask(node: Remote) -> T:
            admin = quick_admin(self.bootstrap(node), 5.0, "queuecheck-members")
            try:
                return what(admin)
            finally:
                admin.close()

        try:
            return first_answer(self.running_nodes(), ask)
        except Exception:  # noqa: BLE001 - nobody answers under this fault
            return None

    def _replicas(self) -> dict[tuple[str, int], list[int]]:
        """{(topic, partition): replica ids} of the test topics; {} when no
        node answers."""
        described = self._ask(lambda admin: admin.describe_topics(self.test_topics)) or []
        return {
            (info.get("name") or info.get("topic"), p["partition_index"]): list(
                p.get("replica_nodes") or []
            )
            for info in described
            for p in info.get("partitions") or []
        }

    def _quorum(self) -> Quorum | None:
        """The dynamic quorum's voters and observers; None for a static one or
        when no node answers."""
        if self.opts.kraft_quorum != "dynamic":
            return None
        return self._ask(lambda admin: voters_and_observers(admin.describe_metadata_quorum()))

    def members(self) -> list[str]:
        """Every node replicating a test partition, and the quorum's voters."""
        return self._members(self._quorum())

    def _members(self, quorum: Quorum | None) -> list[str]:
        ids = {b for rs in self._replicas().values() for b in rs}
        ids |= set(quorum[0]) if quorum else set()
        return sorted(self._by_id(b) for b in ids)

    # -- a change and its repair --------------------------------------------
    def remove_member(self, node: str, members: list[str]) -> dict[str, Any]:
        target = next(n for n in self.nodes if n.name == node)
        broker = self.node_id(target)
        out: dict[str, Any] = {"partitions": self._reassign(broker)}
        quorum = self._quorum()
        if quorum is not None and broker in quorum[0]:
            out["controllers"] = self._replace_voter(broker, quorum)
        out["removed"] = not any("error" in part for part in out.values())
        return {**out, "after": self.members()}

    def _reassign(self, broker: int) -> dict[str, Any]:
        """Moves every test partition off `broker`; what was asked and answered."""
        replicas = self._replicas()
        if not replicas:
            return {"error": "no node described the test topics"}
        brokers = [self.node_id(n) for n in self.nodes]
        moves = reassigned(replicas, broker, brokers)
        if not moves:
            return {"moved": {}}
        asked = {f"{t}/{p}": [replicas[(t, p)], rs] for (t, p), rs in moves.items()}
        try:
            admin = quick_admin(self.bootstrap(), 10.0, "queuecheck-reassign")
            try:
                answers = admin.alter_partition_reassignments(
                    {TopicPartition(t, p): rs for (t, p), rs in moves.items()}, timeout_ms=10000
                )
            finally:
                admin.close()
        except Exception as e:  # noqa: BLE001 - the op says what the broker answered
            return {"moved": asked, "error": f"{type(e).__name__}: {e}"[:300]}
        refused = {f"{tp.topic}/{tp.partition}": err.__name__ for tp, err in answers.items() if err}
        return {"moved": asked, **({"error": refused} if refused else {})}

    def _replace_voter(self, broker: int, quorum: Quorum) -> dict[str, Any]:
        """remove-controller for `broker`, then add-controller on a running
        observer (none running: the quorum stays short until the stop)."""
        voters, observers = quorum
        r = self.tool(
            "MetadataQuorumCommand",
            f"remove-controller --controller-id {broker} "
            f"--controller-directory-id {voters[broker]}",
            timeout=60,
            node=self.running_nodes()[0],
            controllers=True,
        )
        out: dict[str, Any] = {"removed": self._by_id(broker), "said": _said(r)}
        if r.exit != 0:
            return {**out, "error": "remove-controller failed"}
        self.taken_out.add(self._by_id(broker))
        spare = next((n for n in self.running_nodes() if self.node_id(n) in observers), None)
        if spare is None:
            return {**out, "added": None}
        added = self._add_voter(spare)
        return {
            **out,
            "added": spare.name,
            "add-said": added["said"],
            "add-tries": added["tries"],
            **({} if added["done"] else {"error": "add-controller failed"}),
        }

    def _add_voter(self, node: Remote) -> dict[str, Any]:
        """add-controller run on `node` (it reads its own node id and metadata
        directory from its config), asked again for up to ADD_VOTER_WAIT_S
        while the quorum refuses: just after a voter's removal its new leader
        answers NOT_LEADER_OR_FOLLOWER until it has committed in its epoch."""
        deadline, tries = time.monotonic() + ADD_VOTER_WAIT_S, 0
        while True:
            tries += 1
            r = self.tool(
                "MetadataQuorumCommand",
                f"--command-config {self.dir(node)}/etc/server.properties add-controller",
                timeout=60,
                node=node,
                controllers=True,
            )
            # an add whose answer was lost may have been made: it is a voter
            done = r.exit == 0 or "DuplicateVoterException" in r.err + r.out
            if done or time.monotonic() > deadline:
                break
            time.sleep(1.0)
        if done:
            self.taken_out.discard(node.name)
        return {"said": _said(r), "tries": tries, "done": done}

    def restore_members(self) -> dict[str, Any]:
        """Waits up to REASSIGN_WAIT_S for the moved replicas to catch up and
        the old ones to go; adds removed voters back (each runs as an
        observer) while the quorum has fewer than it started with."""
        out: dict[str, Any] = {"reassigning": self._await_reassignments()}
        quorum = self._quorum()
        if quorum is not None:
            size = len(self.initial_voters())
            added = {}
            for name in sorted(self.taken_out):
                if len(quorum[0]) + len(added) >= size:
                    break
                node = next(n for n in self.nodes if n.name == name)
                if self.pid(node) is None:
                    continue  # down: the next stop or the teardown tries again
                added[name] = self._add_voter(node)["said"]
            out["controllers-added"] = added
            quorum = self._quorum()
            out["voters"] = sorted(self._by_id(b) for b in quorum[0]) if quorum else None
        return {**out, "members": self._members(quorum)}

    def _await_reassignments(self) -> list[str]:
        """The test partitions still being reassigned when the wait ended
        ([]: none), or why nobody said."""
        deadline = time.monotonic() + REASSIGN_WAIT_S
        while True:
            listed = self._ask(lambda admin: admin.list_partition_reassignments(timeout_ms=5000))
            if listed is None:  # no answer under a fault: asked again
                pending = ["(no answer)"]
            else:
                mine = [tp for tp in listed if tp.topic in self.test_topics]
                pending = sorted(f"{tp.topic}/{tp.partition}" for tp in mine)
            if not pending or time.monotonic() > deadline:
                return pending
            time.sleep(1.0)


def _said(r: Any) -> str:
    return (r.out + r.err).strip()[-300:]
