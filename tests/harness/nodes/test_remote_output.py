"""Remote.run keeps a command's whole output, however paramiko's transport
thread interleaves with the reading loop (a channel that plays one order)."""

from harness.nodes.remote import NodeSpec, Remote


class LateOutputChannel:
    """sshd sent the exit status first; the last output and the EOF are taken
    in by the transport thread between the loop's look at recv_ready and its
    look at eof_received (as under load, when the GIL changes hands there)."""

    def __init__(self, late: bytes) -> None:
        self._late = late
        self._buffer = b""
        self._eof = False

    def settimeout(self, timeout: float) -> None:
        pass

    def exec_command(self, cmd: str) -> None:
        pass

    def recv_ready(self) -> bool:
        return bool(self._buffer)

    def recv(self, n: int) -> bytes:
        chunk, self._buffer = self._buffer[:n], self._buffer[n:]
        return chunk

    def recv_stderr_ready(self) -> bool:
        return False

    def exit_status_ready(self) -> bool:
        return True

    @property
    def eof_received(self) -> bool:
        if not self._eof:  # the transport thread runs now: data, then EOF
            self._buffer += self._late
            self._eof = True
        return self._eof

    def recv_exit_status(self) -> int:
        return 0

    def close(self) -> None:
        pass


class OneChannel:
    def __init__(self, chan) -> None:
        self.chan = chan

    def get_transport(self):
        return self

    def open_session(self, timeout: float):
        return self.chan


def test_output_that_comes_with_the_eof_is_kept():
    node = Remote(NodeSpec("n1", "192.0.2.1"))
    node.client = lambda: OneChannel(LateOutputChannel(b"4242\n"))  # type: ignore[method-assign]
    r = node.run("echo $$", check=False)
    assert (r.exit, r.out) == (0, "4242\n")
