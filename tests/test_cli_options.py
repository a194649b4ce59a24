"""Bad options get one clear error naming the option, and exit 2, before
anything is started."""

import pytest

from harness.cli import main
from harness.runner import RunError, RunOptions


@pytest.mark.parametrize(
    "argv, message",
    [
        (["test", "--nemesis", "partition,bogus"], "--nemesis: unknown fault 'bogus'"),
        (["test", "--concurrency", "1"], "--concurrency: needs at least 2"),
        (["test", "--concurrency", "4", "--producers", "4"], "--producers: must be in 1..3"),
        (["check", "/nonexistent/run"], "no history file"),
        (["test", "--cluster-file", "/nonexistent.json"], "cannot read"),
    ],
)
def test_bad_input_is_one_error_naming_it_and_exit_2(argv, message, capsys, tmp_path):
    assert main([*argv, "--store", str(tmp_path)] if argv[0] == "test" else argv) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert message in err


def test_run_options_default_to_half_producers():
    assert RunOptions(concurrency=10).producers == 5
    with pytest.raises(RunError, match="--nemesis"):
        RunOptions(nemesis=["flood"])
