"""The order in which a lifecycle runs the components assembled on it, on a
real tree on this machine: released (last assembled first) before its
node's tree is made anew or removed, prepared once it is made, their start
environments merged in assembly order; a release that fails keeps the
others from nothing and the tree stays."""

from __future__ import annotations

import pytest

from harness.nodes.remote import RemoteError
from tests.here import Here
from workloads.components.assembly import Components, NodeTree


class Step:
    """A component that writes each hook it is given into its host's journal;
    `fails` names the hooks it fails (as an unreachable node would)."""

    label = ""
    fails: tuple[str, ...] = ()

    def __init__(self, host):
        self.host = host

    def hook(self, what: str, node=None) -> None:
        self.host.journal.append(f"{what} {self.label}")
        if what in self.fails:
            raise RemoteError(f"{node.name if node else '-'}: {self.label} cannot {what}")

    def install(self, node):
        self.hook("install", node)
        return {self.label: "installed"}

    def prepare(self, node):
        self.hook("prepare", node)

    def launch_env(self, node):
        return {"WHO": self.label, self.label.upper(): "1"}

    def settle(self):
        self.hook("settle")

    def release(self, node):
        self.hook("release", node)


class Mount(Step):
    label = "mount"


class Clock(Step):
    label = "clock"


class FailingMount(Mount):
    fails = ("release",)


class Tree(NodeTree):
    def __init__(self, root, kinds):
        self.root = root
        self.nodes = [Here()]
        self.journal: list[str] = []
        self.components = Components(self, kinds)

    def dir(self, node):
        return str(self.root / node.name / "broker")


def test_the_tree_is_made_anew_between_the_releases_and_the_preparations(tmp_path):
    tree, node = Tree(tmp_path, [Mount, Clock]), Here()
    old = tmp_path / "n1" / "broker" / "data" / "old.log"
    old.parent.mkdir(parents=True)
    old.write_text("a killed run's")
    tree.renew_tree(node, ["etc", "data"])
    assert tree.journal == ["release clock", "release mount", "prepare mount", "prepare clock"]
    assert sorted(p.name for p in (tmp_path / "n1" / "broker").iterdir()) == ["data", "etc"]
    assert not old.exists()
    assert tree.components.install(node) == {"mount": "installed", "clock": "installed"}
    # the later component's word wins where two set the same variable
    assert tree.launch_env(node) == {"WHO": "clock", "MOUNT": "1", "CLOCK": "1"}
    tree.journal.clear()
    tree.settle()
    tree.remove_tree(node)
    assert tree.journal == ["settle mount", "settle clock", "release clock", "release mount"]
    assert not (tmp_path / "n1" / "broker").exists()


def test_a_release_that_fails_keeps_the_others_from_theirs_and_the_tree_stays(tmp_path, caplog):
    tree, node = Tree(tmp_path, [FailingMount, Clock]), Here()
    (tmp_path / "n1" / "broker").mkdir(parents=True)
    with pytest.raises(RemoteError, match="mount cannot release"):
        tree.remove_tree(node)
    assert tree.journal == ["release clock", "release mount"]
    assert (tmp_path / "n1" / "broker").exists()  # rm -rf would reach through a mount still up
    assert "releasing FailingMount" in caplog.text


def test_a_lifecycle_with_no_components_runs_no_hooks(tmp_path):
    tree, node = Tree(tmp_path, []), Here()
    tree.renew_tree(node, ["data"])
    assert tree.launch_env(node) == {} and tree.components.install(node) == {}
    tree.remove_tree(node)
    assert tree.journal == [] and not (tmp_path / "n1" / "broker").exists()
