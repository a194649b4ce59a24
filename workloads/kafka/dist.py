"""Kafka's jars: fetched once from Maven Central, or a user's own install.

`ensure_kafka` returns a directory of jars laid out like an unpacked
tarball's `libs/`, so brokers start with `java -cp '<libs>/*' kafka.Kafka`.
Fetched jars are cached under `<state>/kafka/<version>/libs/` (Maven's own
repository under `<state>/m2`, so nothing lands in ~/.m2); a stamp file marks
a complete fetch, so a second call runs no Maven at all.

    python -m workloads.kafka.dist [VERSION]    # fetches, prints the libs dir
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from harness.options import DEFAULT_STATE

from ..db import DBError

# Newest 4.x with every artifact the pom needs on Central (kafka_2.13 has a
# 4.4.0, kafka-tools did not yet when this was written); same as the pom's default.
DEFAULT_VERSION = "4.3.1"
POM = Path(__file__).with_name("kafka-pom.xml")
STAMP = ".queuecheck-complete"


class KafkaDistError(DBError):
    """The jars could not be found or fetched; one line saying why."""


def ensure_kafka(
    version: str | None = None, state: Path = DEFAULT_STATE, kafka_home: str | Path | None = None
) -> Path:
    """The libs directory for `version` (fetched if missing), or `kafka_home`'s."""
    if kafka_home:
        return _user_libs(Path(kafka_home))
    version = version or DEFAULT_VERSION
    libs = Path(state).resolve() / "kafka" / version / "libs"
    if (libs / STAMP).exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaDistError(
            "mvn not found: install maven (`make setup` does) or pass a Kafka install as kafka_home"
        )
    partial = libs.with_name("libs.partial")  # a killed fetch never looks complete
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-U",  # retry artifacts an earlier offline attempt recorded as missing
        "-f",
        str(POM),
        f"-Dkafka.version={version}",
        f"-Dmaven.repo.local={libs.parents[2] / 'm2'}",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={partial}",
    ]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        raise KafkaDistError(f"fetching Kafka {version} with Maven took over 30 min") from None
    if p.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        out = p.stdout + p.stderr
        missing = sorted(set(re.findall(r"org\.apache\.kafka:[\w.-]+:jar:[\w.-]+", out)))
        if missing:
            raise KafkaDistError(
                f"Kafka {version} is not on Maven Central: {', '.join(missing)} not found"
            )
        errors = [ln for ln in out.splitlines() if "ERROR" in ln] or out.splitlines() or [""]
        raise KafkaDistError(f"mvn failed fetching Kafka {version}: {errors[0].strip()[:400]}")
    jars = sorted(j.name for j in partial.glob("*.jar"))
    (partial / STAMP).write_text(f"kafka {version}\n" + "\n".join(jars) + "\n")
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    return libs


def version_of(home: str | Path) -> str:
    """The version of an unpacked Kafka, from its kafka_2.13-<version>.jar."""
    for jar in _user_libs(Path(home)).glob("kafka_2.13-*.jar"):
        m = re.fullmatch(r"kafka_2\.13-(\d+\.\d+\.\d+)\.jar", jar.name)
        if m:
            return m.group(1)
    raise KafkaDistError(f"{home}: no kafka_2.13-<version>.jar says its version")


def _user_libs(home: Path) -> Path:
    """An unpacked tarball (home/libs/*.jar) or a libs directory itself."""
    for libs in (home / "libs", home):
        if any(libs.glob("kafka_2.13-*.jar")):
            return libs.resolve()
    raise KafkaDistError(f"kafka_home {home}: no kafka_2.13-*.jar in {home}/libs or {home}")


def version_key(version: str) -> tuple[int, ...]:
    """Versions in order: "4.3.1" -> (4, 3, 1)."""
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


if __name__ == "__main__":
    try:
        print(ensure_kafka(sys.argv[1] if len(sys.argv) > 1 else None))
    except KafkaDistError as e:
        sys.exit(f"kafka-jars: {e}")
