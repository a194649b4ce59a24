"""Who leads the test's queues (nemesis/targets.py's primaries): a quorum
queue's Raft leader, a classic queue's master (mirrored or not), as
`rabbitmqctl list_queues` says on the first node that answers."""

from __future__ import annotations

from harness.nodes.remote import Remote

from ..capabilities import Leaders
from ..db import DBError, first_answer

LISTING = "list_queues name leader pid --no-table-headers --quiet"


def leader_nodes(listing: str, queues: list[str]) -> set[str]:
    """What names each of `queues`' leader, from LISTING's tab-separated
    lines: a quorum queue's leader (`rabbit@host`), or else the master's
    process id, which starts with its node's name (`<rabbit@host.N.N.N>`;
    the JSON formatter would print only `#PID<N.N.N>`)."""
    out = set()
    for line in listing.splitlines():
        name, leader, pid = ([*line.split("\t"), "", ""])[:3]
        if name not in queues:
            continue
        if leader.strip():
            out.add(leader.strip())
        elif pid.startswith("<") and "@" in pid:
            out.add(pid.strip()[1:])
    return out


def leads(node: Remote, named: str) -> bool:
    """Whether `named` (a leader's node name or a master's pid text) is on
    `node`: rabbit@<its host or name>, then nothing or a dot."""
    host = named.split("@", 1)[-1]
    return any(host == h or host.startswith(f"{h}.") for h in (node.spec.host, node.name))


class QueueLeaders(Leaders):
    """primaries() for a RabbitMQ DB that has `nodes` and `ctl(node, args,
    timeout)`; the test sets `test_queues` once it made them."""

    nodes: list[Remote]
    test_queues: list[str] = []

    def primaries(self) -> list[str]:
        def listing(node: Remote) -> str:
            r = self.ctl(node, LISTING, timeout=15)  # type: ignore[attr-defined]
            if r.exit != 0 or not r.out.strip():
                raise DBError(f"{node.name}: list_queues: {(r.err or r.out).strip()[-200:]}")
            return r.out

        try:
            named = leader_nodes(first_answer(self.nodes, listing), self.test_queues)
        except Exception:  # noqa: BLE001 - no node answered: nobody named
            return []
        return [n.name for n in self.nodes if any(leads(n, x) for x in named)]
