"""A quorum queue's members changed at run time (nemesis/membership.py):
`rabbitmq-queues delete_member` takes a node's replica out of each test
queue, and the stop puts it back with `add_member` (a new replica that
catches up from the leader), as an operator replacing a node would. Asked
on the first node whose tool answers; the members are what
`quorum_status` lists."""

from __future__ import annotations

import shlex
from typing import Any

from harness.nodes.remote import Remote

from ..capabilities import Membership
from .leaders import leads
from .state import member_tool, members


class QuorumMembers(Membership):
    """members/remove_member/restore_members for a RabbitMQ DB that has
    `nodes`, `sbin`, `node_name`, `env` and `test_queues` (quorum queues)."""

    nodes: list[Remote]
    test_queues: list[str] = []
    taken_out: set[str]  # nodes taken out, until put back (the DB's own)

    @classmethod
    def cannot_change_members(cls, settings: tuple[Any, ...], nodes: int | None) -> str | None:
        queue = settings[1] if len(settings) > 1 else None
        kind = getattr(queue, "queue_type", None)
        if kind is not None and kind != "quorum":
            return f"a {kind} queue has no members to change (--queue-type quorum)"
        return None

    def members(self) -> list[str]:
        group: set[str] = set()
        for q in self.test_queues:
            try:
                rows = member_tool(self, "rabbitmq-queues", f"quorum_status {shlex.quote(q)}")
            except RuntimeError:
                continue  # no node answered: nobody named
            for named in members(rows):
                group.update(n.name for n in self.nodes if leads(n, named))
        return sorted(group)

    def _member_change(self, command: str, node: str) -> dict[str, str]:
        """`rabbitmq-queues <command> <queue> <node>` for each test queue, on the
        first node that runs it; each queue's error where none did."""
        target = next(n for n in self.nodes if n.name == node)
        errors: dict[str, str] = {}
        for q in self.test_queues:
            args = f"{command} {shlex.quote(q)} {self.node_name(target)}"  # type: ignore[attr-defined]
            tried = []
            for via in self.nodes:
                r = via.run(
                    f"{self.sbin(via, 'rabbitmq-queues')} -n {self.node_name(via)} {args}",  # type: ignore[attr-defined]
                    timeout=30,
                    env=self.env(via),  # type: ignore[attr-defined]
                    check=False,
                )
                if r.exit == 0:
                    break
                tried.append(f"{via.name}: {(r.err or r.out).strip()[-160:]}")
            else:
                errors[q] = "; ".join(tried)[-400:]
        return errors

    def remove_member(self, node: str, members: list[str]) -> dict[str, Any]:
        errors = self._member_change("delete_member", node)
        if len(errors) < len(self.test_queues):
            self.taken_out.add(node)
        return {
            "removed": not errors,
            **({"errors": errors} if errors else {}),
            "after": self.members(),
        }

    def restore_members(self) -> dict[str, Any]:
        """Each node taken out goes back in (`add_member`); one that cannot
        (down) stays out for the next stop or the teardown."""
        back, errors = [], {}
        for node in sorted(self.taken_out):
            failed = self._member_change("add_member", node)
            if failed:
                errors[node] = failed
            else:
                back.append(node)
                self.taken_out.discard(node)
        return {"added": back, **({"errors": errors} if errors else {}), "members": self.members()}
