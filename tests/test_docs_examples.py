"""The TOML examples of the README and the docs load as they are written,
each by the reader it is for: cluster files (and the existing cluster's
one says what the docs say of it), a fault plan, a suite file."""

import re
from pathlib import Path

from harness.nodes.clusterfile import load_cluster_file, load_existing

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def examples() -> list[str]:
    return [t for p in PAGES for t in re.findall(r"```toml\n(.*?)```", p.read_text(), re.S)]


def cluster_files() -> list[str]:
    return [t for t in examples() if "[[plan]]" not in t and "[[test]]" not in t]


def test_the_docs_plan_and_suite_examples_load(tmp_path):
    from harness.commands.suite import load_suite
    from nemesis.plan.plan import load

    plans = [t for t in examples() if "[[plan]]" in t]
    suites = [t for t in examples() if "[[test]]" in t]
    assert plans and suites
    for i, text in enumerate(plans):
        path = tmp_path / f"plan{i}.toml"
        path.write_text(text)
        assert load(path).faults(), text
    for i, text in enumerate(suites):
        path = tmp_path / f"suite{i}.toml"
        path.write_text(text)
        assert len(load_suite(path).tests) >= 2


def test_every_cluster_file_in_the_docs_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # its key = "~/.ssh/id_ed25519"
    (tmp_path / ".ssh").mkdir()
    (tmp_path / ".ssh" / "id_ed25519").write_text("k")
    found = cluster_files()
    assert len(found) >= 2
    kinds = []
    for i, text in enumerate(found):
        path = tmp_path / f"example{i}.toml"
        path.write_text(text)
        assert len(load_cluster_file(path)) == 3
        kinds.append(load_existing(path))
    existing = [e for e in kinds if e is not None]
    assert len(existing) == 1 and existing[0].system == "kafka"
    k1 = existing[0].nodes["k1"]
    assert k1.commands["kill"] == "systemctl kill --kill-whom=main --signal=SIGKILL kafka"
    assert (k1.client_host, k1.client_port, k1.logs) == ("10.0.0.11", 9092, ["/var/log/kafka"])
