import pytest


@pytest.fixture(scope="session")
def spark():
    from checkers.spark import spark_session

    # Two cores, small heap: tests share the machine with brokers.
    session = spark_session("local[2]", driver_memory="1g")
    yield session
    session.stop()


@pytest.fixture
def spark_check(spark, tmp_path):
    """Runs the Spark delivery checker on a Builder or a path; returns the result."""
    from checkers.delivery import DeliveryChecker
    from checkers.load import load_history

    def run(history, name="history.jsonl"):
        path = (
            history if isinstance(history, str | type(tmp_path)) else history.write(tmp_path / name)
        )
        return DeliveryChecker().check(load_history(spark, path), {})

    return run
