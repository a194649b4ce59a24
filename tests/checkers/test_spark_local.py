"""Spark in local mode talks to nobody but this machine's loopback."""

import re
import subprocess


def test_the_local_spark_driver_listens_on_loopback_only(spark):
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    spark.range(10).count()  # the block manager and shuffle service are up
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    mine = [ln.split()[3] for ln in out.splitlines() if re.search(rf"pid={pid},", ln)]
    assert mine, "the driver JVM listens on no port at all? (ss sees nothing)"
    assert all(re.match(r"(127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]|\[::1\]):\d+$", a) for a in mine), (
        mine
    )
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
