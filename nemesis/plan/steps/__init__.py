"""The plan's steps, one per file (registered in nemesis/plan/registry.py)."""
