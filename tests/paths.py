"""Where the project's own files are, for tests that read them."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC_EXAMPLE = ROOT / "checkers" / "examples" / "spec-example-history.jsonl"
