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


def test_a_table_of_the_driver_s_rows_is_literals_and_starts_no_python_worker(spark):
    from checkers.spark import local_rows

    schema = "topic string, partition long, hw long, isr array<long>"
    rows = [("t", 0, 7, [1, 2]), ("u", 3, None, [])]
    df = local_rows(spark, rows, schema)
    typed = "struct<topic:string,partition:bigint,hw:bigint,isr:array<bigint>>"
    assert df.schema.simpleString() == typed
    assert [tuple(r) for r in df.collect()] == rows
    plan = df._jdf.queryExecution().optimizedPlan().toString()
    assert "LogicalRDD" not in plan  # createDataFrame's Python RDD would be
    empty = local_rows(spark, [], schema)
    assert empty.collect() == [] and empty.schema.simpleString() == typed


def test_checkers_planning_at_once_share_the_by_id_setting_and_the_last_puts_it_back(spark):
    from checkers.spark import by_id

    key = "spark.sql.execution.bypassPartialAggregation"
    spark.conf.set(key, "false")
    try:
        with by_id(spark):
            with by_id(spark):  # a second checker's block, begun inside the first's
                assert spark.conf.get(key) == "true"
            assert spark.conf.get(key) == "true"  # still inside the first
        assert spark.conf.get(key) == "false"
    finally:
        spark.conf.unset(key)


def test_a_process_checking_one_small_history_gets_the_jit_s_first_tier_only():
    from checkers.spark import SMALL_INPUT, checkers_at_once, java_options

    assert "-XX:TieredStopAtLevel=1" in java_options(quick_start=True)
    assert "TieredStopAtLevel" not in java_options()
    assert checkers_at_once(SMALL_INPUT - 1) >= 2 and checkers_at_once(SMALL_INPUT) == 1
