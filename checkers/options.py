"""Where and how the checker runs Spark: options every command that checks
shares (check, report, test, demo, matrix). No Spark import here, so the
CLI can declare them without starting anything."""

from __future__ import annotations

import re
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
        after the whole check."""
        if not re.fullmatch(r"\d+[kmgt]?b?", self.driver_memory, re.I):
            raise OptionError(
                f"--driver-memory: {self.driver_memory!r} is not a JVM size like 4g or 512m"
            )
        if self.spark_master is not None and not MASTER.fullmatch(self.spark_master):
            raise OptionError(
                f"--spark-master: {self.spark_master!r} is not a Spark master URL "
                "(local, local[N], local[*], spark://HOST:PORT, yarn, k8s://..., mesos://...)"
            )
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
