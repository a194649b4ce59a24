"""The matrix table's cells, from results documents: what a reader sees."""

from rich.console import Console

from harness.commands.matrix import cell, print_matrix


def doc(valid, claimed, hollow=None, **counts):
    prop = {"valid": valid, "claimed": claimed}
    if hollow:
        prop["hollow"] = hollow
    return {"properties": {"exactly-once-effect": prop}, "counts": counts}


def test_a_cell_says_claimed_held_or_violated_with_the_counts_that_decide():
    assert cell(doc(True, True), "exactly-once-effect") == "claimed: held"
    assert (
        cell(doc(False, False, **{"effect-duplicated": 6, "effect-lost": 0}), "exactly-once-effect")
        == "violated (effect-duplicated 6)"
    )
    assert cell(doc(False, True, **{"effect-lost": 2}), "exactly-once-effect") == (
        "claimed: VIOLATED (effect-lost 2)"
    )
    assert cell(doc(True, True, hollow="no redelivery"), "exactly-once-effect") == (
        "claimed: held (hollow)"
    )
    assert cell(None, "at-most-once") == "not run"


def test_a_row_that_failed_keeps_its_place_with_the_error():
    console = Console(record=True, width=200)
    rows = [
        {"row": "kafka-transactions", "what": "txn", "error": "RunError: n2: unreachable"},
        {
            "row": "rabbitmq-manual-dedupe",
            "what": "dedupe",
            "results": {
                "properties": {
                    "at-least-once": {"valid": True, "claimed": True},
                    "exactly-once-effect": {"valid": True, "claimed": True},
                },
                "counts": {"duplicated": 12, "delivered": 100, "acknowledged": 100},
                "history": {"client-crashes": 9},
            },
        },
    ]
    print_matrix({"rows": rows}, console)
    text = console.export_text()
    assert "RunError: n2: unreachable" in text
    assert "client crashes 9, redelivered 12" in text
    assert "claimed: held" in text


def test_the_verdict_shouts_only_for_a_broken_promise():
    from reports.console import print_verdict

    console = Console(record=True, width=200)
    doc = {
        "valid": False,
        "properties": {
            "at-most-once": {"valid": False, "claimed": False, "reason": "duplicated=3"},
            "at-least-once": {"valid": False, "claimed": True, "reason": "lost=1"},
        },
        "counts": {"duplicated": 3, "lost": 1},
    }
    print_verdict(doc, console)
    rows = {
        line.split("│")[1].strip(): line
        for line in console.export_text().splitlines()
        if line.count("│") > 3 and line.split("│")[1].strip()
    }
    assert "VIOLATED" in rows["at-least-once"]
    assert "violated" in rows["at-most-once"] and "VIOLATED" not in rows["at-most-once"]


def test_the_markdown_table_has_a_row_per_configuration_and_its_run():
    from harness.commands.matrix import markdown

    rows = [
        {
            "row": "rabbitmq-manual-naive",
            "what": "naive",
            "run": "store/matrix-rabbitmq-manual-naive/1",
            "results": {
                "properties": {
                    "at-most-once": {"valid": False, "claimed": False},
                    "at-least-once": {"valid": True, "claimed": True},
                    "exactly-once-effect": {"valid": False, "claimed": False},
                },
                "counts": {"duplicated": 7, "effect-duplicated": 3},
            },
        },
        {"row": "kafka-transactions", "what": "txn", "error": "RunError: n2"},
    ]
    lines = markdown({"rows": rows}).splitlines()
    assert lines[0].startswith("| configuration | at-most-once | at-least-once |")
    assert len(lines) == 4 and all(line.count("|") == lines[0].count("|") for line in lines)
    assert "violated (effect-duplicated 3)" in lines[2]
    assert "store/matrix-rabbitmq-manual-naive/1" in lines[2]
    assert "RunError: n2" in lines[3]
