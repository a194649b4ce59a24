"""The clock fault's reader for Go servers (workloads/nats/goclock/): a Go
program built with the same overlay as a clocked nats-server reads its wall
clock as the host's plus the offset file's, followed within a second of a
change, while its monotonic clock (durations) stays the host's."""

import os
import shutil
import subprocess
import time

import pytest

from workloads.nats.dist import clock_overlay

pytestmark = pytest.mark.slow  # builds package time once (the Go build cache keeps it)

PROGRAM = """package main

import (
	"fmt"
	"os"
	"time"
)

// Prints the wall clock (Unix seconds) and the time elapsed by the
// monotonic clock, once at start and again after each line read.
func main() {
	start := time.Now()
	buf := make([]byte, 1)
	for {
		now := time.Now()
		fmt.Printf("%.3f %.3f\\n", float64(now.UnixNano())/1e9, now.Sub(start).Seconds())
		if n, _ := os.Stdin.Read(buf); n == 0 {
			return
		}
	}
}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    go = shutil.which("go")
    if go is None:
        pytest.fail("go not found: the NATS server's build needs it (make setup)")
    src = tmp_path_factory.mktemp("goclock")
    (src / "main.go").write_text(PROGRAM)
    (src / "go.mod").write_text("module goclock\n\ngo 1.22\n")
    overlay = clock_overlay(go, src / "overlay")
    subprocess.run(
        [go, "build", f"-overlay={overlay}", "-o", str(src / "clock"), "."],
        cwd=src,
        check=True,
        capture_output=True,
        env={**os.environ, "CGO_ENABLED": "0"},
        timeout=600,
    )
    return src / "clock"


def readings(program, env, changes):
    """Starts the program; after each (file, text) change (None: none), asks
    for a reading once the reader's second has passed: [(wall - host, mono)]."""
    p = subprocess.Popen(
        [str(program)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    out = []
    try:
        line = p.stdout.readline().split()
        out.append((float(line[0]) - time.time(), float(line[1])))
        for change in changes:
            if change:
                path, text = change
                path.with_suffix(".new").write_text(text)
                path.with_suffix(".new").rename(path)  # as set_clock does
            time.sleep(1.3)
            p.stdin.write("\n")
            p.stdin.flush()
            line = p.stdout.readline().split()
            out.append((float(line[0]) - time.time(), float(line[1])))
    finally:
        p.stdin.close()
        p.wait(timeout=10)
    return out


def test_the_wall_clock_moves_by_the_file_s_offset_and_durations_do_not(program, tmp_path):
    clock = tmp_path / "faketime"
    clock.write_text("+3600.500\n")
    env = {"QUEUECHECK_CLOCK_FILE": str(clock), "PATH": "/usr/bin:/bin"}
    marks = readings(program, env, [None, (clock, "-120.250\n"), (clock, "+0.000\n")])
    expected = [3600.5, 3600.5, -120.25, 0.0]
    assert all(abs(o - e) < 0.3 for (o, _), e in zip(marks, expected, strict=True)), marks
    monos = [m for _, m in marks]
    assert monos == sorted(monos) and 3.5 < monos[-1] < 8  # the host's pace, jumps or not


def test_without_the_variable_or_with_a_bad_file_the_clock_is_the_host_s(program, tmp_path):
    (tmp_path / "bad").write_text("tomorrow\n")
    for env in ({}, {"QUEUECHECK_CLOCK_FILE": str(tmp_path / "bad")}):
        (offset, _), *_ = readings(program, env, [])
        assert abs(offset) < 0.5
