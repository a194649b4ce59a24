"""This machine as a node: commands run locally, files opened in place (the
namespace nodes run the same commands over SSH)."""

from __future__ import annotations

import subprocess

from harness.nodes.remote import NodeSpec, Result


class Here:
    def __init__(self, name: str = "n1"):
        self.name = name
        self.spec = NodeSpec(name=name, host="127.0.0.1")

    def run(self, cmd, check=True, timeout=60, env=None):
        p = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=timeout)
        if check and p.returncode:
            raise RuntimeError(f"`{cmd}` exited {p.returncode}: {p.stderr}")
        return Result(self.name, cmd, p.returncode, p.stdout, p.stderr)

    def open_file(self, path):
        return open(path, "r+b")  # noqa: SIM115 - the caller's with closes it
