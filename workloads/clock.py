"""A broker process's own clock (the clock fault: nemesis/clock.py). The
local nodes are namespaces of one host and share its clock, and a vendor's
machines are not ours to set, so a broker is started under Debian's
libfaketime (--faketime) and reads its wall clock through it: an offset
from the host's, kept in a file of the node's tree that a fault rewrites
while the broker runs. Only the wall clock moves: the monotonic clock is
the host's (FAKETIME_DONT_FAKE_MONOTONIC), as the JVM's and BEAM's timed
waits sleep on it, and glibc 2.36's "monotonic fix" is off (it made JDK 17's
condition variables wait forever). Offsets are steps ("+N"), never rates:
a rate scales sleeps too and stalls the JVM. A static Go program (nats-server)
reads the clock without libc, so libfaketime cannot move it: it is built with
its own reader of the same file (workloads/nats/goclock/)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

from .install import ensure_package

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CACHE_SECONDS = 1  # how often the broker reads its offset again: each read is a file read
CLOCK_FILE = "faketime"


def offset_text(offset: float) -> str:
    """An offset in seconds as libfaketime's relative form: "+1.500", "-60.000"."""
    return f"{offset:+.3f}"


class ClockFile:
    """A broker's clock offset, in a file of its node's tree (the DB keeps it
    at `dir(node)`) that its start command names to whatever reads it:
    `set_clock` is the Clocks capability (workloads/capabilities.py)."""

    dir: Any

    def clock_file(self, node: Remote) -> str:
        return f"{self.dir(node)}/{CLOCK_FILE}"

    def clock_file_made(self, node: Remote) -> str:
        """The file, holding the host's time (+0) until a fault says otherwise."""
        if node.run(f"test -s {shlex.quote(self.clock_file(node))}", check=False).exit:
            self.set_clock(node, 0.0)
        return self.clock_file(node)

    def set_clock(self, node: Remote, offset: float) -> None:
        """The broker's wall clock `offset` seconds from the host's (within
        CACHE_SECONDS): the file replaced whole, so a read never sees half."""
        path = shlex.quote(self.clock_file(node))
        node.run(f"printf '%s\\n' {offset_text(offset)} > {path}.new && mv -f {path}.new {path}")


class FakedClock(ClockFile):
    """For a DB whose brokers start under libfaketime: `launch_env` is the
    environment of the broker's start command (and of nothing else: the
    tools the tool runs read the host's clock)."""

    def launch_env(self, node: Remote) -> dict[str, str]:
        ensure_package(node, f"test -e {LIBFAKETIME}", ["libfaketime"])
        return {
            "LD_PRELOAD": LIBFAKETIME,
            "FAKETIME_TIMESTAMP_FILE": self.clock_file_made(node),
            "FAKETIME_CACHE_DURATION": str(CACHE_SECONDS),
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0",
        }
