"""PySpark checkers over queuecheck histories."""
