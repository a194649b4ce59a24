"""The loss fault spares the control connection: the node's own SSH port."""

import random

from harness.nodes.remote import NodeSpec, Remote
from nemesis.loss import LossNemesis


def test_loss_rules_return_the_nodes_own_ssh_port_first(monkeypatch):
    added = {}
    monkeypatch.setattr(
        "nemesis.iptables.Chain.add", lambda self, node, rules: added.update({node.name: rules})
    )
    node = Remote(NodeSpec("v1", "192.0.2.7", 2222, "qa", None))
    fault = LossNemesis([node], probability=0.25)
    assert fault.start(random.Random(1)) == {"target": "one", "nodes": ["v1"], "probability": 0.25}
    first, drop = added["v1"]
    assert first == "-p tcp --dport 2222 -j RETURN"  # not a fixed 22
    assert drop == "-m statistic --mode random --probability 0.25 -j DROP"
