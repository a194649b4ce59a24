"""The report's fault labels (reports/plotdata.py describe_fault)."""

import json

from reports.plotdata import describe_fault


def test_a_fault_label_names_what_was_struck():
    assert describe_fault("kill", json.dumps({"target": "one", "nodes": ["n2"]})) == "kill n2"
    assert describe_fault("partition", json.dumps({"shape": "halves"})) == "partition halves"
    crashed = {"crashed": [{"process": 3}, {"process": 7}]}
    assert describe_fault("crash-client", json.dumps(crashed)) == "crash-client 3,7"
    fence = {"transactional-id": "queuecheck-ab12-4", "in-transaction": True, "fenced": True}
    assert describe_fault("fence", json.dumps(fence)) == "fence queuecheck-ab12-4"
    assert describe_fault("kill", "not json") == "kill"
