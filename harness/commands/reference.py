"""The docs' reference pages, made from the code (docs/reference/): every
option of `queuecheck test` as its parser declares it, the properties with
the counts and anomaly kinds that decide them (the checker registry), and
the plan steps (the step registry), and the history contract (from its
harness/history/README.md). Never edited by hand: `make docs`
writes them, and a test fails when a committed page differs from what the
code makes.

    python -m harness.commands.reference [DIR]   writes them (default docs/reference)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

HEADER = "<!-- made by `python -m harness.commands.reference` from the code: never edit -->\n\n"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "docs" / "reference"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _flags(action: argparse.Action) -> str:
    names = ", ".join(f"`{o}`" for o in action.option_strings)
    if action.nargs == 0:
        return names
    meta = action.metavar or action.dest.upper()
    return f"{names} `{meta}`"


def options_page() -> str:
    """`queuecheck test`'s options, group by group, as its --help says them."""
    from harness.commands.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    test = sub.choices["test"]
    formatter = test._get_formatter()
    out = [
        "# Options of `queuecheck test`\n",
        HEADER,
        "Every option of a run, grouped as `queuecheck test --help` groups them; "
        "a test file (`--spec`) takes the same names without the dashes. "
        "`demo`, `matrix`, `findings`, `gate`, `suite` and `replay` take the "
        "run's options too, beside their own (`queuecheck COMMAND --help`).\n",
    ]
    for group in test._action_groups:
        actions = [a for a in group._group_actions if a.option_strings and a.dest != "help"]
        if not actions:
            continue
        title = "general" if group.title in ("options", "optional arguments") else group.title
        out.append(f"\n## {title}\n")
        if group.description:
            out.append(f"{group.description}\n")
        out.append("| option | what it does |\n|---|---|")
        for action in actions:
            said = formatter._expand_help(action) if action.help else ""
            if action.choices and "{" not in said:
                said += f" (one of: {', '.join(map(str, action.choices))})"
            out.append(f"| {_flags(action)} | {_cell(said)} |")
    return "\n".join(out) + "\n"


def checkers_page() -> str:
    """Each property with the counts that decide it, and every anomaly kind."""
    from checkers.registry import CHECKERS, anomalies, property_rules

    out = ["# Properties and anomalies\n", HEADER]
    out.append("## Properties\n")
    out.append(
        "A property holds when every count it is made of is zero; which checker "
        "decides it, and those counts:\n"
    )
    out.append("| property | checker | made of |\n|---|---|---|")
    rules = property_rules()
    for checker in CHECKERS:
        for prop in checker.properties:
            counts = ", ".join(f"`{c}`" for c in rules.get(prop, ())) or "(its own reading)"
            out.append(f"| `{prop}` | {checker.name} | {counts} |")
    out.append("\n## Anomaly kinds\n")
    out.append("| kind | what it means |\n|---|---|")
    for kind, what in anomalies().items():
        out.append(f"| `{kind}` | {_cell(what)} |")
    return "\n".join(out) + "\n"


def plan_steps_page() -> str:
    """The plan vocabulary, from the step registry."""
    from nemesis.plan.registry import STEPS

    out = ["# Fault plan steps\n", HEADER]
    out.append(
        "A plan is a list of steps (a TOML file's `[[plan]]` tables), each naming "
        "its kind by its key; `queuecheck plan steps` prints the same.\n"
    )
    for key, step in STEPS.items():
        out.append(f"\n## `{key}`\n\n{_cell(step.summary)}\n")
        if step.takes:
            out.append("| key | meaning |\n|---|---|")
            for name, what in step.takes.items():
                out.append(f"| `{name}` | {_cell(what)} |")
    return "\n".join(out) + "\n"


def history_contract_page() -> str:
    """The history contract (harness/history/README.md) as a page of the site."""
    contract = Path(__file__).resolve().parents[1] / "history" / "README.md"
    title, _, rest = contract.read_text().partition("\n")
    return f"{title}\n\n{HEADER.replace('from the code', 'from harness/history/README.md')}{rest}"


PAGES = {
    "options.md": options_page,
    "checkers.md": checkers_page,
    "plan-steps.md": plan_steps_page,
    "history-contract.md": history_contract_page,
}


def pages() -> dict[str, str]:
    return {name: make() for name, make in PAGES.items()}


def write(directory: Path = DEFAULT_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in pages().items():
        path = directory / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DIR):
        print(path)
