"""`queuecheck`: the command line."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from checkers.base import verdict_exit
from checkers.options import SparkOptions
from harness.history import HistoryError
from harness.nodes import NodeOptions
from harness.options import add_arguments, default_of, flag_of, given
from harness.run.options import RunError, RunOptions
from harness.rundir import RunDir, WriteError, not_replaceable, recorded
from harness.store import StoreOptions
from nemesis.registry import FaultOptions
from workloads.registry import SYSTEMS

err = Console(stderr=True)


def exit_of(results: list[dict | None]) -> int:
    """One exit code for several runs: 1 if a claimed property was violated
    in any; else 2 if any failed (None) or could not decide; else 0."""
    valids = [r["valid"] if r else None for r in results]
    if False in valids:
        return 1
    return 0 if valids and all(v is True for v in valids) else 2


def _out() -> Console:
    # A CI log is no terminal: give tables room instead of rich's 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=140)


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console

    from checkers.job import check, parse_claims, write_results
    from harness.run.progress import CheckProgress, Progress
    from reports.console import print_verdict

    spark = SparkOptions(**given(args, SparkOptions))
    run = RunDir.find(args.path)
    out = Path(args.out) if args.out else run.results
    _writable(out, "--out" if args.out else out.name, run.history)  # before the check
    # progress on stderr: stdout is the verdict alone
    with CheckProgress(Progress(Console(stderr=True))) as progress:
        doc = check(
            args.path,
            claims=parse_claims(args.claims),
            **spark.spark(),
            spark_conf=spark.conf(),
            use_sidecar=not args.no_sidecar,
            on_step=progress.step,
            checks_once=True,
        )
    write_results(doc, out)
    print_verdict(doc, stats=run.read_stats())  # a run's stats, beside its history
    _out().print(f"results: {escape(str(out))}")  # a path: text, not markup
    return verdict_exit(doc["valid"])


def _writable(out: Path, what: str, history: Path | None = None) -> None:
    """A file we may create or replace, or one clear error naming it: never
    a link or anything but a regular file (a device, a FIFO), never what a
    run recorded (the history judged, a run's test.json, stats.json ...)."""
    from checkers.job import UsageError

    why = not_replaceable(out) or recorded(out, history)
    if why:
        raise UsageError(f"{what} {out}: {why}; nothing was written")
    parent = next(p for p in (out.parent, *out.parent.parents) if p.exists())
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{what} {out}: cannot write in {parent}")


def _compare_out(out: str | None) -> None:
    """compare's --out is a directory of its own: not a run's (its junit.xml
    is the run's), not a link (compare.py refuses a file)."""
    from checkers.job import UsageError

    if out is None:
        return
    path = Path(out)
    if path.is_symlink():
        raise UsageError(f"--out {out}: is a symbolic link; name the directory itself")
    if RunDir.at(path).is_run():
        raise UsageError(f"--out {out}: is a run directory; its junit.xml is the run's")


def cmd_report(args: argparse.Namespace) -> int:
    """Regenerates report.html and junit.xml of a stored run."""
    from reports.build import build_reports

    spark = SparkOptions(**given(args, SparkOptions))
    html, junit = build_reports(Path(args.path), **spark.spark())
    _out().print(escape(f"report: {html}\njunit: {junit}"))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serves the store (on loopback unless --host): an index of runs linking
    to their reports."""
    from reports.serve import make_server

    store = StoreOptions(**given(args, StoreOptions)).store
    server = make_server(Path(store), args.port, args.host)
    url = f"http://{args.host}:{server.server_port}/"
    if not ipaddress.ip_address(args.host).is_loopback:
        err.print(
            escape(
                f"warning: --host {args.host}: anyone who reaches it reads every run of "
                f"{store}: histories, logs, configurations (secrets masked), reports"
            )
        )
    _out().print(escape(f"serving {store} on {url} (Ctrl-C stops)"))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Stored runs against the first (the baseline): 0 PASS, 1 FAIL, 2 could not decide."""
    from reports.compare import compare_runs, print_comparison

    names = args.names.split(",") if args.names else None
    _compare_out(args.out)
    cmp = compare_runs(args.runs, names=names, out=args.out, allow_different=args.allow_different)
    print_comparison(cmp, _out())
    return cmp.exit_code


def cmd_index(args: argparse.Namespace) -> int:
    """Makes a history columnar: what `check` does to a large history that
    has no sealed sidecar (checkers/load.py `convert`): natively, and with
    Spark only where the native converter leaves the history to it."""
    from checkers.load import convert, convert_natively
    from checkers.spark import spark_session
    from harness.run.progress import CheckProgress, Progress

    hp = RunDir.find(args.path).history
    if not hp.is_file():
        raise FileNotFoundError(f"no history at {hp}")
    spark_opts = SparkOptions(**given(args, SparkOptions))
    with CheckProgress(Progress(Console(stderr=True))) as progress:
        progress.step("reading, validating and writing the columnar form")
        files = convert_natively(hp)
        if files is None:
            progress.step("starting Spark")
            spark = spark_session(
                **spark_opts.spark(), conf=spark_opts.conf(), input_bytes=hp.stat().st_size
            )
            progress.step("reading, validating and writing the columnar form with Spark")
            files = convert(spark, hp, native=False)
    if files is None:
        # valid, but a queue named by a non-string (Spark reads the JSONL), or
        # a directory the tool may not write in
        _out().print(
            escape(
                f"no sidecar: {hp} names a queue by something other than a string, "
                "or its directory cannot be written in"
            )
        )
        return 0
    _out().print(escape(f"sidecar: {files['ops']}, {files['msgs']}"))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: a short fault-injection run of each broker on the local cluster."""
    from harness.commands.demo import DemoOptions, run_demo

    return exit_of(run_demo(DemoOptions(**given(args, DemoOptions)), _out()))


def cmd_matrix(args: argparse.Namespace) -> int:
    """The exactly-once story: one short run per configuration, one table."""
    from harness.commands.matrix import ROWS, MatrixOptions, rows_named, run_matrix

    opts = MatrixOptions(**given(args, MatrixOptions))
    if opts.list_rows:
        for row in ROWS:
            _out().print(f"{row.name}: {row.what}")
        return 0
    doc = run_matrix(opts.base(), rows_named(opts.rows), _out())
    return exit_of([r.get("results") for r in doc["rows"]])


def cmd_findings(args: argparse.Namespace) -> int:
    """Known-bad setups caught, known-good controls clean: one table."""
    from harness.commands.findings import (
        FINDINGS,
        FindingsOptions,
        exit_code,
        findings_named,
        list_line,
        run_findings,
    )

    opts = FindingsOptions(**given(args, FindingsOptions))
    if opts.list_rows:
        for f in FINDINGS:
            _out().print(escape(list_line(f, opts)))
        return 0
    return exit_code(run_findings(opts, findings_named(opts.rows), _out()))


def cmd_cluster(args: argparse.Namespace) -> int:
    """up | down | status of the local cluster (--driver: namespaces or Docker
    containers). up and down hold the cluster's lease while they work: a
    cluster a run holds is neither brought up again (that resumes its paused
    brokers) nor taken down under it."""
    from harness.nodes.lease import ClusterLease, ControlLease, Holder, describe_lease
    from harness.nodes.remote import Remote

    where = NodeOptions(**given(args, NodeOptions))
    out = _out()
    cluster = where.cluster(say=out.print)
    name = where.cluster_name()
    if args.action == "status":
        for node, state in cluster.status().items():
            out.print(f"{node}: {state}")
        out.print(f"lease: {describe_lease(ControlLease(name.key))}")
        return 0
    lease = ClusterLease(name, Holder.me(f"(queuecheck cluster {args.action})", name.words, 3600))
    lease.take_control(where.wait_for_cluster, say=out.print)
    try:
        if lease.taken[0].stale:
            out.print(lease.story())
        if args.action == "up":
            from harness.run.runner import stop_leftovers

            nodes = [Remote(spec) for spec in cluster.up()]
            stop_leftovers(nodes, where)  # cuts, brokers, a sink database a killed run left
            for node in nodes:
                r = node.run("hostname; id -un", timeout=10)
                out.print(f"{node.name}: {node.spec.host} ssh ok ({' '.join(r.out.split())})")
            out.print(f"key: {cluster.key}")
            return 0
        problems = cluster.down()
        for p in problems:
            err.print(f"[red]error:[/] {escape(p)}")
        out.print("cluster removed" if not problems else "cluster partly removed")
        return 2 if problems else 0
    finally:
        lease.release()


def cmd_test(args: argparse.Namespace) -> int:
    """One run against a real cluster: faults, history, verdict."""
    from harness.run.runner import Interrupted, Run
    from reports.console import print_verdict

    opts = _run_options(args)
    out = _out()
    try:
        run, doc = Run(opts, out).execute()
    except Interrupted as e:
        err.print(escape(f"history kept in {e}; judge it with `queuecheck check {e}`"))
        return 2
    if doc is None:
        out.print(escape(f"history: {RunDir.at(run).history} (not checked)"))
        return 0
    print_verdict(doc, out, stats=RunDir.at(run).read_stats())
    out.print(escape(f"run: {run}"))
    return verdict_exit(doc["valid"])


def _run_options(args: argparse.Namespace) -> RunOptions:
    """A run's options from `test`'s flags (and `gate`'s, which are the
    same), over a test file's (--spec) where one is given."""
    from checkers.job import UsageError
    from harness.run.spec import load_spec, spec_options

    run_opts = given(args, RunOptions)
    spec = load_spec(run_opts.pop("spec")) if run_opts.get("spec") else None
    default_system = spec.values.get("system") if spec else None
    system = SYSTEMS[run_opts.get("system", default_system or _default(RunOptions, "system"))]
    # Each system gets its own options only; another system's flag is an error.
    for other in SYSTEMS.values():
        for flag in sorted(other.flags() - system.flags()):
            if hasattr(args, flag.lstrip("-").replace("-", "_")):
                raise UsageError(f"{flag}: an option of --system {other.name}, not {system.name}")
    if spec is not None:
        return spec_options(spec, run_opts, system.options_given(args))
    return RunOptions(**run_opts, system_options=system.options_given(args))


def cmd_suite(args: argparse.Namespace) -> int:
    """Several tests of a suite file in order, one summary: 1 when any
    violated a claimed property, else 2 when any could not decide, else 0."""
    from checkers.job import UsageError
    from harness.commands.suite import check_suite, load_suite, run_suite

    suite = load_suite(args.file)
    flags = given(args, RunOptions)
    if "spec" in flags or "name" in flags:
        flag = "--spec" if "spec" in flags else "--name"
        raise UsageError(f"{flag}: a suite's tests name their own (in {args.file})")

    def system_of(test) -> str:
        return (
            flags.get("system") or test.spec.values.get("system") or _default(RunOptions, "system")
        )

    systems = {system_of(t) for t in suite.tests}
    for other in SYSTEMS.values():
        for flag in sorted(other.flags()):
            if hasattr(args, flag.lstrip("-").replace("-", "_")) and not any(
                flag in SYSTEMS[name].flags() for name in systems
            ):
                raise UsageError(f"{flag}: no test of {args.file} runs --system {other.name}")
    system_flags = {t.name: SYSTEMS[system_of(t)].options_given(args) for t in suite.tests}
    check_suite(suite, flags, system_flags)
    store = Path(suite.tests[0].options.store)
    return run_suite(suite, store, _out())


def cmd_replay(args: argparse.Namespace) -> int:
    """A stored run again, its faults where and when they struck, --runs times."""
    from harness.commands.replay import ReplayOptions, replay

    options = ReplayOptions(**given(args, ReplayOptions))
    overrides = {k: v for k, v in given(args, RunOptions).items() if k in REPLAY_OVERRIDES}
    return replay(args.run, options, overrides, _out())


def cmd_completion(args: argparse.Namespace) -> int:
    """The shell's completion script for every command and flag, made from
    the parser (shtab): `source <(queuecheck completion bash)`."""
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    """`plan show`: the plan a file or the flags make, checked against the
    run's broker as a run would, printed as TOML, nothing run; `plan list`:
    the shipped plans; `plan steps`: the vocabulary, from the step registry."""
    if args.plan_command == "steps":
        from nemesis.plan.registry import STEPS

        for key, step in STEPS.items():
            out = _out()
            out.print(escape(f"{key}: {step.summary}"))
            for name, what in step.takes.items():
                out.print(escape(f"    {name}: {what}"))
        return 0
    if args.plan_command == "list":
        from nemesis.plan.plan import load, shipped

        for name in shipped():
            _out().print(escape(f"{name}: {load(name).summary}"))
        return 0
    if args.file:
        if getattr(args, "nemesis_plan", None):
            raise ValueError("plan show: give the plan file once (FILE or --nemesis-plan)")
        args.nemesis_plan = args.file
    opts = _run_options(args)
    plan = opts.fault_plan
    where = f"{plan.source}" if plan.source != "flags" else "the flags"
    print(f"# the plan of {where}, checked for --system {opts.system}")
    print(plan.toml(), end="")
    return 0


def cmd_gate(args: argparse.Namespace) -> int:
    """A, B and A rolled to B under the same test, --runs times each, decided
    on rates (--runs 1: compared once): PASS 0, FAIL 1, else 2."""
    from harness.commands.gate import GateOptions, gate_command
    from harness.run.runner import Interrupted

    gate = GateOptions(**given(args, GateOptions))
    base = _run_options(args)
    try:
        return gate_command(base, gate, _out())
    except Interrupted as e:
        err.print(escape(f"interrupted; what ran is kept, the last history in {e}"))
        return 2


def _default(cls: type, name: str) -> Any:
    return next(default_of(f) for f in fields(cls) if f.name == name)


def _add_run_arguments(p: argparse.ArgumentParser) -> None:
    """A run's flags, a group each, in the order people reach for them: the
    test, its faults (each fault's settings, through the fault registry),
    what every broker takes, each broker's own, where it runs, where it is
    kept and how it is judged."""
    faults = {f.name for f in fields(FaultOptions)}
    where = {f.name for f in fields(NodeOptions)}
    kept = {f.name for cls in (StoreOptions, SparkOptions) for f in fields(cls)}
    add_arguments(p.add_argument_group("the test"), RunOptions, skip=faults | where | kept)
    add_arguments(p.add_argument_group("faults"), FaultOptions)
    shared = set.intersection(*(s.flags() for s in SYSTEMS.values()))
    every = p.add_argument_group("every broker", "each broker's default in its help")
    for system in SYSTEMS.values():
        for cls in system.option_classes:
            own = {f.name for f in fields(cls) if flag_of(f) not in shared}
            add_arguments(every, cls, skip=own, label=system.name)
    for system in SYSTEMS.values():
        group = p.add_argument_group(
            f"--system {system.name}", "(a flag another broker takes too is under the first)"
        )
        for cls in system.option_classes:
            common = {f.name for f in fields(cls) if flag_of(f) in shared}
            add_arguments(group, cls, skip=common, label=system.name)
    add_arguments(p.add_argument_group("where it runs"), NodeOptions)
    kept_group = p.add_argument_group("where it is kept, how it is judged")
    add_arguments(kept_group, StoreOptions)
    add_arguments(kept_group, SparkOptions)


# what a replay may change of the run it replays: where it runs (the nodes,
# but not how many) and is kept, how it is checked, and the seed
REPLAY_OVERRIDES = {
    *(f.name for f in fields(NodeOptions) if f.name != "nodes"),
    *(f.name for cls in (StoreOptions, SparkOptions) for f in fields(cls)),
    "seed",
}


def _address(text: str) -> str:
    """--host: an IP address to listen on, said plainly when it is not one."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address") from None


class _Version(argparse.Action):
    """--version, asked of git only when given (not on every command)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        from harness.version import tool_version

        print(f"queuecheck {tool_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from harness.commands.demo import DemoOptions
    from harness.commands.findings import FindingsOptions
    from harness.commands.gate import GateOptions
    from harness.commands.matrix import MatrixOptions
    from harness.commands.replay import ReplayOptions

    ap = argparse.ArgumentParser(
        prog="queuecheck", description="Delivery checker for real message queues."
    )
    ap.add_argument(
        "--version", action=_Version, nargs=0, help="the package's version and git commit"
    )
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("check", help="judge a history (a history.jsonl or a run directory)")
    p.add_argument("path")
    p.add_argument(
        "--claims", help="comma-separated properties to claim (default: the run's test.json)"
    )
    p.add_argument("--out", help="where to write results.json (default: next to the history)")
    p.add_argument(
        "--no-sidecar",
        action="store_true",
        help="read the JSONL even if a columnar sidecar matches it",
    )
    add_arguments(p, SparkOptions)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("report", help="regenerate report.html and junit.xml of a stored run")
    p.add_argument("path", help="a run directory (e.g. store/latest)")
    add_arguments(p, SparkOptions)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("serve", help="serve the store on localhost with an index of runs")
    add_arguments(p, StoreOptions)
    p.add_argument("--port", type=int, default=8000, help="port to listen on (0: any free one)")
    p.add_argument(
        "--host",
        type=_address,
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 serves the "
        "store, histories and logs included, to anyone who can reach this machine)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "compare", help="compare stored runs with the first (a baseline): PASS, FAIL, undecided"
    )
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories; the first is A")
    p.add_argument(
        "--out",
        help="directory for compare.html, junit.xml, compare.json (default: "
        "<store>/compare/<time>/ when the runs are in one store, else the current directory)",
    )
    p.add_argument("--names", help="comma-separated names of the runs (default: test/time)")
    p.add_argument(
        "--allow-different",
        action="store_true",
        help="compare runs of different systems (test.json's system; refused by default)",
    )
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("index", help="build the columnar sidecar of a history (faster re-checks)")
    p.add_argument("path")
    add_arguments(p, SparkOptions)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser(
        "cluster", help="the local cluster (namespaces, or --driver docker): up, down, status"
    )
    p.add_argument("action", choices=["up", "down", "status"])
    add_arguments(p, NodeOptions, skip=("cluster_file",))
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser(
        "suite", help="several tests of a suite file in order, one summary (a nightly job)"
    )
    p.add_argument("file", help="a suite file (TOML): [[test]] tables (harness/run/spec.py)")
    _add_run_arguments(p)
    p.set_defaults(func=cmd_suite)

    p = sub.add_parser(
        "replay",
        help="a stored run again, its faults at the same moments on the same targets",
    )
    p.add_argument("run", help="a run directory (or its history)")
    add_arguments(p, ReplayOptions)
    add_arguments(p, RunOptions, skip={f.name for f in fields(RunOptions)} - REPLAY_OVERRIDES)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser(
        "completion",
        help="print the shell completion script: source <(queuecheck completion bash)",
    )
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    p.set_defaults(func=cmd_completion)

    p = sub.add_parser(
        "plan", help="fault plans: show the plan a file or flags make; the shipped plans; steps"
    )
    plans = p.add_subparsers(dest="plan_command", required=True)
    q = plans.add_parser(
        "show", help="the plan a file or the run's flags make, checked, as TOML (nothing runs)"
    )
    q.add_argument(
        "file", nargs="?", help="a plan file (TOML) or a shipped plan's name; default: the flags'"
    )
    _add_run_arguments(q)
    plans.add_parser("list", help="the plans in nemesis/plans/, each with its summary")
    plans.add_parser("steps", help="every plan step and combinator, with the keys it takes")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("test", help="run a test against a real cluster and judge it")
    _add_run_arguments(p)
    p.set_defaults(func=cmd_test)

    p = sub.add_parser(
        "gate", help="may we upgrade? the same test on A, on B, and rolling A to B, compared"
    )
    add_arguments(p, GateOptions)
    _add_run_arguments(p)
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("demo", help="the main job on the embedded default")
    add_arguments(p, DemoOptions)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "matrix", help="the exactly-once story: a short run per configuration, one table"
    )
    add_arguments(p, MatrixOptions)
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser(
        "findings",
        help="the findings suite: every known-bad setup caught, every known-good one clean",
    )
    add_arguments(p, FindingsOptions)
    p.set_defaults(func=cmd_findings)
    for parser in (ap, *sub.choices.values()):
        parser.add_argument(
            "--debug",
            action="store_true",
            default=argparse.SUPPRESS,
            help="show the traceback of an error; a run's clients.log keeps all the client "
            "libraries log (else their warnings and errors)",
        )
    return ap


def main(argv: list[str] | None = None) -> int:
    """0: every claimed property held; 1: a claimed property was violated;
    2: unknown, bad input, interrupted, or the tool itself failed, said in
    one line (the traceback only with --debug)."""
    from checkers.job import UsageError
    from harness.nodes.clusterfile import ClusterFileError
    from harness.nodes.lease import LeaseError
    from harness.nodes.localcluster import ClusterError
    from harness.nodes.remote import RemoteError
    from harness.run.runner import Interrupted
    from workloads.db import DBError

    given_argv = sys.argv[1:] if argv is None else argv
    # argparse (before 3.12) drops the value of `--flag=--` and goes on as if
    # the flag had none: [] for any option, past its type and choices
    for arg in given_argv:
        flag, eq, value = arg.partition("=")
        if arg.startswith("--") and eq and value == "--":
            _error(f"{flag}: '--' is not a value")
            return 2
    args = build_parser().parse_args(argv)
    debug = getattr(args, "debug", False)
    if debug:
        import logging

        from harness.run import runner

        runner.CLIENT_LOG_LEVEL = logging.DEBUG  # clients.log keeps every line
    try:
        return args.func(args)
    except HistoryError as e:
        _error(f"history {getattr(args, 'path', '')}: {e}")
    except (
        UsageError,
        OSError,  # a path the OS refuses (too long, unreadable, a full disk): named in e
        ClusterError,
        ClusterFileError,
        LeaseError,
        RemoteError,
        DBError,
        RunError,
        ValueError,
        WriteError,
    ) as e:
        _error(str(e))
        if debug:
            err.print_exception()
    except Interrupted as e:
        _error(f"interrupted; what ran is kept, the last history in {e}")
    except KeyboardInterrupt:
        _error("interrupted")
    except Exception as e:  # noqa: BLE001 - the tool failed: exit 2, never 1
        _error(f"internal error: {type(e).__name__}: {e} (--debug shows the traceback)")
        if debug:
            err.print_exception()
    return 2


def _error(text: str) -> None:
    """One line; the text is data, never markup ([/x] in a history stays as it is)."""
    err.print(f"[red]error:[/] {escape(text)}", soft_wrap=True)


if __name__ == "__main__":
    sys.exit(main())
