"""The docs' reference pages are what the code makes of itself now
(harness/commands/reference.py): an option, checker, anomaly or plan step
added or changed without `make reference` fails here, naming the page."""

from __future__ import annotations

import pytest

from harness.commands.reference import DEFAULT_DIR, PAGES, pages


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_reference_page_is_what_the_code_makes(name):
    committed = (DEFAULT_DIR / name).read_text()
    assert committed == pages()[name], f"docs/reference/{name} is stale: run `make reference`"


def test_the_reference_names_every_option_and_checker():
    made = pages()
    for flag in ("--system", "--nemesis-plan", "--lazyfs", "--kafka-version", "--nats-version"):
        assert f"`{flag}`" in made["options.md"], flag
    assert "| `at-least-once` | delivery | `lost`, `lost-write` |" in made["checkers.md"]
    assert "## `overlap`" in made["plan-steps.md"]
