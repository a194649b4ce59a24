"""The packet delayer of the slow-network faults (nemesis/slow_network.py):
a Go program (`qc-delay/`, its docstring says why it is shaped so) built by
`make setup` into `<state>/bin/`, as the native history converter is
(checkers/native.py), from the Go module proxy; pushed to the nodes by the
fault's set-up and run there, one per fault and node, in the node's network
namespace.

    python -m nemesis.delayer     builds it (make setup)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.gobuild import GoProgram

SOURCE = Path(__file__).with_name("qc-delay")
NAME = "qc-delay"


PROGRAM = GoProgram(SOURCE, NAME, "the packet delayer")
binary, find, build = PROGRAM.binary, PROGRAM.find, PROGRAM.build


if __name__ == "__main__":
    try:
        print(build())
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print(e, file=sys.stderr)
        sys.exit(1)
