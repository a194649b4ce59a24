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
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from checkers.options import SparkOptions
from nemesis.base import FaultContext, Nemesis
from nemesis.client_crash import POINTS, TARGETS
from nemesis.grudge import AIMED_SHAPES, DATA_ONLY_SHAPES, SHAPES
from nemesis.iptables import heal_leftovers
from nemesis.profiles import PROFILES
from nemesis.profiles import help_text as profiles_help
from nemesis.registry import FAULTS
from nemesis.registry import help_text as faults_help
from nemesis.schedule import Schedule
from nemesis.targets import TARGETS as NODE_TARGETS
from nemesis.upgrade import RollingUpgrade
from workloads.client import NEXT_OP, Client, describe
from workloads.registry import SYSTEMS
from workloads.sinks import DATABASES, TABLE_SINKS, Sink, make_table_sink
from workloads.sinks.postgres import stop_leftovers as stop_leftover_servers
from workloads.system import RunContext, System

from .generator import QueueOps
from .history import HISTORY_FILE, HistoryWriter
from .interpreter import Interpreter, unknown
from .nodes import NodeOptions
from .nodes.remote import Remote
from .options import OptionError, check_choices, default_of, option
from .progress import CheckProgress, Progress
from .recovery import recover
from .store import StoreOptions, new_run_dir, write_test

log = logging.getLogger(__name__)

DRAIN_PROCESS_BASE = 1_000_000  # drain processes are numbered apart from the workers
EFFECTS_PROCESS = 2_000_000  # who reads the sink at the end
ALL_SINKS = tuple(dict.fromkeys(s for cls in SYSTEMS.values() for s in cls.sinks()))


class RunError(RuntimeError):
    """A run that could not start or finish; the message names the step and node."""


@dataclass
class RunOptions(NodeOptions, StoreOptions, SparkOptions):
    """One run's options. Each field is declared once, here or in the classes
    it extends; the CLI's flags are derived from them (harness/options.py).
    The system's own options go, as a dict, in `system_options`."""

    system: str = option(next(iter(SYSTEMS)), "the broker", choices=SYSTEMS)
    name: str | None = option(
        None, "test name in the store", shown_default="the system and its flavour"
    )
    # the run
    time_limit: float = option(60.0, "main phase, seconds")
    rate: float = option(0.0, "sends per second, 0 = unbounded")
    concurrency: int = option(10, "client processes")
    producers: int | None = option(
        None,
        "of which producers (all of them: nothing is read before the final drain)",
        shown_default="half",
    )
    op_timeout: float = option(10.0, "deadline of one op, seconds")
    recovery_timeout: float = option(120.0, "seconds to recover after healing")
    operator_restart: bool = option(
        True,
        "when the cluster or the test's queue is still stuck --recovery-timeout s after the "
        "final heal, restart the stuck nodes once (recorded as nemesis ops) and wait again",
    )
    seed: int | None = option(None, "nemesis random seed")
    # faults
    nemesis: list[str] = option(
        default_factory=lambda: ["partition", "kill", "pause"],
        help=f"faults, comma-separated, or none ({faults_help()})",
        choices=FAULTS,
    )
    nemesis_interval: float = option(10.0, "seconds between faults")
    nemesis_overlap: bool = option(
        False, "each fault kind on its own rhythm, so faults of different kinds overlap"
    )
    nemesis_profile: str | None = option(
        None,
        f"a named fault mix; options given explicitly win ({profiles_help()})",
        choices=PROFILES,
    )
    partition_shapes: list[str] = option(
        default_factory=lambda: list(SHAPES),
        help="partition shapes, one at random per partition; isolate-primary cuts a leader "
        "of the test's partitions or queues from the other brokers (not from clients); "
        "isolate-primary-data only from their replication, for brokers whose controllers "
        "talk on a port of their own; isolate-replica cuts off a node that leads none of them",
        choices=SHAPES + AIMED_SHAPES,
    )
    fault_targets: list[str] = option(
        default_factory=lambda: ["one"],
        help="whom kill, pause and loss strike, one of these at random per fault: one, "
        "minority, majority, all (nodes at random), primaries (the leaders of the test's "
        "partitions or queues, asked of the broker then), controller (its active controller, "
        "for brokers that have one)",
        choices=NODE_TARGETS,
    )
    loss_probability: float = option(0.3, "share of packets the loss fault drops")
    crash_point: str = option(
        NEXT_OP,
        "where crash-client strikes a consumer: before its next op, or while it processes "
        "its next delivery (random: one of the three processing moments)",
        choices=POINTS,
    )
    crash_clients: str = option(
        "consumers",
        "whom crash-client strikes; producers crash with a send in flight, which is then info",
        choices=TARGETS,
    )
    # the consumers' side effect: a table sink (naive, dedupe) or a system's own
    sink: str | None = option(
        None,
        "the consumers' side effect: naive or dedupe rows in a database, or a system's own "
        + "; ".join(
            f"{k} ({c.name}: {w})" for c in SYSTEMS.values() for k, w in c.own_sinks.items()
        ),
        choices=ALL_SINKS,
    )
    sink_db: str = option(
        DATABASES[0],
        "the table sinks' database: sqlite in the run directory, or a PostgreSQL server "
        "the tool starts (Debian's postgresql)",
        choices=DATABASES,
    )
    # the system's own options (its option classes' fields, by name)
    system_options: dict[str, Any] = field(default_factory=dict)
    # judging
    check: bool = option(True, "judge the history once recorded (--no-check: record only)")

    def __post_init__(self) -> None:
        try:
            super().__post_init__()  # nodes, Spark
            check_choices(self)
        except OptionError as e:
            raise RunError(str(e)) from None
        if self.nemesis_profile:
            defaults = {f.name: default_of(f) for f in fields(self)}
            for name, value in PROFILES[self.nemesis_profile][1].items():
                if getattr(self, name) == defaults[name]:
                    setattr(self, name, value)
        if self.concurrency < 1:
            raise RunError("--concurrency: needs at least 1")
        if self.producers is None:
            self.producers = max(1, self.concurrency // 2)
        # All producers is Jepsen's queue test: nothing is read before the final
        # drain, so whatever the brokers drop meanwhile is missing from it.
        if not 0 < self.producers <= self.concurrency:
            raise RunError(f"--producers: must be in 1..{self.concurrency}")
        if self.producers == self.concurrency and self.sink:
            raise RunError("--sink: needs consumers (--producers below --concurrency)")
        system = SYSTEMS[self.system]
        data_only = [s for s in self.partition_shapes if s in DATA_ONLY_SHAPES]
        if data_only and "partition" in self.nemesis and system.replication_port is None:
            raise RunError(
                f"--partition-shapes {data_only[0]}: cuts the brokers' replication port "
                f"alone, and {self.system} replicates on the port its nodes talk on"
            )
        try:
            system.check_options(self.system_options)
        except (OptionError, ValueError) as e:
            raise RunError(str(e)) from None
        existing = self.existing()  # before any node is reached: the file's errors first
        if existing and existing.system != self.system:
            raise RunError(
                f"{self.cluster_file}: [existing] runs {existing.system}, "
                f"not --system {self.system}"
            )
        if self.sink is not None and self.sink not in system.sinks():
            owner = next(c.name for c in SYSTEMS.values() if self.sink in c.own_sinks)
            raise RunError(
                f"--sink {self.sink}: {SYSTEMS[owner].own_sinks[self.sink]}; it needs "
                f"--system {owner}"
            )

    @property
    def consumers(self) -> int:
        return self.concurrency - self.producers

    def test_name(self) -> str:
        return self.name or SYSTEMS[self.system].default_name(self.system_options)


def run_fields(options: Any) -> dict[str, Any]:
    """The fields of another command's options (demo, matrix) that are
    RunOptions fields too: where the nodes are, the store, Spark ..."""
    names = {f.name for f in fields(RunOptions)}
    return {k: v for k, v in asdict(options).items() if k in names}


def stop_leftovers(nodes: list[Remote], where: NodeOptions, existing: bool = False) -> None:
    """What a killed run (kill -9: no teardown) left behind is stopped before
    anything starts: its iptables cuts, the brokers of every system (by
    pidfile, identity checked, on this cluster's data tree) and a sink
    database server it had started. Paused pids are resumed first by the
    brokers' own teardown."""
    heal_leftovers(nodes)
    if not existing:  # someone else's brokers are never ours to stop
        for cls in SYSTEMS.values():
            leftover = cls.leftover_db(nodes, where.data_base())
            each_node(nodes, "stopping leftovers", leftover.teardown)
    stop_leftover_servers(where.running_dir())


def build_system(opts: RunOptions, nodes: list[Remote]) -> System:
    ctx = RunContext(
        nodes=nodes,
        op_timeout=opts.op_timeout,
        consumers=opts.consumers,
        data_base=opts.data_base(),
        sink=opts.sink,
        sink_db=opts.sink_db,
        existing=opts.existing(),
    )
    try:
        return SYSTEMS[opts.system](ctx, opts.system_options)
    except (OptionError, ValueError) as e:
        raise RunError(str(e)) from None


def make_faults(opts: RunOptions, system: System, nodes: list[Remote], interp) -> list[Nemesis]:
    ctx = FaultContext(nodes=nodes, db=system.db, interpreter=interp, options=opts)
    try:
        return [FAULTS[name].build(ctx) for name in opts.nemesis]
    except ValueError as e:
        raise RunError(str(e)) from None


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


@contextmanager
def shielded(console: Console):
    """While the run heals and stops what it started, a further Ctrl-C or
    SIGTERM is noted, not obeyed: abandoning the teardown would leave cut
    networks and paused brokers behind (SIGKILL still works, and the next
    run or `cluster up` cleans up after it)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum, frame) -> None:
        console.print("[yellow]still healing and stopping what the run started; one moment[/]")

    old = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class Run:
    def __init__(self, opts: RunOptions, console: Console | None = None):
        self.opts = opts
        self.console = console or Console()
        self.progress = Progress(self.console)
        self.run_dir: Path | None = None
        self.stats: dict[str, Any] = {}
        self.gen: QueueOps | None = None
        self.sink: Sink | None = None
        self.upgrade: RollingUpgrade | None = None

    # -- the whole run ----------------------------------------------------
    def execute(self) -> tuple[Path, dict[str, Any] | None]:
        """Runs the test; returns the run directory and the results (None if not checked)."""
        opts = self.opts
        name = opts.test_name()
        self.run_dir = run = new_run_dir(name, Path(opts.store))
        handler = _log_to(run)
        old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        history = nodes = system = schedule = interp = None
        interrupted = False
        try:
            self.progress.phase(f"run directory {run}")
            self.progress.phase("nodes: connecting")
            nodes = [Remote(s) for s in opts.node_specs()]
            for node in nodes:
                node.run("true", timeout=15)  # unreachable → one error naming the node
            system = build_system(opts, nodes)
            write_test(run, self._test_doc(name, nodes, system))
            self.progress.phase("nodes: stopping what a killed run left")
            stop_leftovers(nodes, opts, existing=system.ctx.existing is not None)
            if system.ctx.existing:
                self.progress.phase(f"{system.db.name}: the existing cluster must serve")
            else:
                self.progress.phase(f"{system.db.name}: setting up {len(nodes)} nodes")
            system.db.setup()
            system.prepare()
            # again, with what setup installed and what prepare read from the brokers
            test_doc = self._test_doc(name, nodes, system)
            write_test(run, {**test_doc, "installed": system.db.installed})
            # The history starts with the test itself: its times are seconds into the run.
            # Its columnar sidecar is written as it goes: the check reads that,
            # sealed on close (a killed run's is not, and the JSONL decides).
            history = HistoryWriter(run / HISTORY_FILE, sidecar=True)
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
                        self.sink = make_table_sink(
                            opts.sink, run, opts.sink_db, opts.running_dir()
                        )
                    else:
                        self.sink = system.own_sink(opts.sink)
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
                overlap=opts.nemesis_overlap,
            )
            schedule.setup()
            if system.rolls_upgrade():
                self.upgrade = RollingUpgrade(
                    system.db,
                    schedule,
                    start_after=min(opts.nemesis_interval, opts.time_limit / 4),
                    sync_timeout=opts.recovery_timeout,
                )
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
            with shielded(self.console):
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

        with CheckProgress(self.progress) as progress:
            doc = check(run, **opts.spark(), spark_conf=opts.conf(), on_step=progress.step)
        write_results(doc, run / RESULTS_FILE)
        self.progress.phase("writing report.html and junit.xml")
        from reports.build import build_reports

        build_reports(run, doc, **opts.spark())
        return run, doc

    def _test_doc(self, name: str, nodes: list[Remote], system: System) -> dict[str, Any]:
        doc = asdict(self.opts)
        claims, notes = system.claims()
        doc.update(
            name=name,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            nodes=[{"name": n.name, "host": n.spec.host} for n in nodes],
            config=system.record(),
            claims=claims,
            claim_notes=notes,
        )
        return doc

    # -- phases -----------------------------------------------------------
    def _main_phase(self, gen: QueueOps, interp: Interpreter, schedule: Schedule) -> None:
        cpu0 = time.process_time()
        gen.begin()
        interp.start()
        schedule.start()
        if self.upgrade:
            self.upgrade.start()

        def status() -> str:
            c = interp.counts
            f = "txn" if gen.txn else "send"
            rate = interp.acked / max(gen.elapsed(), 1e-9)
            faults = ", ".join(sorted(schedule.active_names)) or "none"
            if self.upgrade:
                faults += f" | {self.upgrade.progress()}"
            return (
                f"main {gen.elapsed():5.0f}/{gen.time_limit:.0f} s | "
                f"{f} ok {c[(f, 'ok')]} fail {c[(f, 'fail')]} info {c[(f, 'info')]} | "
                f"receive ok {c[('receive', 'ok')]} info {c[('receive', 'info')]} | "
                f"{rate:,.0f} acked msgs/s | faults: {faults}"
            )

        self.progress.running(status)
        # A rolling upgrade happens during the main phase: while it is under
        # way the phase goes on (load and faults), up to a bound.
        steps = len(self.upgrade.db.nodes) + 1 if self.upgrade else 0
        longest = gen.time_limit + self.opts.recovery_timeout * steps
        while True:
            self._extend_for_upgrade(gen, longest)
            if gen.done():
                break
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

    def _extend_for_upgrade(self, gen: QueueOps, longest: float) -> None:
        """Keeps the phase's end ahead of the clock while the upgrade goes on."""
        up = self.upgrade
        if up and not up.done.is_set() and gen.time_limit - gen.elapsed() < 2:
            if gen.time_limit < longest:
                gen.time_limit = min(longest, gen.elapsed() + 2.0)
                self.stats["main-phase-extended-for-upgrade"] = True

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
        if self.upgrade and not self.upgrade.done.is_set():
            # the rolling upgrade finishes under the same load and faults first
            self.progress.phase("final phase: the rolling upgrade finishes")
            self.upgrade.wait()
        if not self.sink:
            self.progress.phase("final phase: stopping clients")
            self._stop_clients(interp)
        self.progress.phase("final phase: healing every fault")
        schedule.heal()
        self.progress.phase(f"final phase: waiting for {system.db.name} to recover")
        recovery = recover(system, nodes, schedule, opts.recovery_timeout, opts.operator_restart)
        self.stats.update(recovery.stats())
        # A finding, not a harness failure: the history is still judged. Without a
        # drain no loss can be proven, so at-least-once becomes unknown, not violated.
        if not recovery.recovered:
            self.console.print(
                f"[bold red]the cluster did not recover after healing ({recovery.story}):[/] "
                f"{escape(self.stats['recovery-error'])}"
            )
        elif recovery.restarted:
            self.console.print(
                "[bold yellow]the cluster did not recover by itself after healing; it "
                f"recovered {recovery.story}[/]"
            )
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
                self.console.print(
                    f"[bold red]could not read the {self.sink.name} sink:[/] {escape(str(e))}"
                )
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
        if self.upgrade:
            steps.append(("stop the rolling upgrade", self.upgrade.stop))
        if interp:
            steps.append(("stop clients", lambda: self._stop_clients(interp)))
        if schedule:
            steps.append(("heal", schedule.heal))
        if system and nodes:
            steps.append(
                (
                    "logs",
                    lambda: each_node(
                        nodes, "logs", lambda n: system.db.collect_logs(n, run / "nodes" / n.name)
                    ),
                )
            )
        if schedule:
            steps.append(("nemesis teardown", schedule.teardown))
        if system:
            steps.append(("remove the test's own topic or queue", system.cleanup))
        if system and nodes:
            steps.append(("teardown", lambda: each_node(nodes, "teardown", system.db.teardown)))
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


def each_node(nodes: list[Remote], what: str, step: Callable[[Remote], None]) -> None:
    """`step` on every node at once (a teardown of three nodes takes as long
    as one); a node's failure is logged and keeps no other node's step from running."""

    def one(node: Remote) -> None:
        try:
            step(node)
        except Exception as e:  # noqa: BLE001 - teardown survives its own failures
            log.warning("teardown step %s: %s failed: %s", node.name, what, e)

    threads = [threading.Thread(target=one, args=(n,), name=f"{what}-{n.name}") for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


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
