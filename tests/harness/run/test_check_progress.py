"""A long check says what step it is in and how far Spark is with it."""

import io
import re
import threading
import time

from rich.console import Console

from harness.run.progress import CheckProgress, Progress, spark_stages


def _slow(rows):  # a task that takes a while, so a stage is seen running
    time.sleep(3)
    yield from rows


def test_spark_stages_names_the_running_stage_and_its_tasks(spark):
    assert spark_stages() == ""  # nothing runs
    job = threading.Thread(
        target=lambda: spark.sparkContext.parallelize(range(4), 2).mapPartitions(_slow).count()
    )
    job.start()
    seen = ""
    deadline = time.monotonic() + 60
    while not seen and time.monotonic() < deadline:
        seen = spark_stages()
        time.sleep(0.1)
    job.join()
    assert re.fullmatch(r" \| Spark stage \d+: [01]/2 tasks", seen), seen


def test_each_step_is_a_line_and_a_log_gets_status_lines(spark):
    out = io.StringIO()
    progress = Progress(Console(file=out, width=200), every=0.2)
    with CheckProgress(progress, poll=0.05) as p:
        p.step("reading and validating the history")
        time.sleep(0.5)
        p.step("delivery checker")
    text = out.getvalue()
    assert "check: reading and validating the history" in text
    assert "check: delivery checker" in text
    assert re.search(r"^checking: reading and validating the history \(\d+ s\)$", text, re.M)
