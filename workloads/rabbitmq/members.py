"""Members changed at run time (nemesis/membership.py), in one of two ways
(`--rabbitmq-membership`):

- `queue`: `rabbitmq-queues delete_member` takes a node's replica out of
  each test quorum queue, and the stop puts it back with `add_member` (a new
  replica that catches up from the leader), as an operator replacing a
  queue's member would. The members are what `quorum_status` lists.
- `cluster`: the node leaves the cluster the way RabbitMQ's clustering guide
  removes one: `stop_app` on it, then `forget_cluster_node` asked of another
  node (which also takes it out of every quorum queue). At the stop it comes
  back as a new node with the old name: `reset` (its database still names
  the cluster that forgot it, and `start_app` would refuse), `join_cluster`,
  `start_app`, then `add_member` for each test quorum queue (a mirrored
  queue's policy mirrors onto it by itself; a classic queue's messages on
  it are gone). The members are the nodes the cluster lists as running.

Each tool call is asked of the first node whose tool answers."""

from __future__ import annotations

import shlex
from typing import Any

from harness.nodes.remote import Remote

from ..capabilities import Membership
from .leaders import leads
from .state import member_tool, members

MEMBER_CHANGES = ("queue", "cluster")


class MemberChanges(Membership):
    """members/remove_member/restore_members for a RabbitMQ DB that has
    `nodes`, `opts.membership`, `sbin`, `node_name`, `env`, `ctl`,
    `running_nodes`, `await_node` and `test_queues` (`test_queue_type`
    says whether they are quorum queues)."""

    nodes: list[Remote]
    test_queues: list[str] = []
    test_queue_type: str = "quorum"
    taken_out: set[str]  # nodes taken out, until put back (the DB's own)
    forgotten: set[str]  # of those, the ones the cluster forgot (cluster mode)

    @classmethod
    def cannot_change_members(cls, settings: tuple[Any, ...], nodes: int | None) -> str | None:
        how = getattr(settings[0] if settings else None, "membership", "queue")
        queue = settings[1] if len(settings) > 1 else None
        kind = getattr(queue, "queue_type", None)
        if how == "cluster":
            if kind == "stream":
                return (
                    "--rabbitmq-membership cluster: a stream's replicas are not put back on "
                    "a node that rejoins (--queue-type quorum, classic or mirrored)"
                )
            return None
        if kind is not None and kind != "quorum":
            other = "" if kind == "stream" else ", or --rabbitmq-membership cluster"
            return f"a {kind} queue has no members to change (--queue-type quorum{other})"
        return None

    @property
    def _cluster_mode(self) -> bool:
        return self.opts.membership == "cluster"  # type: ignore[attr-defined]

    def _node(self, name: str) -> Remote:
        return next(n for n in self.nodes if n.name == name)

    def members(self) -> list[str]:
        if self._cluster_mode:
            return self._cluster_members()
        group: set[str] = set()
        for q in self.test_queues:
            try:
                rows = member_tool(self, "rabbitmq-queues", f"quorum_status {shlex.quote(q)}")
            except RuntimeError:
                continue  # no node answered: nobody named
            for named in members(rows):
                group.update(n.name for n in self.nodes if leads(n, named))
        return sorted(group)

    def _cluster_members(self) -> list[str]:
        """The nodes the first node that answers lists as running."""
        for via in self.nodes:
            if via.name in self.taken_out:
                continue  # its app is stopped: it lists nothing
            running = self.running_nodes(via)  # type: ignore[attr-defined]
            if running:
                return sorted(n.name for n in self.nodes if any(leads(n, r) for r in running))
        return []

    def _tool(
        self, program: str, args: str, timeout: float, skip: frozenset[str] = frozenset()
    ) -> str | None:
        """`program args` on the first node (not in `skip`) that runs it; None
        then, else every node's error."""
        tried = []
        for via in self.nodes:
            if via.name in skip:
                continue
            r = via.run(
                f"{self.sbin(via, program)} -n {self.node_name(via)} {args}",  # type: ignore[attr-defined]
                timeout=timeout,
                env=self.env(via),  # type: ignore[attr-defined]
                check=False,
            )
            if r.exit == 0:
                return None
            tried.append(f"{via.name}: {(r.err or r.out).strip()[-160:]}")
        return "; ".join(tried)[-400:] or "no node to ask"

    def _member_change(self, command: str, node: str) -> dict[str, str]:
        """`rabbitmq-queues <command> <queue> <node>` for each test queue, on the
        first node that runs it; each queue's error where none did."""
        target = self.node_name(self._node(node))  # type: ignore[attr-defined]
        errors: dict[str, str] = {}
        for q in self.test_queues:
            failed = self._tool("rabbitmq-queues", f"{command} {shlex.quote(q)} {target}", 30)
            if failed:
                errors[q] = failed
        return errors

    def remove_member(self, node: str, members: list[str]) -> dict[str, Any]:
        if self._cluster_mode:
            return self._leave(node)
        errors = self._member_change("delete_member", node)
        if len(errors) < len(self.test_queues):
            self.taken_out.add(node)
        return {
            "removed": not errors,
            **({"errors": errors} if errors else {}),
            "after": self.members(),
        }

    def _leave(self, node: str) -> dict[str, Any]:
        """`stop_app` on the node, then `forget_cluster_node` from another."""
        target = self._node(node)
        stopped = self._steps(target, ["stop_app"], timeout=60)
        if stopped:
            return {"removed": False, "errors": stopped, "after": self.members()}
        self.taken_out.add(node)  # from here the stop must bring it back
        failed = self._tool(
            "rabbitmqctl",
            f"forget_cluster_node {self.node_name(target)}",  # type: ignore[attr-defined]
            60,
            skip=frozenset([node]),
        )
        if not failed:
            self.forgotten.add(node)
        return {
            "removed": not failed,
            "how": "stop_app, forget_cluster_node",
            **({"errors": {"forget_cluster_node": failed}} if failed else {}),
            "after": self.members(),
        }

    def restore_members(self) -> dict[str, Any]:
        """Each node taken out goes back in; one that cannot (down) stays out
        for the next stop or the teardown."""
        back, errors = [], {}
        for node in sorted(self.taken_out):
            failed = self._rejoin(node) if self._cluster_mode else None
            if not failed and self.test_queue_type == "quorum":
                failed = self._member_change("add_member", node)
            if failed:
                errors[node] = failed
            else:
                back.append(node)
                self.taken_out.discard(node)
        return {"added": back, **({"errors": errors} if errors else {}), "members": self.members()}

    def _rejoin(self, node: str) -> dict[str, str]:
        """A forgotten node reset and joined to a running member, then its app
        started and awaited; one only stopped (its forget failed) started.
        Returns the failed step and what it said ({} when back)."""
        target = self._node(node)
        if node in self.forgotten:
            running = self._cluster_members()
            seed = next((n for n in self.nodes if n.name in running and n is not target), None)
            if seed is None:
                return {"join_cluster": "no running member to join"}
            failed = self._steps(target, ["reset", f"join_cluster {self.node_name(seed)}"])  # type: ignore[attr-defined]
            if failed:
                return failed
            self.forgotten.discard(node)  # a member again, its app stopped
        failed = self._steps(target, ["start_app"])
        if failed:
            return failed
        # start_app returns once the app runs; awaited as a node started
        # elsewhere (await_startup): its log's last boot line is an old one
        self.boot_offsets.pop(node, None)  # type: ignore[attr-defined]
        try:
            self.await_node(target)  # type: ignore[attr-defined]
        except Exception as e:  # noqa: BLE001 - said in the op, retried at the next stop
            return {"await_startup": str(e)[-300:]}
        return {}

    def _steps(self, target: Remote, steps: list[str], timeout: float = 120) -> dict[str, str]:
        """`rabbitmqctl <step>` on the node, in order, until one fails: then
        {that step: what it said}."""
        for step in steps:
            r = self.ctl(target, step, timeout=timeout, check=False)  # type: ignore[attr-defined]
            if r.exit != 0:
                return {step.split()[0]: (r.err or r.out).strip()[-300:]}
        return {}
