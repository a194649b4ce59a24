"""Cluster files for vendor nodes: good ones load, bad ones name the problem."""

import json

import pytest

from harness.nodes.clusterfile import ClusterFileError, load_cluster_file, load_existing


def test_json_and_toml_cluster_files_load(tmp_path):
    key = tmp_path / "id"
    key.write_text("k")
    j = tmp_path / "c.json"
    j.write_text(
        json.dumps(
            {
                "nodes": [
                    {"name": "a", "host": "10.0.0.5", "key": str(key)},
                    {"name": "b", "host": "b.example", "port": 2222, "user": "qa"},
                ]
            }
        )
    )
    a, b = load_cluster_file(j)
    assert (a.name, a.host, a.port, a.user, a.key) == ("a", "10.0.0.5", 22, "root", str(key))
    assert (b.port, b.user, b.key) == (2222, "qa", None)
    t = tmp_path / "c.toml"
    t.write_text('[[nodes]]\nname = "a"\nhost = "h"\nport = 2200\n')
    assert load_cluster_file(t)[0].port == 2200


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"nodes": []}, "non-empty list under 'nodes'"),
        ({"nodes": [{"name": "a"}]}, "nodes[0]: field 'host'"),
        ({"nodes": [{"name": "a", "host": "h", "port": "22"}]}, "nodes[0]: field 'port'"),
        ({"nodes": [{"name": "a", "host": "h", "pasword": "x"}]}, "unknown field 'pasword'"),
        (
            {"nodes": [{"name": "a", "host": "h"}, {"name": "a", "host": "i"}]},
            "nodes[1]: node name 'a' appears twice",
        ),
        ({"nodes": [{"name": "../etc", "host": "h"}]}, "nodes[0]: field 'name': name '../etc'"),
        ({"nodes": [{"name": "a b", "host": "h"}]}, "nodes[0]: field 'name'"),
        ({"nodes": [{"name": "a", "host": "h; rm -rf /"}]}, "nodes[0]: field 'host'"),
        ({"nodes": [{"name": "a", "host": "-oProxyCommand=x"}]}, "nodes[0]: field 'host'"),
        ({"nodes": [{"name": "a", "host": "h", "user": "$(id)"}]}, "nodes[0]: field 'user'"),
        (
            {"nodes": [{"name": "a", "host": "h", "key": "/nonexistent/id"}]},
            "key file '/nonexistent/id' does not exist",
        ),
    ],
)
def test_bad_cluster_file_names_node_and_field(tmp_path, doc, message):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ClusterFileError) as e:
        load_cluster_file(p)
    assert message in str(e.value) and str(p) in str(e.value)


def test_an_existing_section_defaults_to_systemd_and_takes_overrides(tmp_path):
    p = tmp_path / "vendor.toml"
    p.write_text(
        """
[existing]
system = "kafka"
service = "confluent-kafka"
logs = ["/var/log/kafka"]
pause = "/opt/bin/pause {node} {service}"

[[nodes]]
name = "k1"
host = "10.0.0.11"
client = "10.0.0.11:9092"

[[nodes]]
name = "k2"
host = "10.0.0.12"
client = "k2.example:19092"
kill = "/opt/bin/kill-broker"
logs = []
"""
    )
    specs = load_cluster_file(p)
    assert [s.name for s in specs] == ["k1", "k2"]
    e = load_existing(p)
    k1, k2 = e.nodes["k1"], e.nodes["k2"]
    assert (e.system, e.service) == ("kafka", "confluent-kafka")
    assert k1.commands["start"] == "systemctl start confluent-kafka"
    assert k1.commands["kill"] == (
        "systemctl kill --kill-whom=main --signal=SIGKILL confluent-kafka"
    )
    assert k1.commands["pause"] == "/opt/bin/pause k1 confluent-kafka"
    assert k2.commands["kill"] == "/opt/bin/kill-broker"
    assert (k1.logs, k2.logs) == (["/var/log/kafka"], [])
    assert (k2.client_host, k2.client_port) == ("k2.example", 19092)


def test_a_cluster_file_without_existing_is_the_tools_own_to_run(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"nodes": [{"name": "a", "host": "h"}]}))
    assert load_existing(p) is None


def test_existing_credentials_are_kept_but_the_password_never_recorded(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(
        json.dumps(
            {
                "existing": {
                    "system": "rabbitmq",
                    "service": "rabbitmq-server",
                    "user": "qa",
                    "password": "s3cret",
                },
                "nodes": [{"name": "a", "host": "h", "client": "h:5672"}],
            }
        )
    )
    e = load_existing(p)
    assert e.credentials["password"] == "s3cret"
    assert "s3cret" not in json.dumps(e.record())


NODE = {"name": "a", "host": "h", "client": "h:9092"}


@pytest.mark.parametrize(
    "doc, message",
    [
        ({"existing": [], "nodes": [NODE]}, "[existing] must be a table"),
        ({"existing": {"service": "kafka"}, "nodes": [NODE]}, "field 'system'"),
        (
            {"existing": {"system": "kafka", "sevrice": "kafka"}, "nodes": [NODE]},
            "[existing]: unknown field 'sevrice'",
        ),
        (
            {
                "existing": {"system": "kafka", "service": "kafka"},
                "nodes": [{"name": "a", "host": "h"}],
            },
            "nodes[0]: field 'client'",
        ),
        (
            {
                "existing": {"system": "kafka", "service": "kafka"},
                "nodes": [{**NODE, "client": "h"}],
            },
            "nodes[0]: field 'client' 'h' is not host:port",
        ),
        (
            {"existing": {"system": "kafka"}, "nodes": [NODE]},
            "nodes[0]: no 'start' command, and no 'service'",
        ),
        (
            {"existing": {"system": "kafka", "service": "kafka; reboot"}, "nodes": [NODE]},
            "field 'service' 'kafka; reboot' is not a unit name",
        ),
        ({"nodes": [NODE]}, "nodes[0]: unknown field 'client'"),  # only with [existing]
        ({"nodes": [NODE], "exisitng": {}}, "unknown section 'exisitng'"),
    ],
)
def test_bad_existing_sections_name_the_field(tmp_path, doc, message):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(ClusterFileError) as e:
        load_existing(p)
    assert message in str(e.value) and str(p) in str(e.value)
