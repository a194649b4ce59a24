"""A NATS JetStream cluster someone else runs: this test plays the vendor,
with nats-server on namespace nodes under its own service script, an
account of its own (a user and password, JetStream on) and a stream holding
its messages. queuecheck gets `[existing]` with those credentials and
commands; it must fault the servers through the commands (the stream's
leader, found by the JetStream API), lose nothing, and leave everything as
it was but for its own stream, which it deletes."""

import asyncio
import json
import secrets

import nats
import pytest

from harness.history import read_history
from harness.nodes.remote import Remote
from harness.run.options import RunOptions
from harness.run.runner import Run
from tests.clusters import own_cluster, wait_until
from workloads.nats.dist import DEFAULT_VERSION, ensure_nats

pytestmark = [pytest.mark.integration, pytest.mark.light_integration]

CLUSTER = {"subnet": "10.77.34.0/24", "bridge": "qcwbr34", "prefix": "qcw-"}
VENDOR = "/var/lib/qc-vendor-nats"
NAMES = ["v1", "v2", "v3"]  # each server's server_name, as the cluster file must say
USER, PASSWORD = "vendor", "v3ndor-" + secrets.token_hex(4)
VENDOR_STREAM, VENDOR_MESSAGES = "vendor-orders", 40

# The vendor's service script: one nats-server on its own tree, by its pidfile.
NATSCTL = """#!/bin/sh
D={dir}
running() {{ [ -s $D/nats.pid ] && kill -0 "$(cat $D/nats.pid)" 2>/dev/null; }}
ready() {{ grep -c "Server is ready" $D/nats.log 2>/dev/null || echo 0; }}
case "$1" in
  start) running && exit 0
         n=$(ready)
         cd $D && setsid nohup {server} -c $D/nats.conf >> $D/console.out 2>&1 < /dev/null &
         echo $! > $D/nats.pid
         for i in $(seq 300); do [ "$(ready)" -gt "$n" ] && exit 0; sleep 0.1; done; exit 1 ;;
  kill)  running || exit 1
         p=$(cat $D/nats.pid); kill -KILL $p
         while kill -0 $p 2>/dev/null; do sleep 0.1; done ;;
  stop)  running || exit 0
         p=$(cat $D/nats.pid); kill -CONT $p; kill -TERM $p
         while kill -0 $p 2>/dev/null; do sleep 0.1; done ;;
  pause) running && kill -STOP "$(cat $D/nats.pid)" ;;
  resume) running && kill -CONT "$(cat $D/nats.pid)" ;;
  status) running ;;
esac
"""


def config(d: str, name: str, host: str, hosts: list[str]) -> str:
    routes = ", ".join(f'"nats://{h}:6222"' for h in hosts if h != host)
    return (
        f'server_name: "{name}"\nlisten: "{host}:4222"\nlog_file: "{d}/nats.log"\n'
        f'jetstream {{ store_dir: "{d}/data" }}\n'
        f'accounts {{ APP: {{ jetstream: enabled, users: [{{user: "{USER}", '
        f'password: "{PASSWORD}"}}] }} }}\n'
        f'cluster {{ name: vendor, listen: "{host}:6222", routes: [{routes}] }}\n'
    )


async def vendor_call(host: str, call):
    nc = await nats.connect(f"nats://{host}:4222", user=USER, password=PASSWORD)
    try:
        return await call(nc.jetstream())
    finally:
        await nc.close()


def vendor_streams(host: str) -> dict[str, int]:
    """Every stream of the vendor's account and its message count."""

    async def listing(js):
        return {s.config.name: s.state.messages for s in await js.streams_info()}

    return asyncio.run(vendor_call(host, listing))


@pytest.fixture(scope="module")
def vendor(tmp_path_factory):
    server = ensure_nats(DEFAULT_VERSION) / "nats-server"  # the nodes share this file system
    with own_cluster(tmp_path_factory, **CLUSTER) as cluster:
        specs = cluster.up()
        nodes = [Remote(s) for s in specs]
        hosts = [s.host for s in specs]
        ctl = [f"{VENDOR}/{name}/natsctl" for name in NAMES]
        try:
            for node, name, host in zip(nodes, NAMES, hosts, strict=True):
                d = f"{VENDOR}/{name}"
                node.run(f"rm -rf {d} && mkdir -p {d}/data")
                node.write(f"{d}/nats.conf", config(d, name, host, hosts))
                node.write(f"{d}/natsctl", NATSCTL.format(dir=d, server=server))
                node.run(f"chmod +x {d}/natsctl")
            for node, c in zip(nodes, ctl, strict=True):  # routes retry: any order
                node.run(f"{c} start", timeout=60)

            async def stream(js):
                await js.add_stream(name=VENDOR_STREAM, subjects=[VENDOR_STREAM], num_replicas=3)

            async def orders(js):
                for k in range(VENDOR_MESSAGES):
                    await js.publish(VENDOR_STREAM, f"order {k}".encode())

            # the meta leader is elected some seconds after the last server starts
            made = lambda: asyncio.run(vendor_call(hosts[0], stream)) is None  # noqa: E731
            assert wait_until(made, 60, errors_mean_not_yet=True)
            asyncio.run(vendor_call(hosts[0], orders))
            yield cluster, nodes, hosts
        finally:
            for node, c, name in zip(nodes, ctl, NAMES, strict=True):
                node.run(f"{c} stop; rm -rf {VENDOR}/{name}", check=False, timeout=60)
                node.close()


def fingerprint(node: Remote, name: str) -> str:
    return node.run(f"sha256sum {VENDOR}/{name}/nats.conf").out.split()[0]


def test_an_existing_nats_is_faulted_through_its_commands_and_left_as_it_was(vendor, tmp_path):
    cluster, nodes, hosts = vendor
    before = [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)]
    doc = {
        "existing": {
            "system": "nats",
            "user": USER,
            "password": PASSWORD,
            **{c: VENDOR + "/{node}/natsctl " + c for c in ("start", "stop", "kill")},
            **{c: VENDOR + "/{node}/natsctl " + c for c in ("pause", "resume")},
        },
        "nodes": [
            {
                "name": name,
                "host": host,
                "key": str(cluster.key),
                "client": f"{host}:4222",
                "logs": [f"{VENDOR}/{name}/nats.log"],
            }
            for name, host in zip(NAMES, hosts, strict=True)
        ],
    }
    (tmp_path / "vendor.json").write_text(json.dumps(doc))
    run_dir, results = Run(
        RunOptions(
            system="nats",
            cluster_file=str(tmp_path / "vendor.json"),
            state=str(tmp_path / "state"),
            store=str(tmp_path / "store"),
            driver_memory="1g",
            time_limit=20,
            concurrency=4,
            producers=2,
            nemesis=["kill", "pause"],
            fault_targets=["primaries"],
            nemesis_interval=4,
            seed=5,
        )
    ).execute()
    ops = list(read_history(run_dir / "history.jsonl"))
    for fault in ("start-kill", "start-pause"):
        hits = [op["value"] for op in ops if op["f"] == fault and op["value"]]
        assert hits and all(v["hit"] for v in hits), (fault, hits)
        # aimed at the stream's leader, as STREAM.INFO named it
        assert any(v.get("target") == "primaries" and "fallback" not in v for v in hits), hits
    test = json.loads((run_dir / "test.json").read_text())
    config = test["config"]
    assert config["stream"].startswith("queuecheck-")
    assert config["nats_version"] == DEFAULT_VERSION  # as the servers told the clients
    assert config["sync"] == "the servers' own (not read)"
    assert config["existing"]["system"] == "nats" and config["existing"]["nodes"]["v1"]
    assert PASSWORD not in (run_dir / "test.json").read_text()
    assert test["claims"] == ["at-least-once", "per-partition-order"]  # broker-agrees: not claimed
    state = json.loads((run_dir / "brokers" / "state.json").read_text())
    assert state["scope"].startswith("the JetStream API only") and not state["unreadable"]
    [group] = state["metadata"].values()
    assert group["replicas"] == [1, 2, 3] and group["leader"] in group["isr"]
    counts = results["counts"]
    assert counts["acknowledged"] > 300 and counts["lost"] == 0 and counts["duplicate"] == 0
    assert results["valid"] is True
    assert (run_dir / "nodes" / "v1" / "nats.log").stat().st_size > 0  # the vendor's log

    # running, unchanged, the vendor's stream intact, the test's own gone
    assert all(
        n.run(f"{VENDOR}/{name}/natsctl status", check=False).exit == 0
        for n, name in zip(nodes, NAMES, strict=True)
    )
    assert [fingerprint(n, name) for n, name in zip(nodes, NAMES, strict=True)] == before
    intact = {VENDOR_STREAM: VENDOR_MESSAGES}
    assert wait_until(lambda: vendor_streams(hosts[1]) == intact, 30, errors_mean_not_yet=True)
