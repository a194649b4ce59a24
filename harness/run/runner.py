"""`queuecheck test`: one run, start to verdict.

    nodes (local namespace cluster or a cluster file) → broker set up on
    every node → clients and nemesis → main phase (ops + faults) → final
    phase (heal, recover, drain) → teardown (always: logs, heal, stop) →
    checker → results.json and the verdict.

`assemble` makes the run's parts one by one; each pushes its own undo as it
is made (harness/run/undo.py), and the teardown unwinds them in reverse, so
whatever point a run reached, exactly what it made is undone. The history
is opened before the first op and every op is flushed as it completes, so a
run that is interrupted (Ctrl-C, SIGTERM) or killed still leaves a
checkable prefix; Ctrl-C and SIGTERM also heal and tear down.
"""

from __future__ import annotations

import logging
import shlex
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from nemesis.base import FaultContext, Nemesis, Settings
from nemesis.iptables import heal_leftovers
from nemesis.migrate import RollingMigration
from nemesis.plan.plan import Plan
from nemesis.plan.scheduler import Scheduler
from nemesis.registry import FAULTS
from nemesis.slow_network import heal_leftovers as heal_slow_leftovers
from nemesis.upgrade import RollingUpgrade
from workloads.capabilities import RollingUpgrade as Upgradable
from workloads.capabilities import supports
from workloads.client import describe
from workloads.registry import SYSTEMS
from workloads.sinks import TABLE_SINKS, Sink, make_table_sink
from workloads.sinks.postgres import stop_leftovers as stop_leftover_servers
from workloads.system import RunContext, System

from ..history import HistoryWriter
from ..nodes import NodeOptions
from ..nodes.lease import ClusterLease, Holder
from ..nodes.remote import Remote, on_all
from ..options import OptionError
from ..rundir import RunDir, write_json
from ..store import new_run_dir, point_latest
from ..version import tool_version
from .final import drain, drain_plan, write_effects
from .generator import QueueOps
from .interpreter import Interpreter
from .options import RunError, RunOptions
from .progress import CheckProgress, Progress
from .recovery import CLUSTER, recover
from .undo import Undo

log = logging.getLogger(__name__)


def stop_leftovers(nodes: list[Remote], where: NodeOptions, existing: bool = False) -> None:
    """What a killed run (kill -9: no teardown) left behind is stopped before
    anything starts: its iptables cuts, the brokers of every system (by
    pidfile, identity checked, on this cluster's data tree) and a sink
    database server it had started. Paused pids are resumed first by the
    brokers' own teardown. A system whose directory is not on a node has
    nothing there to stop (a teardown removes it last): one round trip per
    node says which are, instead of every system's teardown on every node
    (5 to 9 s a run, under load)."""
    heal_leftovers(nodes)
    if not existing:  # someone else's brokers (and links: slow faults refuse them) never ours
        # a chain left queueing to no delayer would drop every packet it takes
        heal_slow_leftovers(nodes, where.data_base())
        dbs = [cls.leftover_db(nodes, where.data_base()) for cls in SYSTEMS.values()]

        def sweep(node: Remote) -> None:
            there = present(node, [db.dir(node) for db in dbs])
            for db in dbs:
                if db.dir(node) in there:
                    db.teardown(node)

        each_node(nodes, "stopping leftovers", sweep)
    stop_leftover_servers(where.running_dir())


def present(node: Remote, paths: list[str]) -> set[str]:
    """Which of `paths` exist on the node (all of them, if it cannot say)."""
    test = " ".join(shlex.quote(p) for p in paths)
    r = node.run(f'for p in {test}; do [ -e "$p" ] && echo "$p"; done; true', check=False)
    return set(r.out.splitlines()) if r.exit == 0 else set(paths)


def connect(opts: RunOptions) -> list[Remote]:
    """The run's nodes, each reached once, all at once (an SSH handshake is
    0.5 to 1.5 s of a loaded machine's CPU and waiting); unreachable: one
    error naming it."""
    nodes = [Remote(s) for s in opts.node_specs()]
    on_all(nodes, lambda node: node.run("true", timeout=15))
    return nodes


def build_system(opts: RunOptions, nodes: list[Remote]) -> System:
    ctx = RunContext(
        nodes=nodes,
        op_timeout=opts.op_timeout,
        consumers=opts.consumers,
        producers=opts.concurrency - opts.consumers,
        data_base=opts.data_base(),
        sink=opts.sink,
        sink_db=opts.sink_db,
        existing=opts.existing(),
        cross_check=opts.cross_check,
        span_s=opts.span_s(),
    )
    try:
        return SYSTEMS[opts.system](ctx, opts.system_settings)
    except (OptionError, ValueError) as e:
        raise RunError(str(e)) from None


def make_faults(
    opts: RunOptions, plan: Plan, system: System, nodes: list[Remote], interp: Interpreter
) -> dict[str, Nemesis]:
    """The machinery of each of the plan's fault steps (one per kind,
    settings and label: FaultStep.instance), built with the step's settings
    over the run's."""
    settings = Settings(opts)
    ctx = FaultContext(
        nodes=nodes,
        db=system.db,
        settings=settings,
        crashes=interp,
        producers=tuple(range(opts.producers)),
        consumers=tuple(range(opts.producers, opts.concurrency)),  # the slots past the producers
    )
    faults: dict[str, Nemesis] = {}
    try:
        for step in plan.faults():
            if step.instance() not in faults:
                own = replace(ctx, settings=settings.with_values(step.values()))
                faults[step.instance()] = FAULTS[step.kind].build(own)
    except ValueError as e:
        raise RunError(str(e)) from None
    return faults


OWN_LOGGERS = ("harness", "nemesis", "workloads", "checkers", "reports", "tests", "__main__")
# what the client libraries log goes to clients.log from this level up; --debug: all
CLIENT_LOG_LEVEL = logging.WARNING


def _ours(record: logging.LogRecord) -> bool:
    return record.name.split(".", 1)[0] in OWN_LOGGERS


def _log_to(run: RunDir) -> list[logging.Handler]:
    """harness.log: the harness's own lines; clients.log: the client
    libraries' (kafka-python logs every retry: thousands of lines a run),
    warnings and errors unless --debug, made only when one comes."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    own = logging.FileHandler(run.log)
    own.addFilter(_ours)
    clients = logging.FileHandler(run.clients_log, delay=True)
    clients.addFilter(lambda record: not _ours(record))
    clients.setLevel(CLIENT_LOG_LEVEL)
    root = logging.getLogger()
    for handler in (own, clients):
        handler.setFormatter(fmt)
        root.addHandler(handler)
    root.setLevel(min(logging.INFO, CLIENT_LOG_LEVEL))
    if CLIENT_LOG_LEVEL > logging.DEBUG:
        logging.getLogger("paramiko").setLevel(logging.WARNING)
        # pika logs every lost connection with a traceback; the history has them.
        logging.getLogger("pika").setLevel(logging.CRITICAL)
    return [own, clients]


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


@dataclass
class Parts:
    """What a run is made of, once assembled (the main and final phases use them)."""

    nodes: list[Remote]
    system: System
    history: HistoryWriter
    gen: QueueOps
    interp: Interpreter
    schedule: Scheduler
    sink: Sink | None = None
    upgrade: RollingUpgrade | RollingMigration | None = None  # rolled during the main phase


class Run:
    def __init__(
        self,
        opts: RunOptions,
        console: Console | None = None,
        connect: Callable[[RunOptions], list[Remote]] = connect,
        build_system: Callable[[RunOptions, list[Remote]], System] = build_system,
        stop_leftovers: Callable[..., None] = stop_leftovers,
        lease_root: Path | None = None,
    ):
        """`connect`, `build_system` and `stop_leftovers` reach the nodes and
        the broker; a test gives its own (tests/noop.py: no cluster), and
        may keep the control machine's leases elsewhere (`lease_root`)."""
        self.opts = opts
        # the plan this run runs: the options' (its flags' or file's), with the
        # run's rollout beside it once the system says it has one
        self.plan = opts.fault_plan
        self.console = console or Console()
        self.progress = Progress(self.console)
        self.connect = connect
        self.build_system = build_system
        self.stop_leftovers = stop_leftovers
        self.lease_root = lease_root
        self.run_dir: RunDir | None = None
        self.stats: dict[str, Any] = {}
        self.undo = Undo()
        self.parts: Parts | None = None

    # -- the whole run ----------------------------------------------------
    def execute(self) -> tuple[Path, dict[str, Any] | None]:
        """Runs the test; returns the run directory and the results (None if not checked)."""
        opts = self.opts
        began = time.monotonic()
        self.run_dir = run = new_run_dir(opts.test_name(), Path(opts.store))
        handlers = _log_to(run)
        old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
        # Ctrl-C heals even where it was ignored when the process began (a
        # shell's background job): Python then leaves SIGINT ignored
        old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
        interrupted = False
        try:
            self.progress.phase(f"run directory {run}")
            self.parts = parts = self.assemble(run)
            self.progress.phase(
                f"main phase: {opts.time_limit:.0f} s, concurrency {opts.concurrency}, "
                f"nemesis {', '.join(opts.nemesis) or 'none'}"
            )
            self._main_phase(parts)
            self._final_phase(parts)
        except KeyboardInterrupt:
            interrupted = True
            self.progress.done()
            self.console.print("[yellow]interrupted: healing, tearing down, keeping the history[/]")
        finally:
            with shielded(self.console):
                self.progress.done()
                self.progress.phase("teardown: logs, heal, stop brokers")
                self.undo.unwind()
                self.stats["run-seconds"] = round(time.monotonic() - began, 1)  # junit's time
                run.write_stats(self.stats)
            signal.signal(signal.SIGTERM, old_term)
            signal.signal(signal.SIGINT, old_int)
            for handler in handlers:
                logging.getLogger().removeHandler(handler)
                handler.close()
        if interrupted:
            raise Interrupted(str(run))
        if not opts.check:
            point_latest(run)  # recorded whole; judging it was not asked for
            return run.path, None
        self.progress.phase("checking the history")
        from checkers.job import check, write_results

        with CheckProgress(self.progress) as progress:
            doc = check(run.path, **opts.spark(), spark_conf=opts.conf(), on_step=progress.step)
        write_results(doc, run.results)
        point_latest(run)
        self.progress.phase("writing report.html and junit.xml")
        from reports.build import build_reports

        build_reports(run.path, doc, **opts.spark())
        return run.path, doc

    def assemble(self, run: RunDir) -> Parts:
        """The run's parts, in the order they are needed, each pushing its undo
        as it is made (the teardown is their reverse)."""
        opts, undo = self.opts, self.undo
        # The cluster is this run's alone for its whole life: the control
        # machine's lease before any node is reached, then every node's.
        cluster = opts.cluster_name()
        me = Holder.me(str(run), cluster.words, opts.longest_s())
        lease = ClusterLease(cluster, me, **({"root": self.lease_root} if self.lease_root else {}))
        undo.push("release the cluster's lease", lease.release)
        lease.take_control(opts.wait_for_cluster, say=self.progress.phase)
        self.progress.phase("nodes: connecting")
        nodes = self.connect(opts)
        undo.push("ssh", lambda: [n.close() for n in nodes])
        lease.take_nodes(nodes)
        system = self.build_system(opts, nodes)
        name = opts.test_name()
        run.write_test(self._test_doc(name, nodes, system))
        # Only on a cluster whose lease was free or whose holder is gone.
        self.progress.phase(f"nodes: stopping what a killed run left ({lease.story()})")
        self.stop_leftovers(nodes, opts, existing=system.ctx.existing is not None)
        # Pushed before set-up: a set-up that failed halfway is torn down too,
        # and its logs are kept (collected before the teardown, in reverse).
        undo.push("teardown", lambda: each_node(nodes, "teardown", system.db.teardown))
        undo.push(
            "logs",
            lambda: each_node(
                nodes, "logs", lambda n: system.db.collect_logs(n, run.node_logs(n.name))
            ),
        )
        if system.ctx.existing:
            self.progress.phase(f"{system.db.name}: the existing cluster must serve")
        else:
            self.progress.phase(f"{system.db.name}: setting up {len(nodes)} nodes")
        system.db.setup()
        undo.push("remove the test's own topic or queue", system.cleanup)
        system.prepare()
        self._add_rollout(system)
        # again, with what setup installed and what prepare read from the brokers
        run.write_test({**self._test_doc(name, nodes, system), "installed": system.db.installed})
        # The history starts with the test itself: its times are seconds into the run.
        # Its columnar sidecar is written as it goes: the check reads that,
        # sealed on close (a killed run's is not, and the JSONL decides).
        history = HistoryWriter(run.history, sidecar=True)
        undo.push("close history", history.close)
        system.attach(history)
        gen = QueueOps(
            system.queue,
            opts.producers,
            opts.time_limit,
            opts.rate,
            batch=system.send_batch,
            txn=system.txn,
        )
        sink = self._sink(run, system)
        if sink:
            undo.push("close sink", sink.close)
            gen.keep_consuming = True  # every message gets processed before the drain
        interp = Interpreter(
            history,
            lambda i: system.new_client(nodes[i % len(nodes)], sink=sink),
            gen,
            opts.concurrency,
            opts.op_timeout,
            track_unprocessed=sink is not None,
        )
        schedule = Scheduler(
            self.plan,
            make_faults(opts, self.plan, system, nodes, interp),
            history,
            seed=opts.seed,
            db=system.db,
            recovery_timeout=opts.recovery_timeout,
        )
        undo.push("nemesis teardown", schedule.teardown)
        schedule.setup()
        undo.push("heal", schedule.heal)
        # The clients were made before the faults (a client crash needs them),
        # but stop before the heal, as in the final phase: no new op meets it.
        undo.push("stop clients", lambda: self._stop_clients(gen, interp))
        upgrade: RollingUpgrade | RollingMigration | None = None
        start_after = self._rollout_after()
        plan = system.migration()
        if self._rollout(system) == RollingUpgrade.kind:
            upgrade = RollingUpgrade(
                system.db, schedule, start_after, sync_timeout=opts.recovery_timeout
            )
        elif self._rollout(system) == RollingMigration.kind:
            # its steps spread over the main phase; each waits for its client's next op
            every = (opts.time_limit - start_after) / (plan.steps() + 1)
            upgrade = RollingMigration(
                plan, schedule, start_after, every, step_timeout=max(5.0, 2 * opts.op_timeout)
            )
        schedule.rollout = upgrade  # run by the plan's rollout step
        return Parts(nodes, system, history, gen, interp, schedule, sink, upgrade)

    @staticmethod
    def _rollout(system: System) -> str | None:
        """What the run rolls through the main phase, if anything."""
        if system.rolls_upgrade() and supports(system.db, Upgradable):
            return RollingUpgrade.kind
        if system.migration() is not None:
            return RollingMigration.kind
        return None

    def _rollout_after(self) -> float:
        return min(self.opts.nemesis_interval, self.opts.time_limit / 4)

    def _add_rollout(self, system: System) -> None:
        """The run's plan with its rollout beside the faults, once the system
        (prepared) says what it rolls."""
        kind = self._rollout(system)
        if kind is not None:
            self.plan = self.opts.fault_plan.with_rollout(kind, self._rollout_after())

    def _sink(self, run: RunDir, system: System) -> Sink | None:
        opts = self.opts
        if not opts.sink:
            return None
        try:
            if opts.sink in TABLE_SINKS:
                return make_table_sink(opts.sink, run.path, opts.sink_db, opts.running_dir())
            return system.own_sink(opts.sink)
        except ValueError as e:
            raise RunError(str(e)) from None

    def _test_doc(self, name: str, nodes: list[Remote], system: System) -> dict[str, Any]:
        doc = asdict(self.opts)
        claims, notes = system.claims()
        doc.update(
            name=name,
            started=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            queuecheck=tool_version(),  # the code that ran it
            changed=self.opts.changed(),  # what differs from the defaults, by flag
            command=self.opts.command(),  # the same test again
            nodes=[{"name": n.name, "host": n.spec.host} for n in nodes],
            config=system.record(),
            claims=claims,
            claim_notes=notes,
            plan={"source": self.plan.source, **self.plan.data()},
        )
        if getattr(self.opts, "given", None):  # a test file's keys and the flags over them
            doc["given"] = self.opts.given
        return doc

    # -- phases -----------------------------------------------------------
    def _main_phase(self, parts: Parts) -> None:
        gen, interp, schedule, upgrade = parts.gen, parts.interp, parts.schedule, parts.upgrade
        cpu0 = time.process_time()
        gen.begin()
        interp.start()
        schedule.start()  # the plan's faults, and its rollout (upgrade) where it has one
        if upgrade:
            self.undo.push("stop the rolling upgrade", upgrade.stop)

        def status() -> str:
            c = interp.counts
            f = "txn" if gen.txn else "send"
            rate = interp.acked / max(gen.elapsed(), 1e-9)
            faults = ", ".join(sorted(schedule.active_names)) or "none"
            if upgrade:
                faults += f" | {upgrade.progress()}"
            return (
                f"main {gen.elapsed():5.0f}/{gen.time_limit:.0f} s | "
                f"{f} ok {c[(f, 'ok')]} fail {c[(f, 'fail')]} info {c[(f, 'info')]} | "
                f"receive ok {c[('receive', 'ok')]} info {c[('receive', 'info')]} | "
                f"{rate:,.0f} acked msgs/s | faults: {faults}"
            )

        self.progress.running(status)
        # A rolling upgrade happens during the main phase: while it is under
        # way the phase goes on (load and faults), up to a bound.
        steps = upgrade.steps if upgrade else 0
        longest = gen.time_limit + self.opts.recovery_timeout * steps
        while True:
            self._extend_for_upgrade(parts, longest)
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

    def _extend_for_upgrade(self, parts: Parts, longest: float) -> None:
        """Keeps the phase's end ahead of the clock while the upgrade goes on."""
        up, gen = parts.upgrade, parts.gen
        if up and not up.done.is_set() and gen.time_limit - gen.elapsed() < 2:
            if gen.time_limit < longest:
                gen.time_limit = min(longest, gen.elapsed() + 2.0)
                self.stats["main-phase-extended-for-upgrade"] = True

    def _stop_clients(self, gen: QueueOps, interp: Interpreter) -> None:
        """No new ops; in-flight ones finish (or hit their deadline); clients close,
        so unacked deliveries go back to the queue."""
        gen.stop.set()
        if not interp.join(timeout=self.opts.op_timeout + 5):
            log.warning("some workers were still stuck after the main phase")
        self.stats["completions"] = {f"{f}:{t}": n for (f, t), n in sorted(interp.counts.items())}
        # the sends in flight when the main phase ended are acknowledged by now
        self.stats["acknowledged"] = interp.acked
        interp.close()

    def _final_phase(self, parts: Parts) -> None:
        """Heal, recover, drain. With a sink the consumers keep processing through
        the recovery until nothing more arrives, and the sink is read at the end."""
        opts, system, sink = self.opts, parts.system, parts.sink
        if parts.upgrade and not parts.upgrade.done.is_set():
            # the rolling upgrade finishes under the same load and faults first
            self.progress.phase("final phase: the rolling upgrade finishes")
            parts.upgrade.wait()
        if not sink:
            self.progress.phase("final phase: stopping clients")
            self._stop_clients(parts.gen, parts.interp)
        self.progress.phase("final phase: healing every fault")
        parts.schedule.heal()
        self.progress.phase(f"final phase: waiting for {system.db.name} to recover")
        recovery = recover(
            system, parts.nodes, parts.schedule, opts.recovery_timeout, opts.operator_restart
        )
        self.stats.update(recovery.stats())
        # A finding, not a harness failure: the history is still judged, and
        # what serves is still drained (harness/run/final.py drain_plan); a
        # loss is proven only by a final read that got to the end.
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
        if sink:
            if recovery.recovered:
                self.progress.phase("final phase: consumers process what is left")
                self._settle(parts.interp)
            self._stop_clients(parts.gen, parts.interp)
        readers, gone = drain_plan(parts.nodes, system.drain_all_nodes, recovery.stuck)
        if readers or gone:
            names = ", ".join(n.name for n in readers) or "none"
            never = ", ".join(k for k in recovery.stuck if k != CLUSTER) or "no node named"
            self.progress.phase(
                "final phase: draining every node"
                if recovery.recovered
                else f"final phase: draining what serves ({names}; never recovered: {never})"
            )
            clients = [system.new_client(n) for n in readers]
            one_reader = not system.drain_all_nodes
            drained, read = drain(
                parts.history, clients, opts.op_timeout, opts.recovery_timeout, gone, one_reader
            )
            self.stats["drained"] = drained
            if not recovery.recovered:
                self.stats["drained-from"] = read
            self.progress.phase(f"drained {drained} messages")
        if recovery.recovered:
            # unrecovered, a replica that never came back is no state to compare
            self._read_broker_state(system, parts.history)
        # Unrecovered, what never reached the sink proves nothing: no final read of
        # it either, so exactly-once-effect is unknown rather than a false violation.
        if sink and recovery.recovered:
            try:
                # The first chunk is written only once the read is under way: a sink
                # that cannot be read leaves no effects ops (unknown, not lost).
                n = write_effects(parts.history, sink.counts())
            except Exception as e:  # noqa: BLE001 - recorded; the run is judged without it
                self.stats["sink-read-error"] = describe(e)
                self.console.print(
                    f"[bold red]could not read the {sink.name} sink:[/] {escape(str(e))}"
                )
                return
            self.progress.phase(f"read the {sink.name} sink: {n} messages took effect")

    def _read_broker_state(self, system: System, history: HistoryWriter) -> None:
        """What the brokers themselves hold now, for the cross-check
        (checkers/brokers.py): read once drained, before the teardown."""
        scope = system.cross_check()
        if scope == "off":
            return
        self.progress.phase(f"reading the brokers' own state ({scope})")
        began = time.monotonic()
        try:
            doc = system.db.read_state(self.run_dir.brokers)
        except Exception as e:  # noqa: BLE001 - no state: broker-agrees is unknown, not false
            self.stats["broker-state-error"] = describe(e)
            self.console.print(f"[bold red]could not read the brokers' state:[/] {escape(str(e))}")
            return
        # times the brokers logged (Unix seconds) on the history's timeline
        write_json(self.run_dir.broker_state, {**doc, "history_started_unix": history.started_unix})
        self.stats["broker-state-seconds"] = round(time.monotonic() - began, 1)
        if doc.get("unreadable"):
            self.stats["broker-state-unreadable"] = sorted(doc["unreadable"])

    def _settle(self, interp: Interpreter, quiet: float = 3.0) -> None:
        """Until every acknowledged message was handed to a consumer whose
        processing took effect (a failed effect transaction owes its messages
        again) and nothing new came for `quiet` s; or, when some never come
        (lost, or held by an open transaction), until nothing new came for
        long enough that a rebalance or a transaction timeout would have ended
        meanwhile."""
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
