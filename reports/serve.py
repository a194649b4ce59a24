"""`queuecheck serve`: the store over HTTP on localhost, with an index of
runs (name, time, verdict) linking to each report."""

from __future__ import annotations

import html
import json
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import quote

VERDICT = {True: "VALID", False: "INVALID", "unknown": "UNKNOWN"}


def runs(store: Path) -> list[dict]:
    """Every run directory under the store, newest first."""
    out = []
    for test_json in store.glob("*/*/test.json"):
        run = test_json.parent
        if run.is_symlink():
            continue
        results = run / "results.json"
        valid = json.loads(results.read_text()).get("valid") if results.exists() else None
        out.append(
            {
                "name": run.parent.name,
                "time": run.name,
                "verdict": VERDICT.get(valid, "not checked"),
                "path": run.relative_to(store).as_posix(),
                "report": (run / "report.html").exists(),
            }
        )
    return sorted(out, key=lambda r: r["time"], reverse=True)


def _row(r: dict) -> str:
    """One run's row: every name and path escaped (a test name is the user's)."""
    e = html.escape  # quotes too: values also land in attributes
    href = e(quote(r["path"]))
    links = [("report.html", "report")] if r["report"] else []
    links += [("results.json", "results"), ("history.jsonl", "history")]
    return (
        f"<tr><td>{e(r['name'])}</td><td>{e(r['time'])}</td>"
        f"<td class='{e(r['verdict'])}'>{e(r['verdict'])}</td><td>"
        + " · ".join(f"<a href='{href}/{f}'>{label}</a>" for f, label in links)
        + "</td></tr>"
    )


def index_page(store: Path) -> str:
    rows = "".join(_row(r) for r in runs(store))
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>queuecheck runs</title>"
        "<style>body{font-family:system-ui;margin:2em}td,th{padding:.3em .8em;"
        "border-bottom:1px solid #ddd}.VALID{color:#2e7d32}.INVALID{color:#c62828}"
        ".UNKNOWN{color:#b26a00}</style></head><body><h1>queuecheck runs</h1>"
        "<table id='runs'><tr><th>test</th><th>time</th><th>verdict</th><th></th></tr>"
        f"{rows}</table></body></html>"
    )


class StoreHandler(SimpleHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path in ("/", "/index.html"):
            body = index_page(Path(self.directory)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, format: str, *args) -> None:  # quiet
        pass


def make_server(store: Path, port: int = 8000, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    if not store.is_dir():
        raise FileNotFoundError(f"no store at {store}")
    handler = partial(StoreHandler, directory=str(store))
    return ThreadingHTTPServer((host, port), handler)
