"""Where and how the checker runs Spark: options every command that checks
shares (check, report, test, demo, matrix). No Spark import here, so the
CLI can declare them without starting anything."""

from __future__ import annotations

from dataclasses import dataclass

from harness.options import OptionError, option

DEFAULT_MASTER = "local[*]"
# A 100M-message history must complete with <= 4 GB of driver heap, so
# nothing may be collected to the driver.
DEFAULT_DRIVER_MEMORY = "4g"


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
