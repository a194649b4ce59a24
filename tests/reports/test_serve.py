"""`queuecheck serve`'s nightly index (runs grouped by test, a verdict
history of coloured cells, "compare with previous") and its `/compare` page,
which takes only run directories inside the store. Runs are written by hand
(tests/test_compare.py's make_run); the server runs on a free localhost port."""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from html.parser import HTMLParser
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from reports.serve import FILTER_FROM_URL, by_test, compare_page, index_page, make_server
from tests.reports.test_compare import make_run

VIOLATED = {"at-least-once": {"valid": False, "claimed": True}}
UNKNOWN = {"at-least-once": {"valid": "unknown", "claimed": True}}


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    make_run(root, "kafka", "20260101T020000")
    make_run(root, "kafka", "20260102T020000", properties=VIOLATED)
    make_run(root, "kafka", "20260103T020000", properties=UNKNOWN)
    make_run(root, "rabbit", "20260102T030000")
    (root / "kafka" / "latest").symlink_to("20260103T020000")
    for run in root.glob("*/2026*"):
        (run / "report.html").write_text(f"<html>{run.name}</html>")
    return root


class Links(HTMLParser):
    """Every <a>: its attributes, and the section (test) it is in."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[dict] = []
        self.section: str | None = None
        self.in_h2 = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "h2":
            self.in_h2 = True
        if tag == "a":
            self.links.append({**a, "test": self.section})

    def handle_endtag(self, tag):
        if tag == "h2":
            self.in_h2 = False

    def handle_data(self, data):
        if self.in_h2:
            self.section = data


def links_of(page: str) -> list[dict]:
    parser = Links()
    parser.feed(page)
    return parser.links


def test_the_index_groups_runs_by_test_newest_first(store):
    groups = by_test(store)
    assert [name for name, _ in groups] == ["kafka", "rabbit"]  # kafka ran last
    assert [r["time"] for r in groups[0][1]] == [
        "20260103T020000",
        "20260102T020000",
        "20260101T020000",
    ]
    page = index_page(store)
    assert page.index("<h2>kafka</h2>") < page.index("<h2>rabbit</h2>")


def test_each_test_shows_its_verdicts_as_cells_linking_to_the_reports(store):
    cells = [a for a in links_of(index_page(store)) if "cell" in a.get("class", "")]
    kafka = [(a["class"], a["href"], a["title"]) for a in cells if a["test"] == "kafka"]
    assert kafka == [
        ("cell UNKNOWN", "kafka/20260103T020000/report.html", "20260103T020000: UNKNOWN"),
        ("cell INVALID", "kafka/20260102T020000/report.html", "20260102T020000: INVALID"),
        ("cell VALID", "kafka/20260101T020000/report.html", "20260101T020000: VALID"),
    ]
    assert [a["class"] for a in cells if a["test"] == "rabbit"] == ["cell VALID"]


def test_each_run_links_a_comparison_with_the_previous_run_of_its_test(store):
    compares = [a for a in links_of(index_page(store)) if a.get("class") == "compare"]
    pairs = []
    for a in compares:
        url = urlsplit(a["href"])
        q = parse_qs(url.query)
        assert url.path == "/compare" and a["test"] == "kafka"
        pairs.append((q["a"][0], q["b"][0]))
    assert pairs == [
        ("kafka/20260102T020000", "kafka/20260103T020000"),
        ("kafka/20260101T020000", "kafka/20260102T020000"),
    ]  # the first run of a test, and rabbit's only run, have nothing to compare with


def test_an_unchecked_run_is_skipped_as_a_baseline(store):
    (store / "kafka" / "20260102T020000" / "results.json").unlink()
    compares = [a for a in links_of(index_page(store)) if a.get("class") == "compare"]
    assert [parse_qs(urlsplit(a["href"]).query) for a in compares] == [
        {"a": ["kafka/20260101T020000"], "b": ["kafka/20260103T020000"]}
    ]


def test_compare_page_renders_a_comparison_of_two_runs_of_the_store(store):
    status, page = compare_page(store, "a=kafka/20260101T020000&b=kafka/20260102T020000")
    assert status == 200
    assert 'id="decision">FAIL' in page
    assert f"/{quote('kafka/20260102T020000')}/report.html" in page
    status, _ = compare_page(store, "a=kafka/20260101T020000&b=kafka/latest")
    assert status == 200  # store links resolve to runs of the store


@pytest.mark.parametrize(
    "query, status",
    [
        ("", 400),
        ("a=kafka/20260101T020000", 400),
        ("a=kafka/20260101T020000&a=kafka/20260102T020000&b=kafka/20260103T020000", 400),
        ("a=kafka/20260101T020000&b=../outside/20260101T000000", 404),
        ("a=kafka/20260101T020000&b=/etc", 404),
        ("a=kafka/20260101T020000&b=kafka/20260101T020000/../../..", 404),
        ("a=kafka/20260101T020000&b=kafka", 404),  # inside the store, but a test, not a run
        ("a=kafka/20260101T020000&b=kafka/nowhere", 404),
        ("a=kafka/20260101T020000&b=escape/link", 404),  # a link out of the store
        ("a=kafka/20260101T020000&b=kafka/%00", 404),
    ],
)
def test_compare_page_refuses_anything_but_runs_inside_the_store(store, query, status):
    outside = store.parent / "outside" / "20260101T000000"
    make_run(store.parent / "outside", "x", "y")  # a run, but not in this store
    outside.parent.mkdir(exist_ok=True)
    outside.symlink_to(store.parent / "outside" / "x" / "y")
    (store / "escape").mkdir()
    (store / "escape" / "link").symlink_to(store.parent / "outside" / "x" / "y")
    got, page = compare_page(store, query)
    assert got == status
    assert str(store.parent) not in page  # no absolute path of the machine in the answer


def test_compare_page_says_which_run_has_no_results(store):
    (store / "kafka" / "20260102T020000" / "results.json").unlink()
    status, page = compare_page(store, "a=kafka/20260101T020000&b=kafka/20260102T020000")
    assert status == 404 and page.startswith("kafka/20260102T020000: no results.json")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_server_serves_the_index_and_comparisons_on_localhost(store):
    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        status, index = get(base + "/")
        assert status == 200 and "compare with previous" in index
        href = next(a["href"] for a in links_of(index) if a.get("class") == "compare")
        status, page = get(base + href)
        assert status == 200 and "queuecheck compare" in page
        assert get(base + "/compare?a=kafka/20260101T020000&b=../../../etc")[0] == 404
        assert get(base + "/compare")[0] == 400
        assert get(base + "/kafka/20260101T020000/report.html") == (
            200,
            "<html>20260101T020000</html>",
        )
    finally:
        server.shutdown()
        server.server_close()


def test_names_and_paths_in_the_index_and_the_comparison_are_escaped(tmp_path):
    name = "<script>x<script>' onclick='y"  # no /: a test name is one directory
    make_run(tmp_path, name, "20260101T000000")
    make_run(tmp_path, name, "20260102T000000")
    page = index_page(tmp_path).replace(FILTER_FROM_URL, "")  # the index's own script
    assert "<script>" not in page and "' onclick" not in page
    href = next(a["href"] for a in links_of(page) if a.get("class") == "compare")
    status, compared = compare_page(tmp_path, urlsplit(href).query)
    assert status == 200 and "<script>" not in compared and "' onclick" not in compared
    # measured for the page, written nowhere: a GET never writes in the store
    assert not (tmp_path / name / "20260101T000000" / "latency.json").exists()


def test_each_run_shows_its_system_version_time_counts_and_whether_it_runs(store, tmp_path):
    import json

    from harness.nodes.lease import Holder

    run = store / "kafka" / "20260103T020000"
    test = {"name": "kafka", "system": "kafka", "config": {"db": {"version": "4.3.1"}}}
    (run / "test.json").write_text(json.dumps(test))
    (run / "stats.json").write_text('{"run-seconds": 93.4, "acknowledged": 9}')
    running = make_run(store, "kafka", "20260104T020000", acks=None)  # no stats yet
    crashed = make_run(store, "kafka", "20260105T020000", acks=None)
    for r in (running, crashed):
        (r / "results.json").unlink()
    leases = tmp_path / "leases"
    leases.mkdir()
    me = Holder.me(str(running), "the local cluster qc-", 600.0)  # this process: alive
    (leases / "netns-qc-.json").write_text(me.to_json())
    rows = {r["time"]: r for r in by_test(store, leases)[0][1]}
    assert rows["20260104T020000"]["verdict"] == "running"
    assert rows["20260105T020000"]["verdict"] == "crashed"  # no lease, no stats: no teardown
    shown = rows["20260103T020000"]
    assert (shown["system"], shown["version"], shown["seconds"]) == ("kafka", "4.3.1", 93.4)
    assert (shown["acknowledged"], shown["lost"]) == (3, 0)  # the check's counts
    page = index_page(store, leases)
    assert "<td>kafka</td><td>4.3.1</td><td>93 s</td><td>3</td><td>0</td>" in page
    assert "<td class='running'>running</td>" in page and "<td class='crashed'>" in page


def test_the_index_filter_runs_in_a_browser_from_the_url(store):
    """Headless Chromium opens /?q=rabbit: only rabbit's runs stay shown."""
    from tests.browser import dump_dom

    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        dom = dump_dom(f"http://127.0.0.1:{server.server_port}/?q=rabbit")
    finally:
        server.shutdown()
        server.server_close()
    sections = dom.split("<section")[1:]
    shown = [s for s in sections if not s.startswith(' class="test" hidden')]
    assert len(sections) == 2 and len(shown) == 1 and "<h2>rabbit</h2>" in shown[0], dom[:2000]
