"""Network faults that slow rather than cut: `delay` (latency with jitter and
correlation), `reorder`, `duplicate` and `rate` (bandwidth), on the links
--slow-links chooses, one kind at random per strike:

- client-broker: every broker's link to the clients (the control machine);
- broker-broker: every link between two brokers;
- node: every link of the nodes --fault-targets picks (one at random by
  default), to the clients and to the other brokers.

As netem on the struck nodes' interfaces: what a struck node sends over a
struck link is slowed, what it receives is not. A round trip between a
client and a broker gains one delay; between two brokers, both struck
(broker-broker), two.

This machine's kernel has no sch_netem, so delay, reorder and duplicate
come from user space: `qc-delay` (nemesis/qc-delay/, a Go program built at
`make setup`, nemesis/delayer.py; its docstring says why it is shaped so),
one per fault and struck node, run in the node's own network namespace (a
namespace node's or a container's) and fed the node's packets bound for the
struck links by NFQUEUE rules in the fault's own iptables chain, hooked
from OUTPUT. The rules pass the node's own SSH port (its NodeSpec's), so
the control connection is never slowed, and loopback. The daemon has a
pidfile in the node's own tree and is stopped by it, after checking that
the pid is still the process started with that pidfile; the stop removes
the rules first, then the daemon lets what it holds go. `rate` needs no
daemon: an HTB qdisc (tc) on the node's interfaces, one class of
--rate-kbit per struck link, with the SSH port and the links not struck
sent past it.

The start op names the links held (`n1->clients`, `n1->n2`) and the
settings; the stop op what each node's delayer did (packets held, sent at
once, copied, dropped by a full queue) or its qdisc sent and dropped. Only
for the tool's own local cluster (network namespaces or --driver docker):
a --cluster-file's machines are refused by name before any node is
reached. The teardown always runs, never raises, and removes the chain,
the daemon and the qdisc; the set-up removes what a killed run left."""

from __future__ import annotations

import json
import logging
import random
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from harness.nodes import NodeOptions
from harness.nodes.remote import Remote, RemoteError, on_all
from harness.options import NON_NEGATIVE, POSITIVE, PROBABILITY, OptionError, Range, option
from workloads.install import DIST_ROOT, manifest, push_dir

from . import delayer
from .base import FaultContext, Settings
from .iptables import Chain
from .targets import Aim, TargetOptions, refuse_targets

log = logging.getLogger(__name__)

LINKS = ("client-broker", "broker-broker", "node")
UNIT = Range(0, 1)
LIFETIME_S = 3600  # a delayer a killed run left behind lets its packets go after this
RATE_HANDLE = "5a1"  # the rate fault's HTB qdisc, `5a1:` on each interface
PACKETS_QUEUED = 1000  # a rate-capped link's queue, as netem's default limit


@dataclass
class SlowLinkOptions:
    slow_links: list[str] = option(
        default_factory=lambda: list(LINKS),
        help="which links the delay, reorder, duplicate and rate faults slow, one of these "
        "at random per fault: client-broker (every broker's link to the clients), "
        "broker-broker (every link between two brokers), node (every link of the nodes "
        "--fault-targets picks); what a struck node sends over them is slowed, as netem on "
        "its interface would",
        choices=LINKS,
    )


@dataclass
class DelayOptions:
    delay_ms: float = option(
        100.0, "the delay fault: how long each packet is held, ms", range=POSITIVE
    )
    delay_jitter_ms: float = option(
        10.0, "the delay fault: give or take up to this much, uniformly, ms", range=NON_NEGATIVE
    )
    delay_correlation: float = option(
        0.25, "the delay fault: how much each delay weighs in the previous one's (0..1)", range=UNIT
    )


@dataclass
class ReorderOptions:
    reorder_probability: float = option(
        0.25,
        "the reorder fault: share of packets sent at once, ahead of the others it holds",
        range=PROBABILITY,
    )
    reorder_correlation: float = option(
        0.5, "the reorder fault: of each choice with the previous one (0..1)", range=UNIT
    )
    reorder_delay_ms: float = option(
        20.0, "the reorder fault: how long the other packets are held, ms", range=POSITIVE
    )


@dataclass
class DuplicateOptions:
    duplicate_probability: float = option(
        0.05, "the duplicate fault: share of packets sent twice", range=PROBABILITY
    )
    duplicate_correlation: float = option(
        0.0, "the duplicate fault: of each choice with the previous one (0..1)", range=UNIT
    )


@dataclass
class RateOptions:
    rate_kbit: float = option(
        1000.0, "the rate fault: bandwidth of each struck link, kbit/s", range=Range(8)
    )


def refuse_cluster_file(name: str, settings: Settings) -> None:
    """The slow faults run a daemon and change qdiscs inside the nodes: only
    on the tool's own local cluster."""
    if settings.of(NodeOptions).cluster_file:
        raise OptionError(
            f"--nemesis {name}: needs the tool's own local cluster (network namespaces or "
            "--driver docker), not a --cluster-file's machines"
        )


# -- which links ----------------------------------------------------------


@dataclass(frozen=True)
class Held:
    """What one struck node slows: what it sends to `peers` (addresses of
    other brokers) and, with `clients`, to every address but its peers'."""

    node: str
    ssh_port: int
    peers: tuple[tuple[str, str], ...]  # (name, address) of the peers it holds
    others: tuple[tuple[str, str], ...]  # (name, address) of the peers it does not
    clients: bool

    def names(self) -> list[str]:
        held = [f"{self.node}->{name}" for name, _ in self.peers]
        return held + ([f"{self.node}->clients"] if self.clients else [])


def plan(kind: str, nodes: list[Remote], struck: list[Remote] | None = None) -> list[Held]:
    """What each node slows for a strike of `kind`; `struck`: the nodes of a
    `node` strike."""
    if kind not in LINKS:
        raise ValueError(f"slow links {kind!r} is not one of {', '.join(LINKS)}")
    out = []
    chosen = {n.name for n in (struck or [])}
    for node in nodes:
        peers = tuple((p.name, p.spec.host) for p in nodes if p is not node)
        if kind == "client-broker":
            out.append(Held(node.name, node.spec.port, (), peers, True))
        elif kind == "broker-broker":
            out.append(Held(node.name, node.spec.port, peers, (), False))
        elif node.name in chosen:
            out.append(Held(node.name, node.spec.port, peers, (), True))
    return [h for h in out if h.peers or h.clients]


def queue_rules(held: Held, queue: int, mark: int) -> list[str]:
    """The fault chain's rules on one node: its packets for the held links
    to the NFQUEUE; loopback, the SSH port and what the delayer already let
    go (its mark) past it."""
    to_queue = f"-j NFQUEUE --queue-num {queue} --queue-bypass"
    rules = [
        "-o lo -j RETURN",
        f"-m mark --mark {mark:#x}/{mark:#x} -j RETURN",
        f"-p tcp --sport {held.ssh_port} -j RETURN",
    ]
    rules += [f"-d {address} {to_queue}" for _, address in held.peers]
    if held.clients:
        rules += [f"-d {address} -j RETURN" for _, address in held.others]
        rules.append(to_queue)
    return rules


def rate_script(held: Held, kbit: float) -> str:
    """Shell that puts the rate fault's HTB on every interface of the node
    but loopback: a class of `kbit` per held link; the SSH port and the
    links not held go straight out (the qdisc's own handle)."""
    h = RATE_HANDLE
    rate = f"{kbit:g}kbit"
    filt = f"tc filter add dev $dev parent {h}: protocol ip"
    lines = [
        f"tc qdisc replace dev $dev root handle {h}: htb",
        f"{filt} prio 1 u32 match ip protocol 6 0xff match ip sport {held.ssh_port} 0xffff "
        f"flowid {h}:",
    ]

    def link_class(cls: str) -> list[str]:
        # its own queue of PACKETS_QUEUED (an interface's txqueuelen may be 0)
        return [
            f"tc class add dev $dev parent {h}: classid {cls} htb rate {rate} ceil {rate}",
            f"tc qdisc add dev $dev parent {cls} pfifo limit {PACKETS_QUEUED}",
        ]

    for i, (_, address) in enumerate(held.peers):
        cls = f"{h}:{0x10 + i:x}"
        lines += link_class(cls)
        lines.append(f"{filt} prio 2 u32 match ip dst {address}/32 flowid {cls}")
    if held.clients:
        lines += [f"{filt} prio 3 u32 match ip dst {a}/32 flowid {h}:" for _, a in held.others]
        lines += link_class(f"{h}:1")
        lines.append(f"{filt} prio 4 u32 match u32 0 0 flowid {h}:1")
    body = " && ".join(lines)
    return f"for dev in $(ls /sys/class/net); do [ $dev = lo ] && continue; {body} || exit 1; done"


REMOVE_RATE = (
    "for dev in $(ls /sys/class/net); do "
    f"tc qdisc show dev $dev root 2>/dev/null | grep -q ' {RATE_HANDLE}: ' && "
    "tc qdisc del dev $dev root; done; true"
)
RATE_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+)")


def rate_counts(tc_output: str) -> dict[str, int]:
    """What the HTB qdiscs sent and dropped (`tc -s qdisc show`'s lines of
    the fault's qdisc, summed over the interfaces)."""
    total = {"bytes": 0, "packets": 0, "dropped": 0, "overlimits": 0}
    for m in RATE_SENT.finditer(tc_output):
        for key, value in zip(total, m.groups(), strict=True):
            total[key] += int(value)
    return total


# -- the fault's own iptables chain, hooked from OUTPUT ---------------------


# -- the delayer daemon on a node -------------------------------------------


class Daemon:
    """One fault's qc-delay on one node: its pidfile, stats and log in the
    node's own tree (`home`); signalled by that pidfile only while the pid
    is still the process started with it."""

    def __init__(self, fault: str, home: str):
        self.pidfile = f"{home}/{fault}.pid"
        self.stats = f"{home}/{fault}.stats.json"
        self.log = f"{home}/{fault}.log"
        self.home = home

    def start_script(self, binary: str, args: list[str]) -> str:
        q = shlex.quote
        pidfile, stats, log_ = q(self.pidfile), q(self.stats), q(self.log)
        argv = " ".join(
            q(a) for a in [binary, *args, "-pidfile", self.pidfile, "-stats", self.stats]
        )
        return (
            f"mkdir -p {q(self.home)} && rm -f {pidfile} {stats} || exit 1; "
            f"setsid nohup {argv} >> {log_} 2>&1 < /dev/null & "
            "i=0; while [ ! -s " + pidfile + " ] && [ $i -lt 100 ]; do "
            "kill -0 $! 2>/dev/null || break; sleep 0.05; i=$((i+1)); done; "
            f"[ -s {pidfile} ] && cat {pidfile} || "
            f'{{ echo "qc-delay did not start: $(tail -c 400 {log_})" >&2; exit 1; }}'
        )

    def stop_script(self) -> str:
        """SIGTERM (it lets what it holds go, writes its stats), SIGKILL after
        5 s; then its stats, if any, read once."""
        q = shlex.quote
        f = q(self.pidfile)
        identity = q(f"-pidfile {self.pidfile} ")
        return (
            f"p=$(head -c 32 {f} 2>/dev/null | tr -dc 0-9); "
            f"ours() {{ [ -n \"$p\" ] && tr '\\0' ' ' < /proc/$p/cmdline 2>/dev/null "
            f"| grep -qF -- {identity}; }}; "
            "if ours; then kill -TERM $p; i=0; "
            "while ours && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; "
            "ours && kill -KILL $p; fi; "
            f"rm -f {f}; cat {q(self.stats)} 2>/dev/null; rm -f {q(self.stats)}; true"
        )

    def start(self, node: Remote, binary: str, args: list[str]) -> int:
        self.stop(node)
        out = node.run(self.start_script(binary, args), timeout=30).out.strip()
        if not out.isdigit():
            raise RemoteError(f"{node.name}: qc-delay wrote no pid ({out[:200]!r})")
        return int(out)

    def stop(self, node: Remote) -> dict[str, Any] | None:
        out = node.run(self.stop_script(), timeout=30, check=False).out.strip()
        try:
            return json.loads(out.splitlines()[-1]) if out else None
        except ValueError:
            return {"unreadable-stats": out[-200:]}


# -- the faults ----------------------------------------------------------------


class _SlowNetwork:
    """A strike: a kind of link at random, the nodes holding it, each one
    slowed by the subclass's `_slow` and healed by its `_heal`."""

    name: ClassVar[str]
    summary: ClassVar[str]
    colour: ClassVar[str]
    options: ClassVar[tuple[type, ...]]
    instant = False

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        refuse_cluster_file(cls.name, settings)
        links = settings.of(SlowLinkOptions).slow_links
        if links == ["broker-broker"] and settings.nodes == 1:
            raise OptionError("--slow-links broker-broker: one node has no link to another broker")
        if "node" in links:
            refuse_targets(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext):
        where = ctx.settings.of(NodeOptions)
        return cls(
            ctx.nodes,
            ctx.settings,
            ctx.settings.of(SlowLinkOptions).slow_links,
            ctx.settings.of(TargetOptions).fault_targets,
            ctx.db,
            where.data_base(),
            where.state,
        )

    def __init__(
        self,
        nodes: list[Remote],
        settings: Settings | None = None,
        links: list[str] | None = None,
        allowed: list[str] | None = None,
        db: Any = None,
        base: str = "/var/lib/queuecheck",
        state: str | Path = ".state",
    ):
        self.nodes = nodes
        self.links = list(links or LINKS)
        self.aim = Aim(allowed)
        self.db = db
        self.base = base
        self.state = state
        self.held: list[Held] = []
        self.kind: str | None = None
        self.configure(settings)

    def configure(self, settings: Settings | None) -> None:
        """Reads the fault's own settings (the defaults without any)."""

    def home(self, node: Remote) -> str:
        return f"{self.base}/{node.name}/slow-network"

    def settings_value(self) -> dict[str, Any]:
        raise NotImplementedError

    def _slow(self, node: Remote, held: Held) -> None:
        raise NotImplementedError

    def _heal(self, node: Remote) -> Any:
        raise NotImplementedError

    def _leftovers(self, node: Remote) -> None:
        """Removes what this fault may have left on the node (the teardown
        catches what it raises)."""
        raise NotImplementedError

    def start(self, rng: random.Random) -> Any:
        kind = rng.choice(self.links)
        note: dict[str, Any] = {}
        struck = None
        if kind == "node":
            struck, note = self.aim.pick(self.nodes, rng, self.db)
        self.kind, self.held = kind, plan(kind, self.nodes, struck)
        by_name = {n.name: n for n in self.nodes}
        on_all([by_name[h.node] for h in self.held], lambda n: self._slow(n, self._of(n)))
        return {
            "links": kind,
            **note,
            "held": [link for h in self.held for link in h.names()],
            **self.settings_value(),
        }

    def _of(self, node: Remote) -> Held:
        return next(h for h in self.held if h.node == node.name)

    def stop(self) -> Any:
        by_name = {n.name: n for n in self.nodes}
        struck = [by_name[h.node] for h in self.held]
        done = dict(zip([n.name for n in struck], on_all(struck, self._heal), strict=True))
        value = {"links": self.kind, "held": [x for h in self.held for x in h.names()], **done}
        self.held, self.kind = [], None
        return value

    def active(self) -> bool:
        return bool(self.held)

    def teardown(self) -> None:
        def clean(node: Remote) -> None:
            try:
                self._leftovers(node)
            except Exception as e:  # noqa: BLE001 - teardown survives its own failures
                log.warning("%s: %s teardown: %s", node.name, self.name, e)

        try:
            on_all(self.nodes, clean)
        except Exception as e:  # noqa: BLE001 - never raises
            log.warning("%s teardown: %s", self.name, e)
        self.held, self.kind = [], None


class _Queued(_SlowNetwork):
    """Delay, reorder, duplicate: qc-delay fed by the fault's chain."""

    chain_name: ClassVar[str]
    queue: ClassVar[int]
    mark: ClassVar[int]

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.chain = Chain(self.chain_name, hook="OUTPUT")
        self.binary: str | None = None

    def daemon(self, node: Remote) -> Daemon:
        return Daemon(self.name, self.home(node))

    def daemon_args(self) -> list[str]:
        raise NotImplementedError

    def setup(self) -> None:
        exe = delayer.build(self.state)
        remote = f"{DIST_ROOT}/{exe.name}"
        listing = manifest(exe.parent, exe.name)
        for node in self.nodes:  # one at a time: namespace nodes share one file system
            push_dir(node, exe.parent, remote, listing, exe.name)
        self.binary = f"{remote}/{exe.name}"

        def ready(node: Remote) -> None:
            self._leftovers(node)
            self.chain.ensure(node)

        on_all(self.nodes, ready)

    def _slow(self, node: Remote, held: Held) -> None:
        assert self.binary, "setup() first"
        self.daemon(node).start(node, self.binary, self.daemon_args())
        self.chain.add(node, queue_rules(held, self.queue, self.mark))

    def _heal(self, node: Remote) -> Any:
        self.chain.flush(node)  # no packet is queued any more ...
        return self.daemon(node).stop(node)  # ... and those held go

    def _leftovers(self, node: Remote) -> None:
        try:
            self.chain.remove(node)
        finally:
            self.daemon(node).stop(node)


def _ms(value: float) -> str:
    """Milliseconds as a Go duration, to the microsecond."""
    return f"{value * 1000:.0f}us"


class DelayNemesis(_Queued):
    name = "delay"
    summary = (
        "packets the struck links carry held a while (--delay-ms, --delay-jitter-ms, "
        "--delay-correlation; --slow-links)"
    )
    colour = "#ffcc80"
    options = (SlowLinkOptions, TargetOptions, DelayOptions)
    chain_name, queue, mark = "QC-DELAY", 5601, 0x100000

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        o = settings.of(DelayOptions)
        if o.delay_jitter_ms > o.delay_ms:
            raise OptionError(
                f"--delay-jitter-ms {o.delay_jitter_ms:g}: at most --delay-ms ({o.delay_ms:g}); "
                "a packet cannot leave before it was sent"
            )
        super().refuse(db, settings)

    def configure(self, settings: Settings | None) -> None:
        self.o = settings.of(DelayOptions) if settings else DelayOptions()

    def settings_value(self) -> dict[str, Any]:
        o = self.o
        return {
            "delay-ms": o.delay_ms,
            "jitter-ms": o.delay_jitter_ms,
            "correlation": o.delay_correlation,
        }

    def daemon_args(self) -> list[str]:
        o = self.o
        return [
            *("-queue", str(self.queue), "-mark", f"{self.mark:#x}"),
            *("-delay", _ms(o.delay_ms), "-jitter", _ms(o.delay_jitter_ms)),
            *("-correlation", f"{o.delay_correlation:g}", "-lifetime", f"{LIFETIME_S}s"),
        ]


class ReorderNemesis(_Queued):
    name = "reorder"
    summary = (
        "a share of the struck links' packets sent ahead of the others, held a while "
        "(--reorder-probability, --reorder-correlation, --reorder-delay-ms; --slow-links)"
    )
    colour = "#ffab91"
    options = (SlowLinkOptions, TargetOptions, ReorderOptions)
    chain_name, queue, mark = "QC-REORDER", 5602, 0x200000

    def configure(self, settings: Settings | None) -> None:
        self.o = settings.of(ReorderOptions) if settings else ReorderOptions()

    def settings_value(self) -> dict[str, Any]:
        o = self.o
        return {
            "probability": o.reorder_probability,
            "correlation": o.reorder_correlation,
            "delay-ms": o.reorder_delay_ms,
        }

    def daemon_args(self) -> list[str]:
        o = self.o
        return [
            *("-queue", str(self.queue), "-mark", f"{self.mark:#x}"),
            *("-delay", _ms(o.reorder_delay_ms), "-reorder", f"{o.reorder_probability:g}"),
            *("-reorder-correlation", f"{o.reorder_correlation:g}"),
            *("-lifetime", f"{LIFETIME_S}s"),
        ]


class DuplicateNemesis(_Queued):
    name = "duplicate"
    summary = (
        "a share of the struck links' packets sent twice (--duplicate-probability, "
        "--duplicate-correlation; --slow-links)"
    )
    colour = "#e6ee9c"
    options = (SlowLinkOptions, TargetOptions, DuplicateOptions)
    chain_name, queue, mark = "QC-DUPLICATE", 5603, 0x400000

    def configure(self, settings: Settings | None) -> None:
        self.o = settings.of(DuplicateOptions) if settings else DuplicateOptions()

    def settings_value(self) -> dict[str, Any]:
        return {
            "probability": self.o.duplicate_probability,
            "correlation": self.o.duplicate_correlation,
        }

    def daemon_args(self) -> list[str]:
        o = self.o
        return [
            *("-queue", str(self.queue), "-mark", f"{self.mark:#x}"),
            *("-duplicate", f"{o.duplicate_probability:g}"),
            *("-duplicate-correlation", f"{o.duplicate_correlation:g}"),
            *("-lifetime", f"{LIFETIME_S}s"),
        ]


class RateNemesis(_SlowNetwork):
    name = "rate"
    summary = "the struck links' bandwidth capped (--rate-kbit; --slow-links)"
    colour = "#c5e1a5"
    options = (SlowLinkOptions, TargetOptions, RateOptions)

    def configure(self, settings: Settings | None) -> None:
        self.o = settings.of(RateOptions) if settings else RateOptions()

    def settings_value(self) -> dict[str, Any]:
        return {"rate-kbit": self.o.rate_kbit}

    def setup(self) -> None:
        on_all(self.nodes, self._leftovers)

    def _slow(self, node: Remote, held: Held) -> None:
        node.run(REMOVE_RATE, timeout=20)
        r = node.run(rate_script(held, self.o.rate_kbit), timeout=30, check=False)
        if r.exit != 0:
            node.run(REMOVE_RATE, timeout=20, check=False)
            raise RemoteError(f"{node.name}: tc refused the rate fault's qdisc: {r.err[-300:]}")

    def _heal(self, node: Remote) -> Any:
        shown = node.run(
            "for dev in $(ls /sys/class/net); do [ $dev = lo ] || "
            f"tc -s qdisc show dev $dev root | grep -A1 ' {RATE_HANDLE}: '; done; true",
            timeout=20,
            check=False,
        ).out
        node.run(REMOVE_RATE, timeout=20)
        return rate_counts(shown)

    def _leftovers(self, node: Remote) -> None:
        node.run(REMOVE_RATE, timeout=20, check=False)


SLOW_FAULTS = (DelayNemesis, ReorderNemesis, DuplicateNemesis, RateNemesis)


def heal_leftovers(nodes: list[Remote], base: str) -> None:
    """What any slow fault of a killed run left on `nodes` (their data tree
    under `base`): chains, delayers, qdiscs. Never raises."""
    for cls in SLOW_FAULTS:
        cls(nodes, base=base).teardown()
