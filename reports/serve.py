"""`queuecheck serve`: the store over HTTP (loopback unless --host says
otherwise). The index groups the runs by test, the test whose last run is
newest first, with a filter; each test shows its verdict history as a row
of coloured cells (green valid, red violated, grey unknown, newest first,
each linking to that run's report) and its runs (system, broker version,
how long it took, acknowledged and lost, its verdict, or "running" while it
holds a cluster's lease, "crashed" when it ended without its teardown),
each with a link "compare with previous" to `/compare?a=<previous run>&b=<run>`,
a comparison (reports/compare.py) rendered on the fly. `/compare` takes only
run directories inside the store (`<test>/<time>/` with a test.json, paths
relative to the store): anything else is 400 or 404."""

from __future__ import annotations

import html
import json
import os
import stat
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from itertools import groupby
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode, urlsplit

from harness.history import HISTORY_FILE
from harness.rundir import REPORT_FILE, RESULTS_FILE, TEST_FILE, RunDir

VERDICT = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}
STYLE = (
    "body{font-family:system-ui;margin:2em}td,th{padding:.3em .8em;border-bottom:1px solid #ddd;"
    "text-align:left}.VALID{color:#2e7d32}.INVALID{color:#c62828}.UNKNOWN{color:#b26a00}"
    ".cells{display:flex;gap:3px;margin:.4em 0}.cell{display:inline-block;width:1.1em;"
    "height:1.1em;border-radius:2px;background:#e0e0e0}.cell.VALID{background:#2e7d32}"
    ".cell.INVALID{background:#c62828}.cell.UNKNOWN{background:#9e9e9e}"
    ".running{color:#1565c0}.crashed{color:#6a1b9a}#filter{padding:.3em;width:24em}"
)


RUNNING, CRASHED, NOT_CHECKED = "running", "crashed", "not checked"


def running_runs(leases: Path | None = None) -> set[str]:
    """The run directories (real paths) that hold a cluster's lease now: a
    run in progress, whose holder has not provably gone."""
    from harness.nodes.lease import CONTROL_DIR, Holder

    out = set()
    for path in (leases or CONTROL_DIR).glob("*.json"):
        try:
            holder = Holder.from_json(path.read_text())
        except OSError:
            continue
        if holder is not None and holder.gone() is None:
            out.add(os.path.realpath(holder.run))
    return out


def _doc(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def runs(store: Path, leases: Path | None = None) -> list[dict]:
    """Every run directory under the store, newest first, each with what the
    index shows of it: its verdict (or that it runs, or crashed before its
    teardown wrote stats.json), system, broker version, seconds, counts."""
    out = []
    live = running_runs(leases)
    for test_json in store.glob(f"*/*/{TEST_FILE}"):
        run = RunDir.at(test_json.parent)
        if run.path.is_symlink() or not store_file(store, str(test_json)):
            continue  # a store link (latest), or a test directory linked out of the store
        results = _doc(run.results) if run.results.exists() else None
        if results is not None:
            verdict = VERDICT.get(results.get("valid"), "UNKNOWN")  # broken: no verdict
        elif os.path.realpath(run.path) in live:
            verdict = RUNNING
        elif not run.stats.exists():
            verdict = CRASHED  # no teardown wrote its stats: killed, or the machine went
        else:
            verdict = NOT_CHECKED
        test, stats = _doc(run.test), _doc(run.stats)
        config = test.get("config") if isinstance(test.get("config"), dict) else {}
        db = config.get("db") if isinstance(config.get("db"), dict) else {}
        counts = (results or {}).get("counts") or {}
        out.append(
            {
                "name": run.path.parent.name,
                "time": run.path.name,
                "verdict": verdict,
                "path": run.path.relative_to(store).as_posix(),
                "report": run.report.exists(),
                "system": str(test.get("system") or ""),
                "version": str(db.get("version") or ""),
                "seconds": stats.get("run-seconds") or stats.get("main-phase-seconds"),
                "acknowledged": counts.get("acknowledged", stats.get("acknowledged")),
                "lost": counts.get("lost"),
            }
        )
    return sorted(out, key=lambda r: r["time"], reverse=True)


def by_test(store: Path, leases: Path | None = None) -> list[tuple[str, list[dict]]]:
    """The runs grouped by test, each group newest first, the group whose
    last run is newest first."""
    ordered = sorted(runs(store, leases), key=lambda r: r["name"])
    groups = [(name, list(rs)) for name, rs in groupby(ordered, key=lambda r: r["name"])]
    return sorted(groups, key=lambda g: g[1][0]["time"], reverse=True)


def _href(r: dict, file: str) -> str:
    return html.escape(f"{quote(r['path'])}/{file}")


def _cell(r: dict) -> str:
    """A run's verdict as a coloured cell linking to its report."""
    target = REPORT_FILE if r["report"] else RESULTS_FILE
    title = html.escape(f"{r['time']}: {r['verdict']}")
    cls = html.escape(r["verdict"]) if r["verdict"] in VERDICT.values() else ""
    return f"<a class='cell {cls}' href='{_href(r, target)}' title='{title}'></a>"


def _row(r: dict, previous: dict | None) -> str:
    """One run's row: every name and path escaped (a test name is the user's)."""
    e = html.escape  # quotes too: values also land in attributes
    links = [(REPORT_FILE, "report")] if r["report"] else []
    links += [(RESULTS_FILE, "results"), (HISTORY_FILE, "history")]
    parts = [f"<a href='{_href(r, f)}'>{label}</a>" for f, label in links]
    if previous:
        query = e(urlencode({"a": previous["path"], "b": r["path"]}))
        parts.append(f"<a class='compare' href='/compare?{query}'>compare with previous</a>")
    seconds = f"{r['seconds']:.0f} s" if isinstance(r["seconds"], (int, float)) else ""
    numbers = [r[k] if isinstance(r[k], int) else "" for k in ("acknowledged", "lost")]
    cells = [
        r["time"],
        r["system"],
        r["version"],
        seconds,
        *(f"{n:,}" if n != "" else n for n in numbers),
    ]
    return (
        "<tr class='run'>"
        + "".join(f"<td>{e(str(c))}</td>" for c in cells)
        + f"<td class='{e(r['verdict'])}'>{e(r['verdict'])}</td>"
        f"<td>{' · '.join(parts)}</td></tr>"
    )


def _previous(rs: list[dict], i: int) -> dict | None:
    """The run to compare run i with: the next older checked run of its test
    (None when run i itself is not checked)."""
    checked = [r for r in rs[i:] if r["verdict"] in VERDICT.values()]
    return checked[1] if len(checked) > 1 and checked[0] is rs[i] else None


def _test(name: str, rs: list[dict]) -> str:
    rows = "".join(_row(r, _previous(rs, i)) for i, r in enumerate(rs))
    return (
        f"<section class='test'><h2>{html.escape(name)}</h2>"
        f"<div class='cells' title='verdicts, newest first'>{''.join(map(_cell, rs))}</div>"
        "<table class='runs'><tr><th>time</th><th>system</th><th>version</th><th>took</th>"
        f"<th>acknowledged</th><th>lost</th><th>verdict</th><th></th></tr>{rows}</table>"
        "</section>"
    )


# the index's filter: rows (and tests with none left) whose text lacks every word typed
FILTER = (
    "<input id='filter' type='search' placeholder='filter: test, system, version, verdict'"
    ' oninput="const w=this.value.toLowerCase().split(/\\s+/).filter(Boolean);'
    "document.querySelectorAll('section.test').forEach(s=>{let n=0;"
    "s.querySelectorAll('tr.run').forEach(r=>{const t=(s.querySelector('h2').textContent+' '"
    "+r.textContent).toLowerCase();const ok=w.every(x=>t.includes(x));r.hidden=!ok;n+=ok});"
    's.hidden=n===0});">'
)

# `/?q=words`: the index opened filtered (a link to "the failed kafka runs")
FILTER_FROM_URL = (
    "<script>const q=new URLSearchParams(location.search).get('q');if(q){"
    "const f=document.getElementById('filter');f.value=q;f.dispatchEvent(new Event('input'))}"
    "</script>"
)


def index_page(store: Path, leases: Path | None = None) -> str:
    tests = "".join(_test(name, rs) for name, rs in by_test(store, leases))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>queuecheck runs</title>"
        f"<style>{STYLE}</style></head><body><h1>queuecheck runs</h1>{FILTER}"
        f"<div id='runs'>{tests or '<p>No runs yet.</p>'}</div>{FILTER_FROM_URL}</body></html>"
    )


def run_in_store(store: Path, rel: str) -> Path | None:
    """The run directory `rel` names, if it is one of the store's runs
    (`<test>/<time>/` holding a test.json, links resolved); else None."""
    root = store.resolve()
    try:
        path = (root / rel).resolve()
        ok = path.parent.parent == root and RunDir.at(path).test.is_file()
    except (OSError, ValueError):  # a NUL byte, a loop of links
        return None
    return path if ok else None


def compare_page(store: Path, query: str) -> tuple[int, str]:
    """`/compare?a=<run>&b=<run>[&b=...]`: (HTTP status, page)."""
    from .compare import CompareError, compare
    from .compare_html import render

    q = parse_qs(query)
    if len(q.get("a", [])) != 1 or not q.get("b"):
        return 400, "give a=<run> once and b=<run> (paths relative to the store)"
    rels = [q["a"][0], *q["b"]]
    dirs = [run_in_store(store, rel) for rel in rels]
    if None in dirs:
        bad = rels[dirs.index(None)]
        return 404, f"{bad}: not a run directory of this store"
    try:
        cmp = compare(dirs, names=rels, cache_it=False)  # a GET writes nothing
    except CompareError as e:
        return 404, str(e).replace(str(store.resolve()) + "/", "")
    links = [
        f"/{quote(rel)}/{REPORT_FILE}" if RunDir.at(d).report.is_file() else None
        for rel, d in zip(rels, dirs, strict=True)
    ]
    return 200, render(cmp.to_dict(), links)


# What the store holds, as text the browser shows (a broker's log downloaded
# as application/octet-stream, or sniffed as HTML, helps no one).
TEXT = "text/plain; charset=utf-8"
TYPES = {
    ".log": TEXT,
    ".jsonl": TEXT,
    ".txt": TEXT,
    ".conf": TEXT,
    ".out": TEXT,
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
}


def store_file(store: Path, path: str) -> str | None:
    """The regular file `path` names if its real path (links resolved) lies
    inside the store, else None: a link in a run's nodes/ to /etc/shadow is
    not served, nor is a directory listed."""
    root = os.path.realpath(store)
    try:
        real = os.path.realpath(path)
        inside = os.path.commonpath([root, real]) == root
        return real if inside and stat.S_ISREG(os.stat(real).st_mode) else None
    except (OSError, ValueError):  # gone, a NUL byte, a loop of links
        return None


class StoreHandler(SimpleHTTPRequestHandler):
    # One connection that sends nothing holds a thread: not for ever.
    timeout = 30

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._send(200, index_page(Path(self.directory)))
        elif url.path == "/compare":
            status, page = compare_page(Path(self.directory), url.query)
            if status != 200:
                page = f"<!doctype html><meta charset='utf-8'><p>{html.escape(page)}</p>"
            self._send(status, page)
        else:
            super().do_GET()

    def send_head(self):
        """A store file's headers, and the file open for the body; only
        regular files inside the store (no listings: the index is the way in)."""
        path = store_file(Path(self.directory), self.translate_path(self.path))
        if path is None or self.path.split("?", 1)[0].endswith("/"):
            self.send_error(404, "File not found")
            return None
        try:
            # O_NONBLOCK: a FIFO swapped in since the look must not hang the thread
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except OSError:
            self.send_error(404, "File not found")
            return None
        f = os.fdopen(fd, "rb")
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                f.close()
                self.send_error(404, "File not found")
                return None
            self.send_response(200)
            self.send_header("Content-Type", self.guess_type(path))
            self.send_header("Content-Length", str(st.st_size))
            self.send_header("Last-Modified", self.date_time_string(int(st.st_mtime)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            return f
        except BaseException:
            f.close()
            raise

    def guess_type(self, path) -> str:
        return TYPES.get(os.path.splitext(str(path))[1].lower()) or super().guess_type(path)

    def _send(self, status: int, page: str) -> None:
        body = page.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


def make_server(store: Path, port: int = 8000, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """The server, bound; a port that cannot be had is one error naming --port."""
    if not store.is_dir():
        raise FileNotFoundError(f"no store at {store}")
    if not 0 <= port <= 65535:
        raise ValueError(f"--port {port}: not a port (0..65535; 0: any free one)")
    handler = partial(StoreHandler, directory=str(store))
    try:
        return ThreadingHTTPServer((host, port), handler)
    except OSError as e:
        raise ValueError(
            f"--port {port}: cannot listen on {host}:{port} ({e.strerror or e})"
        ) from None
