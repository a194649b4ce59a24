"""The effects table in PostgreSQL: a server of its own, started from
Debian's `postgresql` package on a data directory under `directory`
(initdb'ed once, reused on reopen, so effects are durable), listening on a
unix socket only (listen_addresses=''), never on a network interface.

PostgreSQL refuses to run as root: when we are root the server, initdb and
the data directory belong to the `postgres` OS user (the Debian package's).
The postmaster is started directly as our child process (no shell, no
pg_ctl) and tracked by that pid only; close() stops it with a fast shutdown
(SIGINT), then immediate (SIGQUIT), then SIGKILL, each with a deadline. A
server a previous run left on the same data directory is found through its
postmaster.pid (checked to be a postmaster whose cwd is that directory) and
stopped the same way before ours starts. Readiness is a connection being
accepted, polled against a deadline, never a sleep.

The postgres user must be able to reach `directory`: an ancestor that
denies it the traverse bit gets o+x (or g+x/u+x), only that, e.g. pytest's
0700 /tmp/pytest-of-root. A pytest session starting meanwhile takes that
bit away again; initdb and start are retried then, and the bit is granted
again before the shutdown checkpoint (which opens global/pg_control by its
absolute path), but a server whose checkpoint runs in such a window PANICs.

One psycopg connection shared under a lock (the consumers are threads of
one process); every insert is one transaction.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

PG_ROOT = Path("/usr/lib/postgresql")
OS_USER = "postgres"  # created by Debian's postgresql-common
DB_USER = "postgres"  # the superuser initdb makes (-U)
PORT = 5432  # names the socket file only: there is no TCP listener
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
# sun_path is 108 bytes with its NUL; keep a margin under it.
SOCKET_PATH_MAX = 100
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+-]+$")  # no quoting needed in a GUC list


class PostgresError(RuntimeError):
    pass


class _AccessLost(PostgresError):
    """The postgres user was denied its own files: an ancestor directory's
    traverse bit was taken away meanwhile (a pytest session starting chmods
    /tmp/pytest-of-<user> back to 0700). Worth another try."""


def find_bin_dir(version: str | None = None) -> Path:
    """/usr/lib/postgresql/<version>/bin: `version` if given (the data
    directory's), else the highest installed."""
    found = {}
    if PG_ROOT.is_dir():
        for d in PG_ROOT.iterdir():
            b = d / "bin"
            if d.name.isdigit() and all((b / x).is_file() for x in ("postgres", "initdb")):
                found[d.name] = b
    if not found:
        raise PostgresError(
            f"PostgreSQL server binaries not found under {PG_ROOT}/<version>/bin: "
            "the postgres sink database needs Debian's server, "
            "`apt-get install postgresql` (or `make setup`)"
        )
    if version is None:
        return found[max(found, key=int)]
    if version not in found:
        raise PostgresError(
            f"the data directory was made by PostgreSQL {version}, but only "
            f"{', '.join(sorted(found, key=int))} is installed under {PG_ROOT}: "
            f"`apt-get install postgresql-{version}`, or use a fresh run directory"
        )
    return found[version]


def _alive(pid: int) -> bool:
    """Running (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    m = re.search(r"^State:\s+(\S)", status, re.M)
    return not (m and m.group(1) in "ZX")


def _postmaster_pid(data: Path) -> int | None:
    """The pid in data/postmaster.pid, if that file names one."""
    try:
        first = (data / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def _is_postmaster_of(pid: int, data: Path) -> bool:
    """`pid` is a postgres server running on `data` (it chdir's there), not
    some unrelated process that got a recycled pid."""
    try:
        exe = os.path.basename(os.readlink(f"/proc/{pid}/exe"))
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return False
    return exe in ("postgres", "postmaster") and cwd == data.resolve()


def _parent_of(pid: int) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
        return int(stat_line.rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _wait_gone(pid: int, timeout: float, proc: subprocess.Popen | None) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if proc is not None:
            if proc.poll() is not None:
                return True
        elif not _alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _stop_pid(pid: int, proc: subprocess.Popen | None = None) -> bool:
    """Fast shutdown, then immediate, then SIGKILL; True once it is gone."""
    for sig, timeout in (
        (signal.SIGINT, STOP_TIMEOUT),
        (signal.SIGQUIT, 5.0),
        (signal.SIGKILL, 5.0),
    ):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        if _wait_gone(pid, timeout, proc):
            return True
        log.warning("postgres pid %d did not stop on %s", pid, sig.name)
    return False


def _log_tail(path: Path, since: int = 0, lines: int = 20) -> str:
    """The last `lines` of the log written after byte `since`."""
    try:
        with open(path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace").splitlines()
    except OSError as e:
        return f"(no server log at {path}: {e})"
    return "\n".join(text[-lines:]) or "(server log is empty)"


ATTEMPTS = 3  # initdb + start, again only if access to the directory was lost


class PostgresEffects:
    """`unique`: id is the primary key, a repeated insert is ignored (dedupe);
    otherwise every insert appends a row (naive)."""

    def __init__(self, directory: Path, unique: bool, running: Path | None = None):
        """`running`: a directory where the server is listed while it runs."""
        self.running = Path(running) if running else None
        self._listed: Path | None = None
        self.directory = Path(directory).absolute()
        self.data_dir = self.directory / "data"
        self.log_path = self.directory / "postgres.log"
        self.unique = unique
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.db = None
        self._tmp_socket_dir: Path | None = None
        self._closed = False
        self._log_start = 0
        self._as_owner = self._owner_kwargs()
        try:
            self._prepare_directory()
            version = (
                (self.data_dir / "PG_VERSION").read_text().strip() if self._initdbd() else None
            )
            self.bin = find_bin_dir(version)
            self._stop_stale()
            self.socket_dir = self._socket_dir()
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    self._grant_traverse()
                    if not self._initdbd():
                        self._initdb()
                    self._grant_traverse()
                    self._start()
                    self.db = self._connect_when_ready()
                    break
                except _AccessLost as e:
                    if attempt == ATTEMPTS:
                        raise
                    why = next(x for x in str(e).splitlines() if "Permission denied" in x)
                    log.warning("postgres sink: access lost (%s); trying again", why.strip())
                    self._reap()
            key = "BIGINT PRIMARY KEY" if unique else "BIGINT NOT NULL"
            self.db.execute(f"CREATE TABLE IF NOT EXISTS effects (id {key})")
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)  # a run that forgets close() leaves no server behind
        self._list()

    # -- set-up -----------------------------------------------------------
    def _owner_kwargs(self) -> dict:
        """subprocess arguments that run a command as the server's owner."""
        if os.geteuid() != 0:
            return {}
        import pwd

        try:
            pw = pwd.getpwnam(OS_USER)
        except KeyError:
            raise PostgresError(
                f"running as root, but there is no {OS_USER!r} OS user to run the "
                "server as (PostgreSQL refuses root): `apt-get install postgresql`"
            ) from None
        self._uid, self._gid = pw.pw_uid, pw.pw_gid
        self._gids = set(os.getgrouplist(OS_USER, pw.pw_gid))
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def _prepare_directory(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if not self._as_owner:
            self.directory.chmod(0o700)
            return
        os.chown(self.directory, self._uid, self._gid)
        self.directory.chmod(0o700)

    def _grant_traverse(self) -> None:
        """The postgres user must be able to reach `directory`: add the
        traverse bit (x, not read) on each ancestor that denies it, e.g.
        pytest's 0700 /tmp/pytest-of-root."""
        if not self._as_owner:
            return
        path = self.directory.parent
        for d in [path, *path.parents]:
            st = d.stat()
            if st.st_uid == self._uid:
                bit = stat.S_IXUSR
            elif st.st_gid in self._gids:
                bit = stat.S_IXGRP
            else:
                bit = stat.S_IXOTH
            if not st.st_mode & bit:
                log.info("postgres sink: adding the traverse bit to %s for %s", d, OS_USER)
                d.chmod(stat.S_IMODE(st.st_mode) | bit)

    def _initdbd(self) -> bool:
        return (self.data_dir / "PG_VERSION").is_file()

    def _run(self, args: list, what: str) -> None:
        r = subprocess.run(
            [str(a) for a in args],
            cwd=self.directory,
            capture_output=True,
            text=True,
            timeout=120,
            env=self._env(),
            **self._as_owner,
        )
        if r.returncode != 0:
            out = f"{r.stdout}{r.stderr}"
            error = _AccessLost if self._as_owner and "Permission denied" in out else PostgresError
            raise error(f"{what} failed ({r.returncode}):\n{out}")

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        return env

    def _initdb(self) -> None:
        """Into a fresh sibling, renamed into place once complete: a data
        directory is either whole or absent."""
        tmp = self.directory / "data.initdb"
        shutil.rmtree(tmp, ignore_errors=True)
        self._run(
            [self.bin / "initdb", "-D", tmp, "-U", DB_USER, "-A", "trust", "-E", "UTF8"]
            + ["--locale=C"],
            "initdb",
        )
        with open(tmp / "postgresql.conf", "a") as conf:
            conf.write(
                "\n# queuecheck: unix socket only, never a network interface\n"
                "listen_addresses = ''\n"
                "unix_socket_permissions = 0700\n"
            )
        tmp.rename(self.data_dir)

    def _socket_dir(self) -> Path:
        sock = f"{self.directory}/.s.PGSQL.{PORT}"
        if len(sock) <= SOCKET_PATH_MAX and SAFE_PATH.match(str(self.directory)):
            return self.directory
        d = Path(tempfile.mkdtemp(prefix="qc-pg-"))
        self._tmp_socket_dir = d
        if self._as_owner:
            os.chown(d, self._uid, self._gid)
        return d

    def _stop_stale(self) -> None:
        """A server a previous run left on this data directory is stopped;
        a postmaster.pid naming a dead or unrelated pid is removed."""
        pid = _postmaster_pid(self.data_dir)
        if pid is None:
            return
        if _alive(pid) and _is_postmaster_of(pid, self.data_dir):
            if _parent_of(pid) == os.getpid():
                raise PostgresError(f"{self.directory} is already open in this process")
            log.warning(
                "postgres sink: stopping a leftover server, pid %d on %s", pid, self.data_dir
            )
            if not _stop_pid(pid):
                raise PostgresError(f"a leftover server, pid {pid} on {self.data_dir}, won't stop")
        else:
            (self.data_dir / "postmaster.pid").unlink(missing_ok=True)

    def _start(self) -> None:
        with open(self.log_path, "ab") as out:
            self._log_start = out.tell()
            self.proc = subprocess.Popen(
                [
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.data_dir),
                    "-p",
                    str(PORT),
                    "-c",
                    "listen_addresses=",
                    "-c",
                    f"unix_socket_directories={self.socket_dir}",
                    "-c",
                    "unix_socket_permissions=0700",
                ],
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,  # a ^C to the tool is not a shutdown request
                **self._as_owner,
            )
        log.info("postgres sink: server pid %d on %s", self.proc.pid, self.data_dir)

    def _connect_when_ready(self):
        import psycopg

        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                tail = _log_tail(self.log_path, self._log_start)
                error = (
                    _AccessLost if self._as_owner and "Permission denied" in tail else PostgresError
                )
                raise error(
                    f"the postgres server exited ({self.proc.returncode}) before accepting "
                    f"connections; {self.log_path}:\n{tail}"
                )
            try:
                return psycopg.connect(
                    host=str(self.socket_dir),
                    port=PORT,
                    user=DB_USER,
                    dbname="postgres",
                    autocommit=True,
                    connect_timeout=5,
                )
            except psycopg.OperationalError as e:
                if time.monotonic() >= deadline:
                    raise PostgresError(
                        f"the postgres server did not accept connections within "
                        f"{READY_TIMEOUT:.0f}s ({e}); {self.log_path}:\n"
                        f"{_log_tail(self.log_path, self._log_start)}"
                    ) from None
            time.sleep(0.02)

    # -- the table --------------------------------------------------------
    def insert(self, ids: list[int]) -> None:
        """All ids in one transaction: either every effect is there or none."""
        if not ids:
            return
        conflict = " ON CONFLICT DO NOTHING" if self.unique else ""
        with self.lock, self.db.transaction():
            self.db.execute(
                f"INSERT INTO effects (id) SELECT unnest(%s::bigint[]){conflict}", (list(ids),)
            )

    def counts(self) -> Iterator[tuple[int, int]]:
        with self.lock:
            rows = self.db.execute(
                "SELECT id, COUNT(*) FROM effects GROUP BY id ORDER BY id"
            ).fetchall()
        yield from rows

    # -- tear-down --------------------------------------------------------
    @property
    def server_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def _list(self) -> None:
        """Lists the server under `running`: its data directory and who runs
        it (this process and its start time, so a reused pid is no owner)."""
        if self.running is None or self.proc is None:
            return
        self.running.mkdir(parents=True, exist_ok=True)
        entry = self.running / f"postgres-{self.proc.pid}.json"
        me = os.getpid()
        doc = {"data": str(self.data_dir), "owner": me, "owner_start": _start_time(me)}
        tmp = entry.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(entry)
        self._listed = entry

    def _reap(self) -> None:
        """Our server, if it is still there, stopped and waited for."""
        if self.proc is not None and self.proc.poll() is None:
            if not _stop_pid(self.proc.pid, self.proc):
                raise PostgresError(f"the postgres server, pid {self.proc.pid}, won't stop")
        self.proc = None

    def close(self) -> None:
        """Always stops the server; logs (does not raise) what goes wrong."""
        # An insert under way finishes first, unless it hangs on a broken server.
        locked = self.lock.acquire(timeout=10)
        try:
            if self._closed:
                return
            self._closed = True
            if self.db is not None:
                try:
                    self.db.close()
                except Exception:
                    log.exception("postgres sink: closing the connection")
        finally:
            if locked:
                self.lock.release()
        atexit.unregister(self.close)
        if self.proc is not None:
            try:
                # its shutdown checkpoint writes global/pg_control by absolute path
                self._grant_traverse()
            except Exception:
                log.exception("postgres sink: the traverse bits for %s", self.directory)
            try:
                if self.proc.poll() is None and not _stop_pid(self.proc.pid, self.proc):
                    log.error("postgres sink: server pid %d would not stop", self.proc.pid)
                else:
                    self.proc.wait(timeout=5)
                    if self.proc.returncode not in (0, -signal.SIGINT):
                        log.warning(
                            "postgres sink: server exited %s; %s:\n%s",
                            self.proc.returncode,
                            self.log_path,
                            _log_tail(self.log_path, self._log_start),
                        )
            except Exception:
                log.exception("postgres sink: stopping server pid %d", self.proc.pid)
        if self._tmp_socket_dir is not None:
            shutil.rmtree(self._tmp_socket_dir, ignore_errors=True)
        if self._listed is not None:
            self._listed.unlink(missing_ok=True)


def _start_time(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def stop_leftovers(running: Path) -> list[int]:
    """Stops every server listed under `running` whose owner is gone (a run
    killed with SIGKILL cannot stop its own): by the pid in its data
    directory's postmaster.pid, only while that pid is a postmaster of that
    directory. Returns the pids stopped."""
    stopped = []
    for entry in sorted(Path(running).glob("postgres-*.json")) if running else []:
        try:
            doc = json.loads(entry.read_text())
        except (OSError, ValueError):
            entry.unlink(missing_ok=True)
            continue
        owner = doc.get("owner")
        if isinstance(owner, int) and _alive(owner):
            if _start_time(owner) == doc.get("owner_start"):
                continue  # its run is still going
        data = Path(doc.get("data", ""))
        pid = _postmaster_pid(data)
        if pid and _alive(pid) and _is_postmaster_of(pid, data):
            log.warning("stopping a leftover postgres sink server, pid %d on %s", pid, data)
            if _stop_pid(pid):
                stopped.append(pid)
        entry.unlink(missing_ok=True)
    return stopped
