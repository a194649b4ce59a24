"""A broker process's own wall clock (--faketime; the clock fault:
nemesis/clock.py). The local nodes are namespaces of one host and share its
clock, and a vendor's machines are not ours to set, so a broker reads its
wall clock as an offset from the host's, kept in a file of its node's tree
that a fault rewrites while the broker runs. How its process is pointed at
that file is the broker's (`ClockEnvironment`): a program that reads the
clock through libc is started under Debian's libfaketime
(`libfaketime_env`); a static Go program (nats-server) reads it without
libc, so libfaketime cannot move it, and is built with its own reader of
the same file. Under libfaketime only the wall clock moves: the monotonic
clock is the host's (FAKETIME_DONT_FAKE_MONOTONIC), as the JVM's and BEAM's
timed waits sleep on it, and glibc 2.36's "monotonic fix" is off (it made
JDK 17's condition variables wait forever). Offsets are steps ("+N"), never
rates: a rate scales sleeps too and stalls the JVM. It gives the DB Clocks
(workloads/capabilities.py)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..capabilities import Clocks
from ..install import ensure_package

if TYPE_CHECKING:
    from harness.nodes.remote import Remote

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
CACHE_SECONDS = 1  # how often the broker reads its offset again: each read is a file read
CLOCK_FILE = "faketime"


def offset_text(offset: float) -> str:
    """An offset in seconds as libfaketime's relative form: "+1.500", "-60.000"."""
    return f"{offset:+.3f}"


def libfaketime_env(node: Remote, clock_file: str) -> dict[str, str]:
    """The start environment under which a program that reads the clock
    through libc reads `clock_file`'s offset (libfaketime installed first)."""
    ensure_package(node, f"test -e {LIBFAKETIME}", ["libfaketime"])
    return {
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME_TIMESTAMP_FILE": clock_file,
        "FAKETIME_CACHE_DURATION": str(CACHE_SECONDS),
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "FAKETIME_FORCE_MONOTONIC_FIX": "0",
    }


@runtime_checkable
class ClockEnvironment(Protocol):
    """What a faked clock needs of a lifecycle: the node's tree, `dir(node)`,
    to keep the clock file in, and how its broker's start command makes the
    process read it."""

    def dir(self, node: Remote) -> str: ...

    def clock_env(self, node: Remote, clock_file: str) -> dict[str, str]:
        """The start environment that makes the node's broker read its wall
        clock as the host's plus `clock_file`'s offset."""
        ...


class Faketime(Clocks):
    needs = ClockEnvironment

    def __init__(self, host: ClockEnvironment):
        self.host = host

    def clock_file(self, node: Remote) -> str:
        return f"{self.host.dir(node)}/{CLOCK_FILE}"

    def clock_file_made(self, node: Remote) -> str:
        """The file, holding the host's time (+0) until a fault says otherwise."""
        if node.run(f"test -s {shlex.quote(self.clock_file(node))}", check=False).exit:
            self.set_clock(node, 0.0)
        return self.clock_file(node)

    def install(self, node: Remote) -> dict[str, str]:
        return {}  # libfaketime, where the broker needs it, comes with its start's environment

    def prepare(self, node: Remote) -> None:
        pass  # the clock file is made at the start: a fault's offset outlives a restart

    def launch_env(self, node: Remote) -> dict[str, str]:
        return self.host.clock_env(node, self.clock_file_made(node))

    def settle(self) -> None:
        pass

    def release(self, node: Remote) -> None:
        pass  # the clock file goes with the node's tree

    # -- Clocks ------------------------------------------------------------
    def set_clock(self, node: Remote, offset: float) -> None:
        """The broker's wall clock `offset` seconds from the host's (within
        CACHE_SECONDS): the file replaced whole, so a read never sees half."""
        path = shlex.quote(self.clock_file(node))
        node.run(f"printf '%s\\n' {offset_text(offset)} > {path}.new && mv -f {path}.new {path}")
