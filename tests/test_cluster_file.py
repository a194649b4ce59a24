"""Cluster files for vendor nodes: good ones load, bad ones name the problem."""

import json

import pytest

from harness.nodes.clusterfile import ClusterFileError, load_cluster_file


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
