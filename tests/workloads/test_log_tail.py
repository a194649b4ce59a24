"""What a broker's log says in an error the run prints (a start that
failed, a cluster that never recovered): its last error lines first, then
its last lines. On this machine as a node (tests/here.py)."""

from tests.here import Here
from workloads.db import PidfileProcess


class Broker(PidfileProcess):
    def __init__(self, root):
        self.root = root

    def dir(self, node):
        return str(self.root)

    def ready_log(self, node):
        return str(self.root / "log" / "server.log")


def test_the_error_that_ended_a_start_comes_before_the_stack_trace_that_ends_the_log(tmp_path):
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "server.log").write_text(
        "[t0] INFO loading logs\n"
        "[t1] ERROR There was an error in one of the threads during logs loading: "
        "java.lang.IllegalArgumentException: Split operation is only permitted for "
        "segments with overflow\n"
        "[t2] ERROR Encountered fatal fault: Error starting LogManager\n"
        + "".join(f"\tat frame{i}(X.java:{i})\n" for i in range(30))
    )
    (tmp_path / "log" / "console.out").write_text("exiting\n")
    said = Broker(tmp_path).log_tail(Here())
    first, second = said.split(" | ")[:2]
    assert "Split operation is only permitted" in first and "fatal fault" in second
    assert "frame29" in said and "exiting" in said  # and the tail, as before
    assert "frame5(" not in said


def test_a_log_with_no_error_gives_its_tail_alone(tmp_path):
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "server.log").write_text("[t0] INFO started\n[t1] INFO serving\n")
    said = Broker(tmp_path).log_tail(Here())
    assert "serving" in said and not said.startswith(" | ")
    assert "queuecheck: the log's last lines" not in said
