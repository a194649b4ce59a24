"""Fault plans: a run's faults as data (issue 56). A plan is steps (a
fault of a kind on a target, stop, heal, sleep, pace, hold) and
combinators (sequence, overlap, repeat, rounds, mix, stagger), read from a
TOML file or compiled from the flags (compile.py), checked whole before
any node is reached, and run by one scheduler, the only writer of the
run's nemesis ops (scheduler.py)."""
