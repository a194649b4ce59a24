"""The layers of the code, checked on its import graph, as folders: no import
circle anywhere; harness's ground floor (the history contract, options,
the run directory and the store, node access) at the bottom; brokers,
faults, checkers and reports above it; harness/run/ (one run) above them;
harness/commands/ (the command line and what runs several runs) on the
roof, imported by nobody. Brokers live in their own folders; product code
imports no dev-only package."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from tests.paths import ROOT

PACKAGES = ("harness", "nemesis", "workloads", "checkers", "reports")
DEV_ONLY = ("psutil", "hypothesis", "pytest", "tests")
BROKERS = {"kafka": "workloads.kafka", "rabbitmq": "workloads.rabbitmq", "nats": "workloads.nats"}
REGISTRY = "workloads.registry"


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def imports(name: str, path: Path) -> set[str]:
    """Every module `name` imports, anywhere in it (lazy imports count)."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


MODULES = modules()
GRAPH = nx.DiGraph()
for _name, _path in MODULES.items():
    GRAPH.add_node(_name)
    for _target in imports(_name, _path):
        if _target in MODULES and _target != _name:
            GRAPH.add_edge(_name, _target)


def test_the_graph_sees_every_package_and_real_edges():
    # A walker that found nothing would pass every rule below.
    assert len(MODULES) > 50
    assert GRAPH.has_edge("harness.run.runner", "workloads.registry")
    assert GRAPH.has_edge("checkers.load", "harness.history")


def test_no_import_circle():
    cycles = list(nx.simple_cycles(GRAPH))
    assert cycles == [], f"import circles: {cycles[:5]}"


def under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# harness's ground floor: what everything above may use.
GROUND = (
    "harness.history",
    "harness.options",
    "harness.gobuild",
    "harness.version",
    "harness.names",
    "harness.rundir",
    "harness.store",
    "harness.nodes",
)
RUN = "harness.run"
COMMANDS = "harness.commands"
ABOVE_GROUND = ("workloads", "nemesis", "checkers", "reports")
EVERYTHING = (*GROUND, *ABOVE_GROUND, RUN, COMMANDS)


def test_every_module_lies_on_a_stated_floor():
    """A module dropped into harness/ beside the floors belongs to none."""
    loose = sorted(n for n in MODULES if n != "harness" and not under(n, *EVERYTHING))
    assert loose == []


@pytest.mark.parametrize(
    "layer, may_import",
    [
        # the ground: the contract at the very bottom, options below everything
        ("harness.history", ("harness.history",)),
        ("harness.options", ()),
        ("harness.names", ()),
        ("harness.gobuild", ("harness.options",)),
        ("harness.version", ()),
        ("harness.rundir", ("harness.history",)),
        ("harness.store", ("harness.options", "harness.names", "harness.rundir")),
        ("harness.nodes", ("harness.nodes", "harness.options", "harness.names")),
        # brokers: the ground only; never faults, judging or the run
        ("workloads", ("workloads", *GROUND)),
        ("nemesis", ("nemesis", "workloads", *GROUND)),
        # checkers see histories and run directories only (and read their options;
        # the native converter is built as every Go program of the tool is)
        (
            "checkers",
            ("checkers", "harness.history", "harness.options", "harness.rundir", "harness.gobuild"),
        ),
        ("reports", ("reports", "checkers", "nemesis", *GROUND)),
        # one run: everything but the commands
        (RUN, (RUN, *GROUND, *ABOVE_GROUND)),
        (COMMANDS, EVERYTHING),
    ],
)
def test_each_layer_imports_only_what_lies_below_it(layer, may_import):
    bad = sorted(
        (a, b)
        for a, b in GRAPH.edges
        if under(a, layer) and not under(b, *may_import) and b != "harness"
    )
    assert bad == [], f"{layer} imports above itself: {bad}"


def test_nothing_imports_the_commands():
    outside = [(a, b) for a, b in GRAPH.edges if under(b, COMMANDS) and not under(a, COMMANDS)]
    assert outside == []


def test_product_code_imports_no_dev_only_package():
    bad = sorted(
        (name, target)
        for name, path in MODULES.items()
        for target in imports(name, path)
        if target.split(".")[0] in DEV_ONLY
    )
    assert bad == []


def _code_words(path: Path) -> set[str]:
    """Identifiers and string constants of a module, docstrings left out."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    words: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            words.add(n.value.lower())
        elif isinstance(n, ast.Name):
            words.add(n.id.lower())
        elif isinstance(n, ast.Attribute):
            words.add(n.attr.lower())
        elif isinstance(n, ast.alias):
            words.add(n.name.lower())
    return words


@pytest.mark.parametrize("broker", sorted(BROKERS))
def test_a_broker_lives_in_its_own_folder(broker):
    """Outside its folder only the registry names it in code (docs may)."""
    folder = BROKERS[broker]
    named = sorted(
        name
        for name, path in MODULES.items()
        if not under(name, folder, REGISTRY) and any(broker in w for w in _code_words(path))
    )
    assert named == []
