"""Where and how the checker runs Spark: options every command that checks
shares (check, report, test, demo, matrix). No Spark import here, so the
CLI can declare them without starting anything."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from harness.options import OptionError, option

DEFAULT_MASTER = "local[*]"
# A 100M-message history must complete with <= 4 GB of driver heap, so
# nothing may be collected to the driver.
DEFAULT_DRIVER_MEMORY = "4g"
MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]"
    r"|spark://[\w.-]+:\d+(,[\w.-]+:\d+)*|yarn|(k8s|mesos)://\S+"
)
# Spark's size syntax (JavaUtils.byteStringAs): a JVM heap of 0 is no heap.
SIZE = re.compile(r"[1-9][0-9]*[kmgt]?b?", re.I)
LOCAL_THREADS = re.compile(r"local\[(\*|\d+)(?:,\d+)?\]")
# How long a spark:// master may take to answer a connect: Spark itself
# tries for a minute before its stack trace.
PROBE_TIMEOUT = 3.0


def check_driver_memory(size: str) -> None:
    if not SIZE.fullmatch(size):
        raise OptionError(
            f"--driver-memory: {size!r} is not a JVM size like 4g or 512m "
            "(a whole number above 0, then k, m, g or t)"
        )


def check_master(master: str, timeout: float = PROBE_TIMEOUT) -> None:
    """A master URL Spark can start with, or an OptionError naming
    --spark-master: local[N] needs N >= 1, and a spark:// master must be
    listening (a plain TCP connect to each of its HOST:PORT, one is enough)."""
    if not MASTER.fullmatch(master):
        raise OptionError(
            f"--spark-master: {master!r} is not a Spark master URL "
            "(local, local[N], local[*], spark://HOST:PORT, yarn, k8s://..., mesos://...)"
        )
    threads = LOCAL_THREADS.fullmatch(master)
    if threads and threads.group(1) != "*" and int(threads.group(1)) < 1:
        raise OptionError(f"--spark-master: {master!r} runs no threads; local[N] needs N >= 1")
    if master.startswith("local-cluster[") and 0 in map(int, re.findall(r"\d+", master)):
        raise OptionError(f"--spark-master: {master!r}: every number must be >= 1")
    if master.startswith("spark://"):
        said = []
        for where in master.removeprefix("spark://").split(","):
            host, _, port = where.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=timeout):
                    return
            except (OSError, ValueError, OverflowError) as e:
                said.append(f"{where}: {getattr(e, 'strerror', None) or e}")
        raise OptionError(
            f"--spark-master: no Spark master listens at {master} ({'; '.join(said)})"
        )


@dataclass
class SparkOptions:
    spark_master: str | None = option(
        None, "Spark master URL", shown_default=DEFAULT_MASTER, metavar="URL"
    )
    driver_memory: str = option(DEFAULT_DRIVER_MEMORY, "Spark driver heap", metavar="SIZE")
    spark_conf: list[str] = option(
        default_factory=list,
        help="extra Spark setting, repeatable",
        repeat=True,
        metavar="KEY=VALUE",
    )

    def __post_init__(self) -> None:
        """Checked before any Spark starts: a bad value fails in a second, not
        after the whole check (or a minute's wait and a Java stack trace)."""
        check_driver_memory(self.driver_memory)
        if self.spark_master is not None:
            check_master(self.spark_master)
        self.conf()

    def conf(self) -> dict[str, str]:
        """--spark-conf pairs as a dict; a pair without `=` is an error naming it."""
        out = {}
        for pair in self.spark_conf:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise OptionError(f"--spark-conf: expected KEY=VALUE, got {pair!r}")
            out[key] = value
        return out

    def spark(self) -> dict:
        """The keyword arguments of spark_session / check / build_reports."""
        return {"master": self.spark_master, "driver_memory": self.driver_memory}
