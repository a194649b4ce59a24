"""Reaching a node: run a command, put and get files, over SSH (paramiko).

One code path for every node, local namespace nodes and vendor machines
alike. Every call has a deadline; a dropped connection is re-opened once
before the call gives up, and every failure names the node.
"""

from __future__ import annotations

import secrets
import shlex
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# imported here, not lazily: a LazyLoader'd paramiko raced on Python 3.11 (threads
# connecting at once saw it half loaded: no SSHException)
import paramiko

EOF_GRACE = 2.0  # s after the exit status to wait for the rest of the output


class RemoteError(RuntimeError):
    """A node could not be reached or a command failed; names the node."""


@dataclass
class Result:
    node: str
    cmd: str
    exit: int
    out: str
    err: str

    def check(self) -> Result:
        if self.exit != 0:
            detail = (self.err or self.out).strip()[-600:]
            raise RemoteError(f"{self.node}: `{self.cmd}` exited {self.exit}: {detail}")
        return self


@dataclass(frozen=True)
class NodeSpec:
    """How to reach one node: the cluster file's row, and the tool's own
    known_hosts file its host key is kept in (None: trust every key)."""

    name: str
    host: str
    port: int = 22
    user: str = "root"
    key: str | None = None
    known_hosts: str | None = None


_KNOWN_HOSTS_LOCK = threading.Lock()  # one writer of the tool's known_hosts at a time


class HostKeyChanged(RuntimeError):
    pass


class TrustOnFirstUse(paramiko.MissingHostKeyPolicy):
    """A host key seen for the first time is trusted and kept in the tool's
    own known_hosts (never the user's ~/.ssh); from then on a different key
    for that host is refused (paramiko checks the loaded keys itself)."""

    def __init__(self, path: Path):
        self.path = path

    def missing_host_key(self, client, hostname, key) -> None:
        with _KNOWN_HOSTS_LOCK:
            keys = paramiko.HostKeys()
            if self.path.exists():
                keys.load(str(self.path))
            known = (keys.lookup(hostname) or {}).get(key.get_name())
            if known is not None and known != key:  # another connection pinned it meanwhile
                raise HostKeyChanged(hostname)
            keys.add(hostname, key.get_name(), key)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{threading.get_ident()}")
            keys.save(str(tmp))
            tmp.replace(self.path)


class Remote:
    def __init__(self, spec: NodeSpec, connect_timeout: float = 10.0, keepalive: int = 5):
        self.spec = spec
        self.name = spec.name
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()

    # -- connection -------------------------------------------------------
    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        where = f"{self.spec.host}:{self.spec.port}"
        if self.spec.known_hosts:
            known = Path(self.spec.known_hosts)
            with _KNOWN_HOSTS_LOCK:
                if known.exists():
                    client.get_host_keys().load(str(known))
            client.set_missing_host_key_policy(TrustOnFirstUse(known))
        else:
            client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        try:
            client.connect(
                self.spec.host,
                port=self.spec.port,
                username=self.spec.user,
                key_filename=self.spec.key,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                allow_agent=False,
                look_for_keys=self.spec.key is None,
            )
        except (paramiko.BadHostKeyException, HostKeyChanged):
            client.close()
            raise RemoteError(
                f"{self.name}: the SSH host key of {where} is not the one first seen there "
                f"(kept in {self.spec.known_hosts}); if the machine was rebuilt, delete its "
                "line from that file"
            ) from None
        except (OSError, paramiko.SSHException) as e:
            client.close()
            raise RemoteError(
                f"{self.name}: cannot reach {self.spec.user}@{where} "
                f"over SSH ({type(e).__name__}: {e})"
            ) from None
        transport = client.get_transport()
        assert transport is not None
        transport.set_keepalive(self.keepalive)
        return client

    def client(self) -> paramiko.SSHClient:
        with self._lock:
            t = self._client.get_transport() if self._client else None
            if t is None or not t.is_active():
                if self._client:
                    self._client.close()
                self._client = self._connect()
            return self._client

    def close(self) -> None:
        with self._lock:
            if self._client:
                self._client.close()
                self._client = None

    # -- commands ---------------------------------------------------------
    def run(
        self, cmd: str, check: bool = True, timeout: float = 60.0, env: dict | None = None
    ) -> Result:
        """Runs `cmd` under sh on the node; raises RemoteError past `timeout`."""
        if env:
            # export, so the whole command line (cd && ...) sees it
            cmd = (
                "export "
                + " ".join(f"{k}={shlex.quote(str(v))}" for k, v in env.items())
                + "; "
                + cmd
            )
        for attempt in (1, 2):
            try:
                result = self._run_once(cmd, timeout)
                break
            except (paramiko.SSHException, EOFError, ConnectionError) as e:
                self.close()
                if attempt == 2:
                    raise RemoteError(
                        f"{self.name}: connection lost running `{cmd}`: {e}"
                    ) from None
        return result.check() if check else result

    def _run_once(self, cmd: str, timeout: float) -> Result:
        transport = self.client().get_transport()
        assert transport is not None
        chan = transport.open_session(timeout=self.connect_timeout)
        chan.settimeout(timeout)
        chan.exec_command(cmd)
        out, err = bytearray(), bytearray()
        deadline = time.monotonic() + timeout
        exited = None  # when the exit status came
        try:
            while True:
                if chan.recv_ready():
                    out += chan.recv(65536)
                elif chan.recv_stderr_ready():
                    err += chan.recv_stderr(65536)
                elif chan.exit_status_ready():
                    # sshd may send the exit status before the last of the
                    # output (a CI run's `hostname; id -un` lost `root`): the
                    # output is whole at EOF, which a command that leaves a
                    # daemon holding its stdout never sends
                    exited = exited or time.monotonic()
                    if chan.eof_received or time.monotonic() - exited > EOF_GRACE:
                        # the last output and the EOF may both have come since
                        # recv_ready was asked above: what is buffered is the command's
                        while chan.recv_ready():
                            out += chan.recv(65536)
                        while chan.recv_stderr_ready():
                            err += chan.recv_stderr(65536)
                        break
                    time.sleep(0.005)
                elif time.monotonic() > deadline:
                    raise RemoteError(f"{self.name}: `{cmd}` did not finish within {timeout:.0f} s")
                else:
                    time.sleep(0.005)
            code = chan.recv_exit_status()
        except TimeoutError:
            raise RemoteError(
                f"{self.name}: `{cmd}` did not finish within {timeout:.0f} s"
            ) from None
        finally:
            chan.close()
        return Result(
            self.name, cmd, code, out.decode(errors="replace"), err.decode(errors="replace")
        )

    # -- files ------------------------------------------------------------
    def put(self, local: str | Path, remote: str) -> None:
        self.put_all([Path(local)], remote.rpartition("/")[0], [remote.rpartition("/")[2]])

    def put_all(self, files: list[Path], remote_dir: str, names: list[str] | None = None) -> None:
        """Copies `files` into `remote_dir` over one SFTP session, each with
        its own permission bits (an executable stays one: SFTP creates 0644)."""
        names = names or [f.name for f in files]
        try:
            with self.client().open_sftp() as sftp:
                for f, name in zip(files, names, strict=True):
                    sftp.put(str(f), f"{remote_dir}/{name}")
                    sftp.chmod(f"{remote_dir}/{name}", f.stat().st_mode & 0o777)
        except (OSError, paramiko.SSHException) as e:
            raise RemoteError(f"{self.name}: cannot put files into {remote_dir}: {e}") from None

    def write(self, remote: str, text: str, mode: int = 0o644) -> None:
        """Writes `text` to `remote` with `mode`: a secret (0400) is never
        readable by anyone else, not even for a moment. It is written inside
        a fresh 0700 directory beside `remote` (nobody else can open a file
        in it, whatever the file's mode on creation), given its mode there,
        then renamed into place."""
        parent, _, name = remote.rpartition("/")
        private = f"{parent}/.qc-{secrets.token_hex(6)}"
        try:
            with self.client().open_sftp() as sftp:
                sftp.mkdir(private, mode=0o700)
                try:
                    with sftp.open(f"{private}/{name}", "wx") as fh:
                        fh.write(text)
                    sftp.chmod(f"{private}/{name}", mode)
                    sftp.posix_rename(f"{private}/{name}", remote)
                finally:
                    try:
                        sftp.remove(f"{private}/{name}")
                    except OSError:
                        pass  # renamed away, as it should be
                    sftp.rmdir(private)
        except (OSError, paramiko.SSHException) as e:
            raise RemoteError(f"{self.name}: cannot write {remote}: {e}") from None

    @contextmanager
    def open_file(self, remote: str) -> Iterator[IO[bytes]]:
        """The file at `remote` open to read and change in place (seek, read,
        write, truncate), over the node's SFTP session."""
        try:
            with self.client().open_sftp() as sftp, sftp.open(remote, "r+b") as fh:
                yield fh  # type: ignore[misc]
        except (OSError, paramiko.SSHException) as e:
            raise RemoteError(f"{self.name}: cannot change {remote}: {e}") from None

    def get(self, remote: str, local: str | Path) -> None:
        try:
            with self.client().open_sftp() as sftp:
                sftp.get(remote, str(local))
        except (OSError, paramiko.SSHException) as e:
            raise RemoteError(f"{self.name}: cannot get {remote}: {e}") from None

    def __repr__(self) -> str:
        return f"Remote({self.name}@{self.spec.host}:{self.spec.port})"


def on_all(nodes: list[Remote], fn) -> list:
    """fn(node) on every node at once (a fault lands on all nodes together; a
    set-up of three nodes takes as long as one); the first error raises."""
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        return list(pool.map(fn, nodes))
