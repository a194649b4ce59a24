"""`queuecheck`: the command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from harness.history import HISTORY_FILE, HistoryError

EXIT = {True: 0, False: 1, "unknown": 2}
err = Console(stderr=True)


def _out() -> Console:
    # A CI log is no terminal: give tables room instead of rich's 80 columns.
    return Console() if sys.stdout.isatty() else Console(width=140)


def _spark_conf(pairs: list[str]) -> dict[str, str]:
    from checkers.job import UsageError

    conf = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--spark-conf: expected KEY=VALUE, got {pair!r}")
        conf[key] = value
    return conf


def cmd_check(args: argparse.Namespace) -> int:
    from checkers.job import RESULTS_FILE, check, parse_claims, write_results
    from checkers.load import history_path
    from reports.console import print_verdict

    doc = check(
        args.path,
        claims=parse_claims(args.claims),
        master=args.spark_master,
        driver_memory=args.driver_memory,
        spark_conf=_spark_conf(args.spark_conf),
        use_sidecar=not args.no_sidecar,
    )
    out = Path(args.out) if args.out else history_path(args.path).parent / RESULTS_FILE
    write_results(doc, out)
    print_verdict(doc)
    _out().print(f"results: {out}")
    return EXIT[doc["valid"]]


def cmd_report(args: argparse.Namespace) -> int:
    """Regenerates report.html and junit.xml of a stored run."""
    from reports.build import build_reports

    html, junit = build_reports(
        Path(args.path), master=args.spark_master, driver_memory=args.driver_memory
    )
    _out().print(f"report: {html}\njunit: {junit}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Serves the store on localhost: an index of runs linking to their reports."""
    from reports.serve import make_server

    server = make_server(Path(args.store), args.port)
    _out().print(f"serving {args.store} on http://127.0.0.1:{server.server_port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from checkers.load import history_path
    from harness import sidecar

    hp = history_path(args.path)
    if not hp.is_file():
        raise FileNotFoundError(f"no history at {hp}")
    files = sidecar.build(hp)
    _out().print(f"sidecar: {files['ops']}, {files['msgs']}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The main job: a short fault-injection run of each broker on the local cluster."""
    from harness.demo import run_demo

    spark = {"spark_master": args.spark_master, "driver_memory": args.driver_memory}
    return run_demo(args.store, args.state, args.time_limit, spark, _out())


def cmd_matrix(args: argparse.Namespace) -> int:
    """The exactly-once story: one short run per configuration, one table."""
    from harness.matrix import ROWS, rows_named, run_matrix

    if args.list:
        for row in ROWS:
            _out().print(f"{row.name}: {row.what}")
        return 0
    base = {
        **cluster_kwargs(args),
        "time_limit": args.time_limit,
        "nemesis": ["crash-client"],
        "nemesis_interval": args.crash_interval,
        "crash_point": "random",
        "crash_clients": "both",
        "sink_db": args.sink_db,
        "seed": args.seed,
        "spark_master": args.spark_master,
        "driver_memory": args.driver_memory,
    }
    doc = run_matrix(base, rows_named(_csv(args.rows)), _out())
    return 0 if all("results" in r for r in doc["rows"]) else 1


def _local_cluster(args: argparse.Namespace):
    from harness.localcluster import LocalCluster

    return LocalCluster(
        nodes=args.nodes,
        subnet=args.subnet,
        bridge=args.bridge,
        prefix=args.prefix,
        state=Path(args.state) / "cluster",
    )


def cmd_cluster(args: argparse.Namespace) -> int:
    """up | down | status of the local namespace cluster."""
    from harness.remote import Remote

    cluster = _local_cluster(args)
    out = _out()
    if args.action == "up":
        from nemesis.iptables import heal_leftovers

        nodes = [Remote(spec) for spec in cluster.up()]
        heal_leftovers(nodes)  # cuts a killed run left behind
        for node in nodes:
            r = node.run("hostname; id -un", timeout=10)
            out.print(f"{node.name}: {node.spec.host} ssh ok ({' '.join(r.out.split())})")
        out.print(f"key: {cluster.key}")
        return 0
    if args.action == "down":
        problems = cluster.down()
        for p in problems:
            err.print(f"[red]error:[/] {p}")
        out.print("cluster removed" if not problems else "cluster partly removed")
        return 2 if problems else 0
    for node, state in cluster.status().items():
        out.print(f"{node}: {state}")
    return 0


def _csv(text: str) -> list[str]:
    return [] if text in ("", "none") else [t.strip() for t in text.split(",") if t.strip()]


def cmd_test(args: argparse.Namespace) -> int:
    """One run against a real cluster: faults, history, verdict."""
    from harness.runner import Interrupted, Run, RunOptions
    from reports.console import print_verdict

    # Each system gets its own options only: one system's flags never reach another.
    per_system = {
        "rabbitmq": {
            "queue_type": args.queue_type,
            "confirms": args.confirms,
            "ack": args.ack,
            "partition_handling": args.partition_handling,
            "net_ticktime": args.net_ticktime,
            "batch": args.receive_batch,
            "prefetch": args.prefetch,
        },
        "kafka": {
            "acks": args.acks,
            "idempotence": args.idempotence,
            "retries": args.retries,
            "replication_factor": args.replication_factor,
            "min_insync_replicas": args.min_insync_replicas,
            "unclean_leader_election": args.unclean_leader_election,
            "partitions": args.partitions,
            "consumer_mode": args.consumer_mode,
            "txn": args.txn or None,
            "send_batch": args.send_batch,
            "receive_batch": args.receive_batch,
            "version": args.kafka_version,
            "kafka_home": args.kafka_home,
            "heap": args.kafka_heap,
        },
    }
    system_options = {k: v for k, v in per_system[args.system].items() if v is not None}
    opts = RunOptions(
        system=args.system,
        name=args.name,
        **cluster_kwargs(args),
        time_limit=args.time_limit,
        rate=args.rate,
        concurrency=args.concurrency,
        producers=args.producers,
        op_timeout=args.op_timeout,
        recovery_timeout=args.recovery_timeout,
        seed=args.seed,
        nemesis=_csv(args.nemesis),
        nemesis_interval=args.nemesis_interval,
        partition_shapes=_csv(args.partition_shapes) or None,
        loss_probability=args.loss_probability,
        crash_point=args.crash_point,
        crash_clients=args.crash_clients,
        sink=args.sink,
        sink_db=args.sink_db,
        system_options=system_options,
        check=not args.no_check,
        spark_master=args.spark_master,
        driver_memory=args.driver_memory,
    )
    out = _out()
    try:
        run, doc = Run(opts, out).execute()
    except Interrupted as e:
        err.print(f"history kept in {e}; judge it with `queuecheck check {e}`")
        return 2
    if doc is None:
        out.print(f"history: {run / HISTORY_FILE} (not checked)")
        return 0
    print_verdict(doc, out)
    out.print(f"run: {run}")
    return EXIT[doc["valid"]]


def _add_test_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--system", choices=["rabbitmq", "kafka"], default="rabbitmq")
    p.add_argument(
        "--name", help="test name in the store (default: rabbitmq-quorum, kafka-acks-all ...)"
    )
    p.add_argument(
        "--cluster-file", help="JSON/TOML list of SSH nodes instead of the local cluster"
    )
    p.add_argument("--store", default="store", help="store root (default: store)")
    p.add_argument("--time-limit", type=float, default=60, help="main phase seconds (default 60)")
    p.add_argument("--rate", type=float, default=0, help="sends per second, 0 = unbounded")
    p.add_argument("--concurrency", type=int, default=10, help="client processes (default 10)")
    p.add_argument("--producers", type=int, help="of which producers (default: half)")
    p.add_argument("--op-timeout", type=float, default=10, help="deadline of one op, seconds")
    p.add_argument(
        "--recovery-timeout", type=float, default=120, help="seconds to recover after healing"
    )
    p.add_argument("--seed", type=int, help="nemesis random seed")
    p.add_argument(
        "--nemesis",
        default="partition,kill,pause",
        help="faults, comma-separated, from partition,kill,pause,loss,crash-client; or none",
    )
    p.add_argument("--nemesis-interval", type=float, default=10, help="seconds between faults")
    p.add_argument(
        "--partition-shapes", default="", help="isolate,halves,bridge,majorities-ring (default all)"
    )
    p.add_argument("--loss-probability", type=float, default=0.3)
    p.add_argument(
        "--crash-point",
        default="next-op",
        choices=["next-op", "before-effect", "after-effect", "after-ack", "random"],
        help="where crash-client strikes a consumer: before its next op (default), or while "
        "it processes its next delivery (random: one of the three processing moments)",
    )
    p.add_argument(
        "--crash-clients",
        default="consumers",
        choices=["consumers", "producers", "both"],
        help="whom crash-client strikes (default consumers); producers crash with a send in "
        "flight, which is then info",
    )
    p.add_argument(
        "--sink",
        choices=["naive", "dedupe", "kafka-txn"],
        help="the consumers' side effect (default: none): naive or dedupe rows in a database, "
        "or kafka-txn, an output record committed with the offsets (Kafka only)",
    )
    p.add_argument(
        "--sink-db",
        default="sqlite",
        choices=["sqlite", "postgres"],
        help="the naive/dedupe sink's database: sqlite in the run directory (default), or a "
        "PostgreSQL server the tool starts (Debian's postgresql)",
    )
    g = p.add_argument_group("rabbitmq")
    g.add_argument("--queue-type", default="quorum", help="quorum (default), classic, mirrored")
    g.add_argument(
        "--confirms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="publisher confirms (default on)",
    )
    g.add_argument("--ack", help="manual (default) or auto")
    g.add_argument("--partition-handling", help="pause_minority (default), autoheal, ignore")
    g.add_argument("--net-ticktime", type=int, help="Erlang net_ticktime seconds (default 10)")
    g.add_argument("--prefetch", type=int, help="consumer prefetch with manual acks (default 64)")
    g.add_argument(
        "--receive-batch",
        type=int,
        help="messages one receive hands over at most (default 16; kafka: 500)",
    )
    g = p.add_argument_group("kafka")
    g.add_argument("--acks", choices=["0", "1", "all"], help="producer acks (default all)")
    g.add_argument(
        "--idempotence",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="idempotent producer (default: on with --acks all)",
    )
    g.add_argument("--retries", type=int, help="producer retries (default: until the deadline)")
    g.add_argument("--replication-factor", type=int, help="topic replication (default 3)")
    g.add_argument("--min-insync-replicas", type=int, help="min.insync.replicas (default 2)")
    g.add_argument(
        "--unclean-leader-election",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="let an out-of-sync replica become leader (default off)",
    )
    g.add_argument("--partitions", type=int, help="topic partitions (default 3)")
    g.add_argument(
        "--consumer-mode",
        choices=["subscribe", "assign"],
        help="group subscription with rebalances (default) or manual assignment",
    )
    g.add_argument(
        "--txn",
        action="store_true",
        help="transactional producers (txn ops), read_committed consumers",
    )
    g.add_argument(
        "--send-batch",
        type=int,
        help="messages per send op (default 100) / sends per txn (default 5)",
    )
    g.add_argument("--kafka-version", help="Kafka version from Maven Central (default 4.3.1)")
    g.add_argument("--kafka-home", help="an unpacked Kafka (or its libs dir) instead")
    g.add_argument("--kafka-heap", help="broker JVM heap (default 512m)")
    p.add_argument("--no-check", action="store_true", help="record only; check later")


def cluster_kwargs(args: argparse.Namespace) -> dict:
    """The RunOptions fields that say where the nodes are and where the run goes."""
    keys = ("nodes", "cluster_file", "subnet", "bridge", "prefix", "state", "store")
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=3, help="node count (default 3)")
    p.add_argument("--subnet", default="10.77.0.0/24", help="the nodes' private subnet")
    p.add_argument("--bridge", default="qcbr0", help="host bridge name")
    p.add_argument("--prefix", default="qc-", help="namespace name prefix")
    p.add_argument("--state", default=".state", help="state directory (keys, pidfiles)")


def _add_spark_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spark-master", help="Spark master URL (default: local[*])")
    p.add_argument("--driver-memory", default="4g", help="Spark driver heap (default: 4g)")
    p.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark setting, repeatable",
    )


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="queuecheck", description="Delivery checker for real message queues."
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
    _add_spark_options(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("report", help="regenerate report.html and junit.xml of a stored run")
    p.add_argument("path", help="a run directory (e.g. store/latest)")
    _add_spark_options(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("serve", help="serve the store on localhost with an index of runs")
    p.add_argument("--store", default="store")
    p.add_argument("--port", type=int, default=8000, help="port on 127.0.0.1 (0: any free one)")
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("index", help="build the columnar sidecar of a history (faster re-checks)")
    p.add_argument("path")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("cluster", help="the local namespace cluster: up, down, status")
    p.add_argument("action", choices=["up", "down", "status"])
    add_cluster_options(p)
    p.set_defaults(func=cmd_cluster)

    p = sub.add_parser("test", help="run a test against a real cluster and judge it")
    _add_test_options(p)
    add_cluster_options(p)
    _add_spark_options(p)
    p.set_defaults(func=cmd_test)

    p = sub.add_parser("demo", help="the main job on the embedded default")
    p.add_argument("--store", default="store")
    p.add_argument("--state", default=".state", help="state directory (keys, jars)")
    p.add_argument("--time-limit", type=float, default=30, help="seconds per run (default 30)")
    _add_spark_options(p)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "matrix", help="the exactly-once story: a short run per configuration, one table"
    )
    p.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    p.add_argument("--time-limit", type=float, default=20, help="seconds per run (default 20)")
    p.add_argument(
        "--crash-interval", type=float, default=1.0, help="seconds between client crashes (1)"
    )
    p.add_argument("--sink-db", default="sqlite", choices=["sqlite", "postgres"])
    p.add_argument("--seed", type=int, default=1, help="fault order seed (default 1)")
    p.add_argument("--store", default="store")
    add_cluster_options(p)
    _add_spark_options(p)
    p.set_defaults(func=cmd_matrix)
    return ap


def main(argv: list[str] | None = None) -> int:
    from checkers.job import UsageError
    from harness.db import DBError
    from harness.localcluster import ClusterError
    from harness.nodes import ClusterFileError
    from harness.remote import RemoteError
    from harness.runner import RunError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except HistoryError as e:
        err.print(f"[red]error:[/] history {getattr(args, 'path', '')}: {e}")
    except (
        UsageError,
        FileNotFoundError,
        ClusterError,
        ClusterFileError,
        RemoteError,
        DBError,
        RunError,
        ValueError,
    ) as e:
        err.print(f"[red]error:[/] {e}")
    except KeyboardInterrupt:
        err.print("[red]interrupted[/]")
    return 2


if __name__ == "__main__":
    sys.exit(main())
