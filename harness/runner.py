"""`queuecheck test`: one run, start to verdict.

    nodes (local namespace cluster or a cluster file) → broker set up on
    every node → clients and nemesis → main phase (ops + faults) → final
    phase (heal, recover, drain) → teardown (always: logs, heal, stop) →
    checker → results.json and the verdict.

The history is opened before the first op and every op is flushed as it
completes, so a run that is interrupted (Ctrl-C, SIGTERM) or killed still
leaves a checkable prefix; Ctrl-C and SIGTERM also heal and tear down.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from nemesis.base import Nemesis
from nemesis.iptables import heal_leftovers
from nemesis.schedule import Schedule
from workloads.base import Client, describe
from workloads.sinks import DATABASES, SINKS, TABLE_SINKS, Sink, make_sink

from .db import DB, DBError
from .generator import QueueOps
from .history import HISTORY_FILE, HistoryWriter
from .interpreter import Interpreter, unknown
from .progress import Progress
from .remote import NodeSpec, Remote
from .store import new_run_dir, write_test

log = logging.getLogger(__name__)

NEMESES = ("partition", "kill", "pause", "loss", "crash-client")
DRAIN_PROCESS_BASE = 1_000_000  # drain processes are numbered apart from the workers
EFFECTS_PROCESS = 2_000_000  # who reads the sink at the end


class RunError(RuntimeError):
    """A run that could not start or finish; the message names the step and node."""


@dataclass
class RunOptions:
    system: str = "rabbitmq"
    name: str | None = None
    # nodes
    nodes: int = 3
    cluster_file: str | None = None
    subnet: str = "10.77.0.0/24"
    bridge: str = "qcbr0"
    prefix: str = "qc-"
    state: str = ".state"
    store: str = "store"
    # the run
    time_limit: float = 60.0
    rate: float = 0.0
    concurrency: int = 10
    producers: int | None = None  # default: half the concurrency
    op_timeout: float = 10.0
    recovery_timeout: float = 120.0
    seed: int | None = None
    # faults
    nemesis: list[str] = field(default_factory=lambda: ["partition", "kill", "pause"])
    nemesis_interval: float = 10.0
    partition_shapes: list[str] | None = None
    loss_probability: float = 0.3
    crash_point: str = "next-op"  # where crash-client strikes a consumer (nemesis/client_crash)
    crash_clients: str = "consumers"  # whom it strikes: consumers, producers, both
    # the consumers' side effect: None, or a sink of workloads/sinks (naive,
    # dedupe, kafka-txn); the table sinks' database: sqlite or postgres
    sink: str | None = None
    sink_db: str = "sqlite"
    # the system's own options (RabbitMQOptions / queue options ...)
    system_options: dict[str, Any] = field(default_factory=dict)
    # judging
    check: bool = True
    spark_master: str | None = None
    driver_memory: str = "4g"

    def __post_init__(self) -> None:
        unknown_faults = [n for n in self.nemesis if n not in NEMESES]
        if unknown_faults:
            raise RunError(
                f"--nemesis: unknown fault {unknown_faults[0]!r}; known: {', '.join(NEMESES)}"
            )
        if self.concurrency < 2:
            raise RunError("--concurrency: needs at least 2 (a producer and a consumer)")
        if self.producers is None:
            self.producers = self.concurrency // 2
        if not 0 < self.producers < self.concurrency:
            raise RunError(f"--producers: must be in 1..{self.concurrency - 1}")
        from nemesis.client_crash import POINTS, TARGETS

        if self.crash_point not in POINTS:
            raise RunError(f"--crash-point: {self.crash_point!r} is not one of {', '.join(POINTS)}")
        if self.crash_clients not in TARGETS:
            raise RunError(
                f"--crash-clients: {self.crash_clients!r} is not one of {', '.join(TARGETS)}"
            )
        if self.sink is not None and self.sink not in SINKS:
            raise RunError(f"--sink: {self.sink!r} is not one of {', '.join(SINKS)}")
        if self.sink == "kafka-txn" and self.system != "kafka":
            raise RunError("--sink kafka-txn: a Kafka transaction; it needs --system kafka")
        if self.sink_db not in DATABASES:
            raise RunError(f"--sink-db: {self.sink_db!r} is not one of {', '.join(DATABASES)}")


@dataclass
class System:
    """What a run needs from one broker: its lifecycle, its clients, its claims."""

    db: DB
    new_client: Callable[..., Client]  # (node, sink=None): a client on that node
    prepare: Callable[[], None]  # e.g. declare the queue, once the cluster serves
    queue: str
    claims: list[str]
    claim_notes: list[str]
    config: dict[str, Any]  # what test.json records of the system
    send_batch: int = 1  # messages per send op (or send mops per txn op)
    txn: bool = False  # producers run `txn` ops instead of `send`
    # Given the history once it is open: for clients that record ops of their
    # own process besides their completions (e.g. Kafka's rebalances, `assign`).
    attach: Callable[[HistoryWriter], None] | None = None
    drain_all_nodes: bool = True  # False: one node's client reads everything (Kafka)
    # The system's own sink (kafka-txn), for --sink values that are not a table sink.
    own_sink: Callable[[], Sink] | None = None


def build_system(opts: RunOptions, nodes: list[Remote]) -> System:
    if opts.system == "rabbitmq":
        from .systems import rabbitmq

        return rabbitmq(opts, nodes)
    if opts.system == "kafka":
        from .systems import kafka

        return kafka(opts, nodes)
    raise RunError(f"--system: {opts.system!r} is not supported (known: rabbitmq, kafka)")


def default_name(opts: RunOptions) -> str:
    """system-flavour: rabbitmq-quorum, kafka-acks-all, kafka-acks-all-txn ..."""
    o = opts.system_options
    if opts.system == "kafka":
        txn = ["txn"] if o.get("txn") else []
        return "-".join(["kafka", f"acks-{o.get('acks', 'all')}", *txn])
    flavour = o.get("queue_type")
    return "-".join([opts.system, *([flavour] if flavour else [])])


def node_specs(opts: RunOptions) -> list[NodeSpec]:
    if opts.cluster_file:
        from .nodes import load_cluster_file

        return load_cluster_file(opts.cluster_file)
    from .localcluster import LocalCluster

    cluster = LocalCluster(
        nodes=opts.nodes,
        subnet=opts.subnet,
        bridge=opts.bridge,
        prefix=opts.prefix,
        state=Path(opts.state) / "cluster",
    )
    return cluster.up()


def make_faults(opts: RunOptions, system: System, nodes: list[Remote], interp) -> list[Nemesis]:
    from nemesis.client_crash import ClientCrashNemesis
    from nemesis.loss import LossNemesis
    from nemesis.partition import PartitionNemesis
    from nemesis.process import KillNemesis, PauseNemesis

    made: dict[str, Callable[[], Nemesis]] = {
        "partition": lambda: PartitionNemesis(nodes, opts.partition_shapes),
        "kill": lambda: KillNemesis(system.db),
        "pause": lambda: PauseNemesis(system.db),
        "loss": lambda: LossNemesis(nodes, opts.loss_probability),
        # consumers: the slots past the producers
        "crash-client": lambda: ClientCrashNemesis(
            interp,
            consumers=list(range(opts.producers, opts.concurrency)),
            producers=list(range(opts.producers)),
            point=opts.crash_point,
            target=opts.crash_clients,
        ),
    }
    return [made[n]() for n in opts.nemesis]


def _log_to(run: Path) -> logging.Handler:
    handler = logging.FileHandler(run / "harness.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    # pika logs every lost connection with a traceback; the history has them.
    logging.getLogger("pika").setLevel(logging.CRITICAL)
    return handler


class Interrupted(Exception):
    """The run was interrupted; its history and logs are kept (the message: the run dir)."""


def _raise_interrupt(signum, frame):  # SIGTERM behaves like Ctrl-C: heal, keep what we have
    raise KeyboardInterrupt


class Run:
    def __init__(self, opts: RunOptions, console: Console | None = None):
        self.opts = opts
        self.console = console or Console()
        self.progress = Progress(self.console)
        self.run_dir: Path | None = None
        self.stats: dict[str, Any] = {}
        self.gen: QueueOps | None = None
        self.sink: Sink | None = None

    # -- the whole run ----------------------------------------------------
    def execute(self) -> tuple[Path, dict[str, Any] | None]:
        """Runs the test; returns the run directory and the results (None if not checked)."""
        opts = self.opts
        name = opts.name or default_name(opts)
        self.run_dir = run = new_run_dir(name, Path(opts.store))
        handler = _log_to(run)
        old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        history = nodes = system = schedule = interp = None
        interrupted = False
        try:
            self.progress.phase(f"run directory {run}")
            self.progress.phase("nodes: connecting")
            nodes = [Remote(s) for s in node_specs(opts)]
            for node in nodes:
                node.run("true", timeout=15)  # unreachable → one error naming the node
            system = build_system(opts, nodes)
            write_test(run, self._test_doc(name, nodes, system))
            # A killed run may have left cuts in place: heal them before the broker starts
            # (a paused leftover broker is resumed and stopped by the db's own setup).
            heal_leftovers(nodes)
            self.progress.phase(f"{system.db.name}: setting up {len(nodes)} nodes")
            system.db.setup()
            system.prepare()
            # The history starts with the test itself: its times are seconds into the run.
            history = HistoryWriter(run / HISTORY_FILE)
            if system.attach:
                system.attach(history)
            self.gen = gen = QueueOps(
                system.queue,
                opts.producers,
                opts.time_limit,
                opts.rate,
                batch=system.send_batch,
                txn=system.txn,
            )
            if opts.sink:
                try:
                    if opts.sink in TABLE_SINKS:
                        self.sink = make_sink(opts.sink, run, opts.sink_db)
                    elif system.own_sink is not None:
                        self.sink = system.own_sink()
                    else:
                        raise ValueError(f"--sink {opts.sink}: not a sink of {opts.system}")
                except ValueError as e:
                    raise RunError(str(e)) from None
                gen.keep_consuming = True  # every message gets processed before the drain
            interp = Interpreter(
                history,
                lambda i: system.new_client(nodes[i % len(nodes)], sink=self.sink),
                gen,
                opts.concurrency,
                opts.op_timeout,
                track_unprocessed=self.sink is not None,
            )
            schedule = Schedule(
                make_faults(opts, system, nodes, interp),
                history,
                opts.nemesis_interval,
                opts.seed,
            )
            schedule.setup()
            self.progress.phase(
                f"main phase: {opts.time_limit:.0f} s, concurrency {opts.concurrency}, "
                f"nemesis {', '.join(opts.nemesis) or 'none'}"
            )
            self._main_phase(gen, interp, schedule)
            self._final_phase(history, system, nodes, schedule, interp)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.done()
            self.console.print("[yellow]interrupted: healing, tearing down, keeping the history[/]")
        finally:
            self.progress.done()
            self._teardown(run, history, nodes, system, schedule, interp)
            signal.signal(signal.SIGTERM, old_term)
            logging.getLogger().removeHandler(handler)
            handler.close()
        if interrupted:
            raise Interrupted(str(run))
        if not opts.check:
            return run, None
        self.progress.phase("checking the history")
        from checkers.job import RESULTS_FILE, check, write_results

        doc = check(run, master=opts.spark_master, driver_memory=opts.driver_memory)
        write_results(doc, run / RESULTS_FILE)
        self.progress.phase("writing report.html and junit.xml")
        from reports.build import build_reports

        build_reports(run, doc, master=opts.spark_master, driver_memory=opts.driver_memory)
        return run, doc

    def _test_doc(self, name: str, nodes: list[Remote], system: System) -> dict[str, Any]:
        doc = asdict(self.opts)
        doc.update(
            name=name,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            nodes=[{"name": n.name, "host": n.spec.host} for n in nodes],
            config=system.config,
            claims=system.claims,
            claim_notes=system.claim_notes,
        )
        return doc

    # -- phases -----------------------------------------------------------
    def _main_phase(self, gen: QueueOps, interp: Interpreter, schedule: Schedule) -> None:
        cpu0 = time.process_time()
        gen.begin()
        interp.start()
        schedule.start()

        def status() -> str:
            c = interp.counts
            f = "txn" if gen.txn else "send"
            rate = interp.acked / max(gen.elapsed(), 1e-9)
            faults = ", ".join(sorted(schedule.active_names)) or "none"
            return (
                f"main {gen.elapsed():5.0f}/{gen.time_limit:.0f} s | "
                f"{f} ok {c[(f, 'ok')]} fail {c[(f, 'fail')]} info {c[(f, 'info')]} | "
                f"receive ok {c[('receive', 'ok')]} info {c[('receive', 'info')]} | "
                f"{rate:,.0f} acked msgs/s | faults: {faults}"
            )

        self.progress.running(status)
        while not gen.done():
            time.sleep(0.25)
            self.progress.tick()
        self.progress.tick()
        self.progress.done()
        elapsed = gen.elapsed()
        self.stats["main-phase-seconds"] = round(elapsed, 3)
        # messages, not ops: a send op may carry several
        self.stats["acknowledged"] = interp.acked
        self.stats["acknowledged-per-second"] = round(interp.acked / elapsed, 1)
        # Cores the harness itself used: near 1.0 would mean Python, not the broker, is the limit.
        self.stats["harness-cpu-cores"] = round((time.process_time() - cpu0) / elapsed, 2)

    def _stop_clients(self, interp: Interpreter) -> None:
        """No new ops; in-flight ones finish (or hit their deadline); clients close,
        so unacked deliveries go back to the queue."""
        self.gen.stop.set()
        if not interp.join(timeout=self.opts.op_timeout + 5):
            log.warning("some workers were still stuck after the main phase")
        self.stats["completions"] = {f"{f}:{t}": n for (f, t), n in sorted(interp.counts.items())}
        interp.close()

    def _final_phase(self, history, system: System, nodes, schedule, interp) -> None:
        """Heal, recover, drain. With a sink the consumers keep processing through
        the recovery until nothing more arrives, and the sink is read at the end."""
        opts = self.opts
        if not self.sink:
            self.progress.phase("final phase: stopping clients")
            self._stop_clients(interp)
        self.progress.phase("final phase: healing every fault")
        schedule.heal()
        self.progress.phase(f"final phase: waiting for {system.db.name} to recover")
        try:
            system.db.await_cluster(opts.recovery_timeout)
            self.stats["recovered"] = True
        except DBError as e:
            # A finding, not a harness failure: the history is still judged. Without a
            # drain no loss can be proven, so at-least-once becomes unknown, not violated.
            self.stats["recovered"] = False
            self.stats["recovery-error"] = str(e)
            self.console.print(f"[bold red]the cluster did not recover after healing:[/] {e}")
        if self.sink:
            if self.stats["recovered"]:
                self.progress.phase("final phase: consumers process what is left")
                self._settle(interp)
            self._stop_clients(interp)
        if self.stats["recovered"]:
            self.progress.phase("final phase: draining every node")
            readers = nodes if system.drain_all_nodes else nodes[:1]
            drained = drain(history, [system.new_client(n) for n in readers], opts)
            self.stats["drained"] = drained
            self.progress.phase(f"drained {drained} messages")
        # Unrecovered, what never reached the sink proves nothing: no final read of
        # it either, so exactly-once-effect is unknown rather than a false violation.
        if self.sink and self.stats["recovered"]:
            try:
                # The first chunk is written only once the read is under way: a sink
                # that cannot be read leaves no effects ops (unknown, not lost).
                n = write_effects(history, self.sink.counts())
            except Exception as e:  # noqa: BLE001 - recorded; the run is judged without it
                self.stats["sink-read-error"] = describe(e)
                self.console.print(f"[bold red]could not read the {self.sink.name} sink:[/] {e}")
                return
            self.progress.phase(f"read the {self.sink.name} sink: {n} messages took effect")

    def _settle(self, interp: Interpreter, quiet: float = 3.0) -> None:
        """Until every acknowledged message was handed to a consumer and nothing
        new came for `quiet` s; or, when some never come (lost, or held by an
        open transaction), until nothing new came for long enough that a
        rebalance or a transaction timeout would have ended meanwhile."""
        patience = max(20.0, 2 * self.opts.op_timeout)
        deadline = time.monotonic() + self.opts.recovery_timeout
        last, since = interp.delivered, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if interp.delivered != last:
                last, since = interp.delivered, time.monotonic()
            idle = time.monotonic() - since
            if idle >= patience or (idle >= quiet and interp.unprocessed.count <= 0):
                break
        self.stats["unprocessed-at-drain"] = interp.unprocessed.count

    def _teardown(self, run, history, nodes, system, schedule, interp) -> None:
        """Always runs, survives its own failures, keeps what was recorded."""
        steps: list[tuple[str, Callable[[], None]]] = []
        if interp:
            steps.append(("stop clients", lambda: self._stop_clients(interp)))
        if schedule:
            steps.append(("heal", schedule.heal))
        if system and nodes:
            for node in nodes:
                steps.append(
                    (
                        f"{node.name}: logs",
                        lambda n=node: system.db.collect_logs(n, run / "nodes" / n.name),
                    )
                )
        if schedule:
            steps.append(("nemesis teardown", schedule.teardown))
        if system and nodes:
            for node in nodes:
                steps.append((f"{node.name}: teardown", lambda n=node: system.db.teardown(n)))
        if history:
            steps.append(("close history", history.close))
        if self.sink:
            steps.append(("close sink", self.sink.close))
        if nodes:
            steps.append(("ssh", lambda: [n.close() for n in nodes]))
        self.progress.phase("teardown: logs, heal, stop brokers")
        for what, step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 - one failed step must not skip the rest
                log.warning("teardown step %s failed: %s", what, e)
        (run / "stats.json").write_text(json.dumps(self.stats, indent=2) + "\n")


def write_effects(history: HistoryWriter, counts, chunk: int = 10_000) -> int:
    """The final read of the sink, (id, count) pairs, as `effects` ops (one at
    least, even if empty: it says the sink was read); returns how many ids
    have an effect."""
    batch: list[dict] = []
    total = 0

    def flush() -> None:
        history.append(
            {"process": EFFECTS_PROCESS, "type": "ok", "f": "effects", "value": {"effects": batch}}
        )

    for i, n in counts:
        batch.append({"id": i, "count": n})
        total += 1
        if len(batch) == chunk:
            flush()
            batch = []
    if batch or total == 0:
        flush()
    return total


def drain(history: HistoryWriter, clients: list[Client], opts: RunOptions) -> int:
    """Reads every node's queue to the end: drain ops until one comes back empty.

    A client connects before its first drain is invoked (a drain that was
    invoked and did not come back ok leaves the final read incomplete, and
    the checker then cannot prove a loss). Each op has a deadline."""
    total = 0
    for i, client in enumerate(clients):
        process = DRAIN_PROCESS_BASE + i
        deadline = time.monotonic() + opts.recovery_timeout
        while True:
            try:
                client.open()
                break
            except Exception as e:  # noqa: BLE001 - keep trying until the deadline
                if time.monotonic() > deadline:
                    raise RunError(
                        f"{client.node}: cannot connect to drain: {describe(e)}"
                    ) from None
                time.sleep(0.5)
        try:
            while True:
                inv = history.append(
                    {
                        "process": process,
                        "type": "invoke",
                        "f": "drain",
                        "node": client.node,
                        "value": None,
                    }
                )
                rec = history.append(_call_with_deadline(client, inv, opts.op_timeout * 3))
                if rec["type"] != "ok":
                    break  # the read is incomplete: recorded, and the checker says so
                client.after_recorded(rec)
                total += len(rec["value"]["msgs"])
                if not rec["value"]["msgs"]:
                    break
        finally:
            client.close()
    return total


def _call_with_deadline(client: Client, op: dict, timeout: float) -> dict:
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["rec"] = client.invoke(op)
        except Exception as e:  # noqa: BLE001 - an error is an unknown outcome
            box["rec"] = unknown(op, describe(e))

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(timeout)
    if t.is_alive():
        client.abort()
        return unknown(op, f"no answer within {timeout:.0f} s")
    return box["rec"]
