"""A RabbitMQ cluster someone else runs: this test plays the vendor, with
Debian's rabbitmq-server on namespace nodes under its own service script,
its own user, settings (autoheal, net_ticktime 7) and a queue holding
messages. queuecheck gets `[existing]` with the vendor's credentials and
`ctl`; it must fault the cluster through those commands, record the settings
the nodes report, and leave everything as it was but for its own queue."""

import json
import secrets

import pika
import pytest

from harness.history import read_history
from harness.nodes.remote import Remote
from harness.run.options import RunOptions
from harness.run.runner import Run
from tests.clusters import own_cluster, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]

CLUSTER = {"subnet": "10.77.13.0/24", "bridge": "qcebr13", "prefix": "qcv-"}
VENDOR = "/var/lib/qc-vendor-rabbit"
NAMES = ["r1", "r2", "r3"]
USER, PASSWORD = "vendor", "v3ndor-" + secrets.token_hex(4)
VENDOR_QUEUE, VENDOR_MESSAGES = "vendor-orders", 40

# The vendor's service script: one RabbitMQ node on its own tree, by its pidfile.
RABBITCTL = """#!/bin/sh
D={dir}
export HOME=$D/home RABBITMQ_NODENAME=rabbit@{host} RABBITMQ_USE_LONGNAME=true
export RABBITMQ_MNESIA_BASE=$D/mnesia RABBITMQ_LOG_BASE=$D/log RABBITMQ_PID_FILE=$D/rabbit.pid
export RABBITMQ_CONFIG_FILE=$D/rabbitmq.conf RABBITMQ_ADVANCED_CONFIG_FILE=$D/advanced.config
export RABBITMQ_ENABLED_PLUGINS_FILE=$D/enabled_plugins
export RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="+sbwt none +sbwtdcpu none +sbwtdio none"
CTL="/usr/lib/rabbitmq/bin/rabbitmqctl -n $RABBITMQ_NODENAME"
running() {{ [ -s $D/rabbit.pid ] && kill -0 "$(cat $D/rabbit.pid)" 2>/dev/null; }}
case "$1" in
  start) running && exit 0
         cd $D && setsid nohup /usr/lib/rabbitmq/bin/rabbitmq-server \\
           >> $D/console.out 2>&1 < /dev/null &
         # await_startup fails at once until the VM has registered with epmd
         for i in $(seq 240); do
           $CTL await_startup --timeout 60 >/dev/null 2>&1 && exit 0; sleep 0.5
         done; exit 1 ;;
  kill)  running || exit 1
         p=$(cat $D/rabbit.pid); kill -KILL $p
         while kill -0 $p 2>/dev/null; do sleep 0.1; done ;;
  stop)  running || exit 0
         p=$(cat $D/rabbit.pid); kill -CONT $p; kill -KILL $p ;;
  pause) running && kill -STOP "$(cat $D/rabbit.pid)" ;;
  resume) running && kill -CONT "$(cat $D/rabbit.pid)" ;;
  status) running ;;
  ctl)   shift; exec $CTL "$@" ;;
esac
"""


def fingerprint(node: Remote, name: str) -> str:
    return node.run(f"cat {VENDOR}/{name}/rabbitmq.conf | sha256sum").out.split()[0]


def vendor_queue_depth(host: str) -> int:
    params = pika.ConnectionParameters(
        host, 5672, credentials=pika.PlainCredentials(USER, PASSWORD), socket_timeout=5
    )
    with pika.BlockingConnection(params) as conn:
        return conn.channel().queue_declare(VENDOR_QUEUE, passive=True).method.message_count


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        specs = cluster.up()
        nodes = [Remote(s) for s in specs]
        hosts = [s.host for s in specs]
        cookie = secrets.token_hex(16)
        ctl = [f"{VENDOR}/{name}/rabbitctl" for name in NAMES]
        try:
            for node, name, host in zip(nodes, NAMES, hosts, strict=True):
                d = f"{VENDOR}/{name}"
                node.run(f"rm -rf {d} && mkdir -p {d}/home {d}/log {d}/mnesia")
                node.write(f"{d}/home/.erlang.cookie", cookie, mode=0o400)
                node.write(
                    f"{d}/rabbitmq.conf",
                    "cluster_partition_handling = autoheal\nloopback_users = none\n",
                )
                node.write(f"{d}/advanced.config", "[{kernel, [{net_ticktime, 7}]}].\n")
                node.write(f"{d}/enabled_plugins", "[].\n")
                node.write(f"{d}/rabbitctl", RABBITCTL.format(dir=d, host=host))
                node.run(f"chmod +x {d}/rabbitctl")
                node.run(f"{d}/rabbitctl start", timeout=180)
            for node, c in zip(nodes[1:], ctl[1:], strict=True):
                node.run(
                    f"{c} ctl stop_app && {c} ctl join_cluster rabbit@{hosts[0]} && "
                    f"{c} ctl start_app",
                    timeout=120,
                )
            first = nodes[0]
            first.run(f"{ctl[0]} ctl add_user {USER} {PASSWORD}")
            first.run(f"{ctl[0]} ctl set_permissions -p / {USER} '.*' '.*' '.*'")
            params = pika.ConnectionParameters(
                hosts[0], 5672, credentials=pika.PlainCredentials(USER, PASSWORD)
            )
            with pika.BlockingConnection(params) as conn:
                ch = conn.channel()
                ch.queue_declare(VENDOR_QUEUE, durable=True, arguments={"x-queue-type": "quorum"})
                ch.confirm_delivery()
                for k in range(VENDOR_MESSAGES):
                    ch.basic_publish("", VENDOR_QUEUE, f"order {k}".encode())
            yield cluster, nodes, hosts
        finally:
            for node, c, name in zip(nodes, ctl, NAMES, strict=True):
                node.run(f"{c} stop; epmd -kill; rm -rf {VENDOR}/{name}", check=False)
                node.close()


def test_an_existing_rabbitmq_is_faulted_through_its_commands_and_left_as_it_was(vendor, tmp_path):
    cluster, nodes, hosts = vendor
    before = [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)]
    doc = {
        "existing": {
            "system": "rabbitmq",
            "user": USER,
            "password": PASSWORD,
            "ctl": VENDOR + "/{node}/rabbitctl ctl",
            **{c: VENDOR + "/{node}/rabbitctl " + c for c in ("start", "stop", "kill")},
            **{c: VENDOR + "/{node}/rabbitctl " + c for c in ("pause", "resume")},
        },
        "nodes": [
            {
                "name": name,
                "host": host,
                "key": str(cluster.key),
                "client": f"{host}:5672",
                "logs": [f"{VENDOR}/{name}/log"],
            }
            for name, host in zip(NAMES, hosts, strict=True)
        ],
    }
    (tmp_path / "vendor.json").write_text(json.dumps(doc))
    run_dir, results = Run(
        RunOptions(
            system="rabbitmq",
            cluster_file=str(tmp_path / "vendor.json"),
            state=str(tmp_path / "state"),
            store=str(tmp_path / "store"),
            driver_memory="1g",
            time_limit=20,
            nemesis=["kill", "pause"],
            nemesis_interval=4,
            seed=5,
            system_options={"queue_type": "quorum", "confirms": True, "ack": "manual"},
        )
    ).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    for fault in ("start-kill", "start-pause"):
        assert any(op["f"] == fault and op["value"] and op["value"]["hit"] for op in ops), fault
    test = json.loads((run_dir / "test.json").read_text())
    config = test["config"]
    assert config["queue"].startswith("queuecheck-")
    # what the nodes run with, as they report it, not the tool's defaults
    assert (config["partition_handling"], config["net_ticktime"]) == ("autoheal", 7)
    assert config["settings"] == "read from the brokers"
    assert PASSWORD not in (run_dir / "test.json").read_text()
    assert test["claims"] == ["at-least-once"]  # broker-agrees: judged, not claimed
    # each node's view of the queue through the cluster file's ctl alone
    state = json.loads((run_dir / "brokers" / "state.json").read_text())
    assert state["scope"].startswith("the cluster file's ctl") and "quorum" not in state
    assert sorted(state["queues"]) == ["r1", "r2", "r3"]
    # judged from those views (their counts read until they catch up with the
    # drain), not claimed
    agrees = results["properties"]["broker-agrees"]
    assert agrees["claimed"] is False and agrees["valid"] is True
    print("broker-side:", results["properties"]["broker-agrees"])
    assert results["counts"]["acknowledged"] > 200
    assert results["counts"]["lost"] == 0
    assert results["valid"] is True
    assert any((run_dir / "nodes" / "r1" / "log").iterdir())  # the vendor's logs, collected

    # running, unchanged, the vendor's queue intact, the test's own queue gone
    assert all(
        n.run(f"{VENDOR}/{name}/rabbitctl status", check=False).exit == 0
        for n, name in zip(nodes, NAMES, strict=True)
    )
    assert [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)] == before
    assert wait_until(lambda: vendor_queue_depth(hosts[1]) == VENDOR_MESSAGES, 30)
    queues = nodes[0].run(f"{VENDOR}/r1/rabbitctl ctl list_queues name --formatter json").out
    assert {q["name"] for q in json.loads(queues)} == {VENDOR_QUEUE}
