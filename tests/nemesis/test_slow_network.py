"""The slow-network faults without a cluster: which links a strike holds,
the rules and qdiscs that hold them, the refusals (exit 2, naming the
option), the delayer's own decisions (the real Go program, -simulate), and
its pidfile handling (the start and stop scripts, on this machine)."""

from __future__ import annotations

import random
import statistics
import subprocess
import time
from pathlib import Path

import pytest

from harness.commands.cli import main
from harness.nodes.remote import NodeSpec, Remote
from nemesis import delayer
from nemesis.registry import COLOURS, FAULTS, FaultOptions
from nemesis.slow_network import (
    LINKS,
    SLOW_FAULTS,
    Daemon,
    DelayNemesis,
    DuplicateNemesis,
    RateNemesis,
    ReorderNemesis,
    plan,
    queue_rules,
    rate_counts,
    rate_script,
)

NODES = [Remote(NodeSpec(f"n{i}", f"10.9.0.1{i}", 2200 + i)) for i in (1, 2, 3)]


def test_the_four_faults_are_registered_with_their_options():
    assert [FAULTS[n] for n in ("delay", "reorder", "duplicate", "rate")] == list(SLOW_FAULTS)
    fields = set(FaultOptions.__dataclass_fields__)
    assert {"slow_links", "delay_ms", "delay_jitter_ms", "delay_correlation"} <= fields
    assert {"reorder_probability", "reorder_delay_ms", "duplicate_probability"} <= fields
    assert {"rate_kbit"} <= fields
    assert all(COLOURS[f.name] for f in SLOW_FAULTS)


def test_the_options_are_in_the_test_commands_help(capsys):
    with pytest.raises(SystemExit):
        main(["test", "--help"])
    out = capsys.readouterr().out
    for flag in (
        "--slow-links",
        "--delay-ms",
        "--delay-jitter-ms",
        "--delay-correlation",
        "--reorder-probability",
        "--duplicate-probability",
        "--rate-kbit",
    ):
        assert flag in out, flag


# -- which links ---------------------------------------------------------------


def test_client_broker_holds_every_nodes_link_to_the_clients():
    held = plan("client-broker", NODES)
    assert [h.names() for h in held] == [["n1->clients"], ["n2->clients"], ["n3->clients"]]
    assert held[0].others == (("n2", "10.9.0.12"), ("n3", "10.9.0.13"))


def test_broker_broker_holds_every_link_between_brokers_and_none_to_clients():
    held = plan("broker-broker", NODES)
    assert [h.names() for h in held] == [
        ["n1->n2", "n1->n3"],
        ["n2->n1", "n2->n3"],
        ["n3->n1", "n3->n2"],
    ]
    assert not any(h.clients for h in held)
    # one node alone has no link to a broker: nothing to hold
    assert plan("broker-broker", NODES[:1]) == []


def test_node_holds_every_link_of_the_struck_node_only():
    held = plan("node", NODES, [NODES[1]])
    assert [h.names() for h in held] == [["n2->n1", "n2->n3", "n2->clients"]]
    with pytest.raises(ValueError, match="slow links 'x'"):
        plan("x", NODES)


def test_queue_rules_pass_loopback_the_ssh_port_and_what_the_delayer_let_go():
    (n1, *_) = plan("client-broker", NODES)
    rules = queue_rules(n1, 5601, 0x100000)
    assert rules[:3] == [
        "-o lo -j RETURN",
        "-m mark --mark 0x100000/0x100000 -j RETURN",
        "-p tcp --sport 2201 -j RETURN",  # the node's own SSH port, not a fixed 22
    ]
    # the clients: everything but the other brokers
    assert rules[3:] == [
        "-d 10.9.0.12 -j RETURN",
        "-d 10.9.0.13 -j RETURN",
        "-j NFQUEUE --queue-num 5601 --queue-bypass",
    ]
    (b1, *_) = plan("broker-broker", NODES)
    assert queue_rules(b1, 5602, 0x200000)[3:] == [
        "-d 10.9.0.12 -j NFQUEUE --queue-num 5602 --queue-bypass",
        "-d 10.9.0.13 -j NFQUEUE --queue-num 5602 --queue-bypass",
    ]
    (s2,) = plan("node", NODES, [NODES[1]])
    assert queue_rules(s2, 5601, 0x100000)[-1] == "-j NFQUEUE --queue-num 5601 --queue-bypass"
    assert not any("RETURN" in r and "-d " in r for r in queue_rules(s2, 5601, 0x100000))


def test_rate_script_gives_each_held_link_a_class_and_sends_the_rest_straight():
    (b1, *_) = plan("broker-broker", NODES)
    script = rate_script(b1, 512)
    assert "tc qdisc replace dev $dev root handle 5a1: htb" in script
    assert "match ip sport 2201 0xffff flowid 5a1: " in script  # SSH: the qdisc itself, direct
    assert "classid 5a1:10 htb rate 512kbit ceil 512kbit" in script
    assert "match ip dst 10.9.0.12/32 flowid 5a1:10" in script
    assert "match ip dst 10.9.0.13/32 flowid 5a1:11" in script
    assert "tc qdisc add dev $dev parent 5a1:11 pfifo limit 1000" in script  # its own queue
    assert "match u32 0 0" not in script  # the clients' link is not held
    (c1, *_) = plan("client-broker", NODES)
    script = rate_script(c1, 1000)
    assert "match ip dst 10.9.0.12/32 flowid 5a1: " in script  # a broker link: straight out
    assert "classid 5a1:1 htb rate 1000kbit" in script
    assert script.index("match ip dst 10.9.0.13/32") < script.index("match u32 0 0 flowid 5a1:1")


def test_rate_counts_sum_the_qdiscs_lines():
    shown = (
        "qdisc htb 5a1: root refcnt 2 r2q 10 default 0 direct_packets_stat 31 direct_qlen 1000\n"
        " Sent 123456 bytes 789 pkt (dropped 4, overlimits 56 requeues 0)\n"
    )
    assert rate_counts(shown) == {"bytes": 123456, "packets": 789, "dropped": 4, "overlimits": 56}
    assert rate_counts("") == {"bytes": 0, "packets": 0, "dropped": 0, "overlimits": 0}


def test_the_start_op_names_the_links_and_the_settings(monkeypatch):
    struck = []
    monkeypatch.setattr(DelayNemesis, "_slow", lambda self, node, held: struck.append(node.name))
    fault = DelayNemesis(NODES, links=["client-broker"])
    value = fault.start(random.Random(1))
    assert value == {
        "links": "client-broker",
        "held": ["n1->clients", "n2->clients", "n3->clients"],
        "delay-ms": 100.0,
        "jitter-ms": 10.0,
        "correlation": 0.25,
    }
    assert sorted(struck) == ["n1", "n2", "n3"] and fault.active()
    node_fault = RateNemesis(NODES, links=["node"])
    monkeypatch.setattr(RateNemesis, "_slow", lambda self, node, held: None)
    value = node_fault.start(random.Random(2))
    assert value["links"] == "node" and value["target"] == "one" and len(value["nodes"]) == 1
    (name,) = value["nodes"]
    assert all(link.startswith(f"{name}->") for link in value["held"]) and value["rate-kbit"] > 0


def test_the_delayer_is_told_the_settings():
    assert DelayNemesis(NODES).daemon_args() == [
        "-queue", "5601", "-mark", "0x100000", "-delay", "100000us", "-jitter", "10000us",
        "-correlation", "0.25", "-lifetime", "3600s",
    ]  # fmt: skip
    assert "-reorder" in ReorderNemesis(NODES).daemon_args()
    assert "-duplicate" in DuplicateNemesis(NODES).daemon_args()
    # each its own chain, queue and mark bit: they stack on a node
    queued = (DelayNemesis, ReorderNemesis, DuplicateNemesis)
    assert len({(c.chain_name, c.queue) for c in queued}) == 3
    assert len({c.mark for c in queued}) == 3 and not any(
        a.mark & b.mark for a in queued for b in queued if a is not b
    )


def test_teardown_never_raises_on_an_unreachable_node():
    gone = Remote(NodeSpec("gone", "127.0.0.1", 9), connect_timeout=2)
    for cls in SLOW_FAULTS:
        fault = cls([gone])
        fault.teardown()  # logs, never raises
        assert not fault.active()


# -- refusals, before any node -------------------------------------------------


def _test(tmp_path, *args: str) -> list[str]:
    return ["test", "--store", str(tmp_path / "store"), "--state", str(tmp_path / "state"), *args]


@pytest.mark.parametrize("fault", ["delay", "reorder", "duplicate", "rate"])
def test_a_cluster_file_is_refused_by_name(tmp_path, capsys, fault):
    nodes = "".join(f'[[nodes]]\nname = "n{i}"\nhost = "192.0.2.{i}"\n' for i in (1, 2, 3))
    (tmp_path / "c.toml").write_text(nodes)
    argv = _test(tmp_path, "--system", "nats", "--nemesis", fault, "--cluster-file")
    assert main([*argv, str(tmp_path / "c.toml")]) == 2
    err = capsys.readouterr().err
    assert f"--nemesis {fault}: needs the tool's own local cluster" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, says",
    [
        (["--nemesis", "delay", "--delay-jitter-ms", "150"], "--delay-jitter-ms 150: at most"),
        (["--nemesis", "delay", "--delay-ms", "0"], "--delay-ms: 0 is out of range"),
        (["--nemesis", "delay", "--delay-correlation", "1.5"], "--delay-correlation: 1.5 is out"),
        (["--nemesis", "reorder", "--reorder-probability", "0"], "--reorder-probability: 0 is"),
        (["--nemesis", "duplicate", "--duplicate-probability", "2"], "--duplicate-probability"),
        (["--nemesis", "rate", "--rate-kbit", "4"], "--rate-kbit: 4 is out of range"),
        (["--nemesis", "rate", "--slow-links", "bogus"], "--slow-links: 'bogus' is not one of"),
        (
            ["--nemesis", "rate", "--slow-links", "broker-broker", "--nodes", "1",
             "--replicas", "1"],
            "--slow-links broker-broker: one node has no link",
        ),
        (
            ["--nemesis", "delay", "--slow-links", "node", "--fault-targets", "controller"],
            "--fault-targets controller: nats's brokers have no controller",
        ),
    ],
)  # fmt: skip
def test_bad_settings_are_one_error_naming_the_option(tmp_path, capsys, args, says):
    assert main(_test(tmp_path, "--system", "nats", *args)) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


# -- the delayer's decisions: the Go program itself ----------------------------


@pytest.fixture(scope="module")
def qc_delay(tmp_path_factory) -> Path:
    # the build `make setup` made, else one made here
    return delayer.build(tmp_path_factory.mktemp("state"))


def simulate(exe: Path, n: int, *args: str) -> tuple[list[float], list[int]]:
    out = subprocess.run(
        [str(exe), "-simulate", str(n), "-seed", "7", *args],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    rows = [line.split() for line in out.splitlines()]
    assert len(rows) == n
    return [int(h) / 1000 for h, _ in rows], [int(c) for _, c in rows]


def lag1(xs: list[float]) -> float:
    return statistics.correlation(xs[:-1], xs[1:])


def test_delays_are_the_delay_give_or_take_the_jitter_and_correlated(qc_delay):
    held, copies = simulate(qc_delay, 20000, "-delay", "100ms", "-jitter", "10ms",
                            "-correlation", "0.25")  # fmt: skip
    assert 90 <= min(held) and max(held) <= 110
    assert statistics.mean(held) == pytest.approx(100, abs=0.5)
    assert lag1(held) == pytest.approx(0.25, abs=0.05)  # each draw weighs in the last
    assert sum(copies) == 0
    plain, _ = simulate(qc_delay, 20000, "-delay", "100ms", "-jitter", "10ms")
    assert abs(lag1(plain)) < 0.03
    assert statistics.pstdev(plain) == pytest.approx(10 / 3**0.5, rel=0.05)  # uniform on ±10


def test_reorder_sends_its_share_at_once_and_duplicate_copies_its_share(qc_delay):
    held, _ = simulate(qc_delay, 20000, "-delay", "20ms", "-reorder", "0.25")
    at_once = sum(1 for h in held if h == 0) / len(held)
    assert at_once == pytest.approx(0.25, abs=0.02)
    assert all(h in (0, 20) for h in held)
    _, copies = simulate(qc_delay, 20000, "-duplicate", "0.05")
    assert sum(copies) / len(copies) == pytest.approx(0.05, abs=0.01)


def test_the_delayer_refuses_bad_flags(qc_delay):
    p = subprocess.run([str(qc_delay), "-reorder", "1.5", "-simulate", "1"], capture_output=True,
                       text=True)  # fmt: skip
    assert p.returncode == 2 and "-reorder 1.5: must be in [0, 1]" in p.stderr
    p = subprocess.run([str(qc_delay), "-queue", "7"], capture_output=True, text=True)
    assert p.returncode == 2 and "-pidfile are needed" in p.stderr


# -- the pidfile: started, found, stopped only while it is ours ------------------

STAND_IN = """#!/bin/sh
# stands in for qc-delay on this machine: its pidfile once "bound", its
# stats on SIGTERM
while [ $# -gt 0 ]; do case $1 in -pidfile) p=$2;; -stats) s=$2;; esac; shift; done
trap 'echo "{\\"queued\\": 3}" > "$s"; exit 0' TERM
echo $$ > "$p"
while :; do sleep 0.05; done
"""


def test_the_daemon_is_started_and_stopped_by_its_pidfile_only(tmp_path):
    exe = tmp_path / "stand-in"
    exe.write_text(STAND_IN)
    exe.chmod(0o755)
    d = Daemon("delay", str(tmp_path / "n1" / "slow-network"))
    out = subprocess.run(["sh", "-c", d.start_script(str(exe), ["-queue", "5601"])],
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    pid = int(out.stdout)
    assert Path(f"/proc/{pid}").exists()
    stopped = subprocess.run(["sh", "-c", d.stop_script()], capture_output=True, text=True,
                             timeout=30).stdout  # fmt: skip
    assert stopped.strip() == '{"queued": 3}'
    assert not Path(d.pidfile).exists()
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_a_pidfile_naming_another_process_signals_nothing(tmp_path):
    other = subprocess.Popen(["sleep", "30"])
    try:
        d = Daemon("delay", str(tmp_path))
        Path(d.pidfile).write_text(f"{other.pid}\n")
        subprocess.run(["sh", "-c", d.stop_script()], check=True, timeout=30)
        assert other.poll() is None  # not ours: untouched
        assert not Path(d.pidfile).exists()
    finally:
        other.kill()
        other.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_links_are_the_documented_three():
    assert LINKS == ("client-broker", "broker-broker", "node")
