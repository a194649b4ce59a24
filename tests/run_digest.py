"""A failed cluster test's evidence, short enough for CI's output: its run
directories live in the test's tmp_path, which CI's machine does not keep,
so the report carries what a reader needs to find a cause (the faults and
when they took effect, how the operations ended and their first errors,
the harness's warnings, the brokers' last errors)."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from pathlib import Path

from harness.history import open_history

MOST_RUNS = 3
WIDTH = 220
# Kafka's, NATS's, RabbitMQ's (named after its node; a VM that died leaves a crash dump)
BROKER_LOGS = ("server.log", "console.out", "nats.log", "rabbit@*.log", "erl_crash.dump")
OWN_LOGGERS = ("harness.", "workloads.", "nemesis.", "checkers.")
ALARMS = (" ERROR ", " FATAL ", "[ERR]", "[FTL]", "[error]", "Exception", "Slogan:")
# the empty line an Erlang log entry of several lines leaves after its pid
BARE_PID = re.compile(r"<\d+\.\d+\.\d+>\s*$")


def clip(text: str) -> str:
    return text if len(text) <= WIDTH else text[: WIDTH - 3] + "..."


def history_lines(history: Path) -> list[str]:
    """A fault's invocation and outcome on one line (`begun..ended`): a run
    with many faults, a gate's rolling one, left the next run's digest past
    what CI's output keeps."""
    out, counts, errors, begun = [], Counter(), {}, {}
    with history.open() as f:
        for line in f:
            try:
                op = json.loads(line)
            except ValueError:
                out.append(f"  unreadable line: {clip(line.strip())}")
                continue
            at = f"{op.get('time', 0) / 1e9:7.2f}s"
            if op.get("process") == "nemesis":
                name, what = op.get("f"), op.get("error") or op.get("value")
                if what is None and name not in begun:
                    begun[name] = at
                    continue
                what = what if op.get("error") else json.dumps(what, sort_keys=True)
                when = f"{begun.pop(name).strip()}..{at.strip()}" if name in begun else at
                out.append(f"  {when} nemesis {name} {clip(str(what))}")
                continue
            key = (op.get("f"), op.get("type"))
            counts[key] += 1
            if op.get("error") and key not in errors:
                errors[key] = f"{at} process {op.get('process')}: {clip(str(op['error']))}"
    out += [f"  {at} nemesis {name}: no outcome" for name, at in begun.items()]
    out.append("  ops: " + ", ".join(f"{f} {t} {n}" for (f, t), n in sorted(counts.items())))
    out += [f"  first {f} {t}: {e}" for (f, t), e in sorted(errors.items())]
    return out


def log_alarms(path: Path, most: int, keep=lambda line: True) -> list[str]:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    hits = [line for line in lines if any(a in line for a in ALARMS + (" WARNING ",))]
    hits = [line for line in hits if keep(line) and not BARE_PID.search(line)]
    return [f"  {path.parent.name}/{path.name}: {clip(line)}" for line in hits[-most:]]


def ours(line: str) -> bool:
    """A harness.log line of queuecheck's own loggers, not a client library's."""
    words = line.split()
    return len(words) > 3 and words[3].startswith(OWN_LOGGERS)


def outline(run: Path) -> str:
    """One line: how the run recovered and whether its final read got to the
    end (what decides whether a loss is proven), with its first unfinished drain."""
    try:
        recovery = json.loads((run / "stats.json").read_text()).get("recovery", "?")
    except (OSError, ValueError):
        recovery = "? (no stats.json)"
    drains, unfinished = Counter(), ""
    with io.TextIOWrapper(open_history(run / "history.jsonl"), errors="replace") as f:
        for line in f:
            if '"drain"' not in line:
                continue
            try:
                op = json.loads(line)
            except ValueError:
                continue
            drains[op.get("type")] += 1
            if op.get("type") in ("fail", "info") and not unfinished:
                unfinished = f"; first unfinished: {op.get('node')} {op.get('error')}"
    read = f"drains {drains['ok']} ok of {drains['invoke']}{unfinished}"
    return clip(f"{run.parent.name}: recovery {recovery}; {read}")


def digest(root: Path) -> str:
    """The digest of every run under `root` (at most a few), "" if none:
    each run's outline first (CI's output may keep only the start), then
    each run's faults, ops and logs."""
    runs = sorted({h.resolve().parent for h in root.rglob("history.jsonl")})  # "latest" too
    parts = [outline(run) for run in runs[:MOST_RUNS]]
    for run in runs[:MOST_RUNS]:
        parts.append(f"run {run}")
        parts += history_lines(run / "history.jsonl")
        parts += log_alarms(run / "harness.log", 15, ours)
        parts += log_alarms(run / "clients.log", 5)  # the client libraries' last alarms
        for node in sorted((run / "nodes").glob("*")):
            for pattern in BROKER_LOGS:
                for log in sorted(node.glob(pattern)):
                    parts += log_alarms(log, 6)
    return "\n".join(parts)
