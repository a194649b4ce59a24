"""`queuecheck serve` answers only with regular files inside the store: a
link in the store (or in a run's nodes/) to /etc/shadow or / is 404, no
directory is listed, text files are sent as text, a connection that says
nothing is let go, and a port that cannot be had is one error naming --port."""

from __future__ import annotations

import os
import socket
import threading
import urllib.error
import urllib.request

import pytest

from harness.commands.cli import main
from reports.serve import StoreHandler, make_server
from tests.reports.test_compare import make_run

RUN = "kafka/20260101T020000"


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "store"
    make_run(root, "kafka", "20260101T020000")
    run = root / RUN
    (run / "report.html").write_text("<html>report</html>")
    (run / "harness.log").write_text("a [log] line\n")
    (run / "nodes" / "n1").mkdir(parents=True)
    (run / "nodes" / "n1" / "server.log").write_text("broker\n")
    (run / "nodes" / "n1" / "kafka.conf").write_text("a=1\n")
    (run / "nodes" / "n1" / "shadow").symlink_to("/etc/shadow")
    (run / "nodes" / "n1" / "root").symlink_to("/")
    (run / "nodes" / "n1" / "hosts").symlink_to("/etc/hosts")
    (root / "outside").symlink_to(tmp_path)
    (tmp_path / "secret.txt").write_text("not the store's")
    (run / "same-run.log").symlink_to(run / "harness.log")  # a link within the store
    os.mkfifo(run / "nodes" / "n1" / "fifo.log")  # opened, it would hang the thread
    return root


@pytest.fixture
def base(store):
    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


@pytest.mark.parametrize(
    "path",
    [
        f"/{RUN}/nodes/n1/shadow",  # a link out of the store to a file
        f"/{RUN}/nodes/n1/hosts",
        f"/{RUN}/nodes/n1/root/",  # a link to /: no listing of the machine
        f"/{RUN}/nodes/n1/root/etc/hosts",
        "/outside/secret.txt",
        "/outside/",
        f"/{RUN}/",  # no listing inside the store either: the index is the way in
        f"/{RUN}/nodes/n1/",
        "/kafka/",
        f"/{RUN}/nowhere.log",
        f"/{RUN}/nodes/n1/fifo.log",
        f"/{RUN}/%00",
    ],
)
def test_only_regular_files_inside_the_store_are_served(base, path):
    status, _, body = get(base + path)
    assert status == 404
    assert b"root:" not in body and b"not the store's" not in body and b"localhost" not in body


def test_store_files_are_served_with_a_type_the_browser_shows(base, store):
    assert get(f"{base}/{RUN}/harness.log") == (200, "text/plain; charset=utf-8", b"a [log] line\n")
    for name, ctype in [
        ("nodes/n1/server.log", "text/plain; charset=utf-8"),
        ("nodes/n1/kafka.conf", "text/plain; charset=utf-8"),
        ("history.jsonl", "text/plain; charset=utf-8"),
        ("results.json", "application/json"),
        ("report.html", "text/html; charset=utf-8"),
        ("same-run.log", "text/plain; charset=utf-8"),  # a link that stays inside
    ]:
        status, got, _ = get(f"{base}/{RUN}/{name}")
        assert (status, got) == (200, ctype), name
    status, _, index = get(base + "/")
    assert status == 200 and b"kafka" in index


def test_a_get_writes_nothing_in_the_store(base, store):
    before = sorted(p for p in store.rglob("*"))
    for path in ("/", f"/{RUN}/report.html", f"/{RUN}/harness.log", f"/{RUN}/", "/x"):
        get(base + path)
    assert sorted(p for p in store.rglob("*")) == before


def test_a_connection_that_sends_nothing_is_let_go(store, monkeypatch):
    assert StoreHandler.timeout == 30
    monkeypatch.setattr(StoreHandler, "timeout", 0.5)  # the same, sooner
    server = make_server(store, port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as idle:
            idle.sendall(b"GET /")  # and then nothing
            assert idle.recv(1024) == b""  # the server hung up; recv timed out otherwise
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_serve_on_a_port_that_is_none_is_one_error_naming_it(store, port, capsys):
    assert main(["serve", "--store", str(store), "--port", port]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"--port {port}: not a port" in err and err.count("error:") == 1
    assert "Traceback" not in err


def test_serve_on_a_busy_port_is_one_error_naming_it(store, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["serve", "--store", str(store), "--port", str(port)]) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in err
    assert "internal error" not in err
