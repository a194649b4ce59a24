"""An iptables chain the tool owns on every node (blockade's way): rules go
only into it, and healing flushes only it, never anyone else's rules."""

from __future__ import annotations

import logging

from harness.nodes.remote import Remote, RemoteError, on_all

log = logging.getLogger(__name__)


PARTITION_CHAIN, LOSS_CHAIN = "QC-PARTITION", "QC-LOSS"
OWNED_CHAINS = (PARTITION_CHAIN, LOSS_CHAIN)


def heal_leftovers(nodes: list[Remote]) -> None:
    """Flushes every chain the tool owns: what a killed run left cuts nothing more."""
    flush = "; ".join(f"iptables -w -F {c} 2>/dev/null" for c in OWNED_CHAINS)
    on_all(nodes, lambda n: n.run(flush + "; true", timeout=20))


class Chain:
    """An iptables chain a fault owns, jumped to first thing from `hook`
    (INPUT: what a node hears; OUTPUT: what it sends): rules go only into
    it, and healing flushes only it."""

    def __init__(self, name: str, hook: str = "INPUT"):
        self.name = name
        self.hook = hook

    def ensure(self, node: Remote) -> None:
        """Creates the chain (empty) and jumps to it first thing from its hook."""
        c, h = self.name, self.hook
        node.run(
            f"iptables -w -N {c} 2>/dev/null; iptables -w -F {c} && "
            f"(iptables -w -C {h} -j {c} 2>/dev/null || iptables -w -I {h} 1 -j {c})",
            timeout=20,
        )

    def add(self, node: Remote, rules: list[str]) -> None:
        if rules:
            node.run("; ".join(f"iptables -w -A {self.name} {r}" for r in rules) + "; true")
            # `; true` would hide a failed rule: list the chain and count.
            n = node.run(f"iptables -w -S {self.name} | grep -c -- '^-A'", check=False).out
            if int(n.strip() or 0) < len(rules):
                raise RemoteError(f"{node.name}: iptables refused rules for chain {self.name}")

    def flush(self, node: Remote) -> None:
        node.run(f"iptables -w -F {self.name} 2>/dev/null; true", timeout=20)

    def remove(self, node: Remote) -> None:
        """Unhooks and deletes the chain; never raises (teardown)."""
        c = self.name
        try:
            node.run(
                f"while iptables -w -D {self.hook} -j {c} 2>/dev/null; do :; done; "
                f"iptables -w -F {c} 2>/dev/null; iptables -w -X {c} 2>/dev/null; true",
                timeout=20,
                check=False,
            )
        except RemoteError as e:
            log.warning("%s: could not remove chain %s: %s", node.name, c, e)
