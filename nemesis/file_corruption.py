"""File corruption (Jepsen's bitflip-file-chunks, truncate-file and
snapshot/restore-file-chunks): the targets' brokers are killed, one data
file of a chosen kind is changed on each, and they start again at the stop.
Recent analyses lost acknowledged records from the middle of a log after
such changes on a minority of nodes; a replicated log should repair a
minority's damage from the others.

- bitflip: a few bits flipped at random offsets of the file;
- truncate: the file cut short at a random length past its sealed header:
  the bytes a broker writes and fsyncs before it names the file (Ra's WAL
  header, written to a temporary file renamed into place), which no crash
  tears; a cut into them is damage of another kind (a bitflip's);
- rollback: the file put back as it was at this fault's previous stop on
  that node (a copy taken then, while the broker was down), so what the
  broker wrote to it since is gone; with no copy yet, one is taken now and
  nothing is changed (said so).
- offset-flip (asked for by name, brokers that lay their logs out in
  batches): one bit, from bit 31 up, of one batch's base offset,
  any batch but the file's last: the field no checksum covers. A bitflip
  lands there now and then by chance; this one always does.

With `--file-restart cluster-crash`, every other node's broker is killed
too, unchanged, and every node starts at the stop, all at once: a whole
cluster's crash in which only the targets' files were damaged, where a
broker that asks for no proof of a clean shutdown may elect a damaged copy.
With `--file-restart changed-first`, every other node's broker is killed
first, unchanged (and, where a broker's restarted node waits at boot for
any peer it did not see go down, as RabbitMQ's Mnesia does, the targets
are given time to see it go); at the stop the targets start alone, and the
others only once the broker names a leader among the changed nodes (at
most LEADER_WAIT s): the damaged copies elect without the whole one. Left
to chance, the whole node often asked for votes first and the damaged
ones took their lost tail back from it.

Each change is recorded in the nemesis op (node, kind, file, offsets or
lengths) so a report shows exactly what was done. A strike that finds no
file of the kinds on any target kills nothing (`skipped` in the op): a
kill alone is another fault, and a kind may not be written yet (a NATS
stream's older blocks). The changes are made
over the node's SFTP session, the copies with cp, in the node's own tree:
nothing outside the run's directories is touched, and the broker's
teardown removes them with its tree."""

from __future__ import annotations

import logging
import random
import shlex
import time
from dataclasses import dataclass
from typing import IO, Any

from harness.nodes.remote import Remote, RemoteError
from harness.options import OptionError, option
from workloads.capabilities import BatchOffsets, DataFiles, Leaders, PeersSeenDown, supports

from .base import FaultContext, Settings, require
from .iptables import on_all
from .process import _OneNodeFault
from .targets import TargetOptions

log = logging.getLogger(__name__)

CHANGES = ("bitflip", "truncate", "rollback", "offset-flip")
DEFAULT_CHANGES = CHANGES[:3]  # offset-flip only where asked: few brokers can take it
OFFSET_FLIP = "offset-flip"
RESTARTS = ("together", "cluster-crash", "changed-first")
LEADER_WAIT = 60.0  # s: changed-first's wait for a leader among the changed nodes
SEEN_DOWN_WAIT = 20.0  # s: its wait for the targets to see the unchanged go (PeersSeenDown)
MAX_FLIPS = 8  # bits flipped per bitflip: enough to break a checksum, few enough to trace


@dataclass
class FileFaultOptions:
    file_faults: list[str] = option(
        default_factory=lambda: list(DEFAULT_CHANGES),
        help="what file-corruption does to a target's file, one at random per fault: "
        "bitflip (a few bits), truncate (cut short), rollback (back to the copy taken at "
        "the fault's previous stop on that node); only if named, offset-flip (a high bit of "
        "one batch's base offset, which no checksum covers: brokers whose logs are batches)",
        choices=CHANGES,
    )
    file_kinds: list[str] = option(
        default_factory=list,
        help="which kinds of the broker's data files file-corruption changes, comma-separated "
        "(each broker names its own: docs/faults.md, File corruption; a kind it lacks is "
        "refused with the list); default: its message data",
    )
    file_restart: str = option(
        default="together",
        help="how file-corruption's nodes start again: together (the targets, at the stop), "
        "cluster-crash (every other node killed too, unchanged, and all started at once at "
        "the stop), changed-first (every other node killed too, unchanged, and started only "
        "once the broker names a leader among the changed nodes: the damaged copies elect "
        "without the whole one)",
        choices=RESTARTS,
    )


def flip_bits(fh: IO[bytes], size: int, rng: random.Random) -> list[dict[str, int]]:
    """Flips 1..MAX_FLIPS random bits of the open file (`size` bytes) in
    place; each flip's byte offset, bit, and the byte before and after."""
    flips = []
    for offset in sorted(rng.sample(range(size), min(size, rng.randint(1, MAX_FLIPS)))):
        bit = rng.randrange(8)
        fh.seek(offset)
        before = fh.read(1)[0]
        after = before ^ (1 << bit)
        fh.seek(offset)
        fh.write(bytes([after]))
        flips.append({"offset": offset, "bit": bit, "before": before, "after": after})
    return flips


def flip_offset(
    fh: IO[bytes], batches: list[tuple[int, int]], rng: random.Random
) -> dict[str, int]:
    """Flips one bit, from bit 31 up, of the base offset of one of
    `batches` ((position, base offset), big-endian int64s) but the last:
    the batch then claims an offset its segment's index cannot hold, with
    an intact batch after it. Raises ValueError with fewer than two."""
    if len(batches) < 2:
        raise ValueError(f"{len(batches)} whole batch(es): none but the last to change")
    position, base = rng.choice(batches[:-1])
    bit = rng.randrange(31, 64)
    at = position + 7 - bit // 8  # the byte holding the bit
    fh.seek(at)
    before = fh.read(1)[0]
    fh.seek(at)
    fh.write(bytes([before ^ (1 << (bit % 8))]))
    flipped = (base ^ (1 << bit)) & (2**64 - 1)
    to = flipped - 2**64 if flipped >= 2**63 else flipped  # read back as the int64 it is
    return {"batch": position, "bit": bit, "from": base, "to": to}


def cut_short(fh: IO[bytes], size: int, rng: random.Random, keep: int = 0) -> dict[str, int]:
    """Truncates the open file to a random length from `keep` up to below
    `size` (`keep` < `size`)."""
    length = rng.randrange(keep, size)
    fh.truncate(length)
    return {"from": size, "to": length}


@dataclass
class _Snapshot:
    kind: str
    path: str
    copy: str
    size: int


class FileCorruptionNemesis(_OneNodeFault):
    """The kill fault's round (its targets, stop and teardown: process.py),
    with one file of each struck broker changed while it is down."""

    name = "file-corruption"
    summary = (
        "the targets' brokers killed, one data file each bit-flipped, truncated or rolled "
        "back (--file-faults, --file-kinds), started again at the stop"
    )
    colour = "#bcaaa4"
    options = (TargetOptions, FileFaultOptions)

    @classmethod
    def refuse(cls, db: type, settings: Settings) -> None:
        require(
            db, DataFiles, "--nemesis file-corruption", "keep no data files this tool may change"
        )
        kinds = settings.of(FileFaultOptions).file_kinds
        unknown = [k for k in kinds if k not in db.FILE_KINDS]  # type: ignore[attr-defined]
        if unknown:
            raise OptionError(
                f"--file-kinds: {', '.join(unknown)} is not a kind of {db.name}'s files "  # type: ignore[attr-defined]
                f"(one of {', '.join(db.FILE_KINDS)})"  # type: ignore[attr-defined]
            )
        if OFFSET_FLIP in settings.of(FileFaultOptions).file_faults:
            require(
                db, BatchOffsets, "--file-faults offset-flip", "keep no batch offsets to change"
            )
            flippable = set(kinds or db.DEFAULT_FILE_KINDS) & set(db.BATCH_KINDS)  # type: ignore[attr-defined]
            if not flippable:
                raise OptionError(
                    f"--file-faults offset-flip: no kind in --file-kinds holds batches "
                    f"(one of {', '.join(db.BATCH_KINDS)})"  # type: ignore[attr-defined]
                )
        if settings.of(FileFaultOptions).file_restart == "changed-first":
            require(db, Leaders, "--file-restart changed-first", "name no leaders")
        super().refuse(db, settings)

    @classmethod
    def build(cls, ctx: FaultContext) -> FileCorruptionNemesis:
        o = ctx.settings.of(FileFaultOptions)
        return cls(
            ctx.db,
            o.file_faults,
            o.file_kinds or list(ctx.db.DEFAULT_FILE_KINDS),
            ctx.settings.of(TargetOptions).fault_targets,
            o.file_restart,
        )

    def __init__(
        self,
        db: Any,
        changes: list[str] | None = None,
        kinds: list[str] | None = None,
        allowed: list[str] | None = None,
        restart: str = "together",
    ):
        super().__init__(db, allowed)
        self.changes = list(changes or DEFAULT_CHANGES)
        self.kinds = list(kinds or [])
        self.restart = restart
        # cluster-crash and changed-first: the nodes killed, unchanged, before the targets
        self.unchanged: list[Remote] = []
        # node -> the copy a rollback restores (taken at the previous stop)
        self.snapshots: dict[str, _Snapshot] = {}
        self._seq = 0

    def start(self, rng: random.Random) -> Any:
        chosen, note = self._aim(rng)
        # one change and one draw per node, made here so the seed decides them
        plans = {
            node.name: (rng.choice(self.changes), random.Random(rng.random())) for node in chosen
        }
        if not any(on_all(chosen, lambda n: self._may_change(n, plans[n.name][0]))):
            # a kind not written yet (a stream's older blocks): no kill for nothing
            names = ", ".join(n.name for n in chosen)
            nothing = self._nothing([c for c, _ in plans.values()])
            return {**note, "changes": [], "skipped": f"{nothing} on {names}"}
        if self.restart != "together":
            others = [n for n in self.db.nodes if n not in chosen]
            self.unchanged = [
                n for n, hit in zip(others, on_all(others, self.db.kill), strict=True) if hit
            ]
            note = {**note, "killed-unchanged": [n.name for n in self.unchanged]}
            if (
                self.restart == "changed-first"
                and self.unchanged
                and supports(self.db, PeersSeenDown)
            ):
                late = self.db.await_seen_down(self.unchanged, chosen, SEEN_DOWN_WAIT)
                note = {**note, **({"not-seen-down-by": late} if late else {})}
        changes = []
        for node, done in zip(
            chosen, on_all(chosen, lambda n: self._strike(n, *plans[n.name])), strict=True
        ):
            if done is not None:
                self.targets.append(node)
                changes.append(done)
        return {**note, "changes": changes}

    def _strike(self, node: Remote, change: str, rng: random.Random) -> dict[str, Any] | None:
        if not self.db.kill(node):
            return None  # nothing ran there: nothing to change under it
        try:
            return {"node": node.name, **self._change(node, change, rng)}
        except RemoteError as e:
            return {"node": node.name, "change": change, "error": str(e)}

    def _files(self, node: Remote, change: str) -> list[tuple[str, str, int]]:
        """The node's files of the kinds that `change` can change."""
        sealed = self._sealed(change)
        kinds = self.kinds
        if change == OFFSET_FLIP:
            kinds = [k for k in kinds if k in self.db.BATCH_KINDS]
        return [f for f in self.db.data_files(node, kinds) if f[2] > sealed.get(f[0], 0)]

    def _sealed(self, change: str) -> dict[str, int]:
        return getattr(self.db, "SEALED_HEADERS", {}) if change == "truncate" else {}

    def _nothing(self, changes: list[str]) -> str:
        past = any(k in self._sealed(c) for c in changes for k in self.kinds)
        return f"no {'/'.join(self.kinds)} file with data" + (" past its sealed header" * past)

    def _may_change(self, node: Remote, change: str) -> bool:
        """Whether `change` finds something to change on the running node (a
        rollback always may: it takes its copy while the broker is down)."""
        try:
            return change == "rollback" or bool(self._files(node, change))
        except RemoteError:
            return True  # unknown: struck as before, the error recorded then

    def _change(self, node: Remote, change: str, rng: random.Random) -> dict[str, Any]:
        if change == "rollback":
            snap = self.snapshots.pop(node.name, None)
            if snap is None:
                return {"change": "snapshot", **self._snapshot(node, rng), "why": "no copy yet"}
            node.run(f"cp -f {shlex.quote(snap.copy)} {shlex.quote(snap.path)}", timeout=60)
            return {"change": "rollback", "kind": snap.kind, "file": snap.path, "to": snap.size}
        files = self._files(node, change)
        if not files:
            return {"change": "none", "why": self._nothing([change])}
        kind, path, size = rng.choice(files)
        what = {"change": change, "kind": kind, "file": path}
        with node.open_file(path) as fh:
            if change == "bitflip":
                return {**what, "flips": flip_bits(fh, size, rng)}
            if change == OFFSET_FLIP:
                try:
                    return {**what, **flip_offset(fh, self.db.batch_offsets(kind, fh, size), rng)}
                except ValueError as e:
                    return {"change": "none", "kind": kind, "file": path, "why": str(e)}
            return {**what, **cut_short(fh, size, rng, self._sealed(change).get(kind, 0))}

    def _snapshot(self, node: Remote, rng: random.Random) -> dict[str, Any]:
        """A copy of one file of the kinds, for the next rollback on the node."""
        files = self.db.data_files(node, self.kinds)
        if not files:
            return {}
        kind, path, size = rng.choice(files)
        self._seq += 1
        copy = f"{self.db.scratch(node)}/rollback-{self._seq}"
        q = shlex.quote
        node.run(f"mkdir -p {q(copy.rpartition('/')[0])} && cp -f {q(path)} {q(copy)}", timeout=60)
        self.snapshots[node.name] = _Snapshot(kind, path, copy, size)
        return {"kind": kind, "file": path, "size": size}

    def _undo(self, node: Remote) -> None:
        self.db.start(node)  # a no-op where the broker still runs

    def active(self) -> bool:
        return bool(self.targets or self.unchanged)

    def stop(self) -> Any:
        rng = random.Random(self._seq)
        taken = {}
        if "rollback" in self.changes:
            for node in self.targets:  # down still: the copy is what the broker last wrote
                try:
                    taken[node.name] = self._snapshot(node, rng)
                except RemoteError as e:
                    log.warning("%s: file-corruption snapshot: %s", node.name, e)
        first = {}
        if self.unchanged and self.restart == "changed-first":
            first = self._changed_first()
        elif self.unchanged:  # cluster-crash: every node at once, the order left to chance
            on_all([*self.targets, *self.unchanged], self._undo)
            self.unchanged = []
        done = super().stop()
        on_all(self.unchanged, self._undo)  # changed-first: once a changed node leads
        self.unchanged = []
        return {**done, **first, **({"snapshots": taken} if taken else {})}

    def _changed_first(self) -> dict[str, Any]:
        """Starts the changed nodes alone and waits until the broker names a
        leader among them (and only them): what the stop op records."""
        on_all(self.targets, self._undo)
        changed = {n.name for n in self.targets}
        began = time.monotonic()
        while True:
            try:
                named = self.db.primaries()
            except Exception as e:  # noqa: BLE001 - no answer yet while they boot
                named, why = [], str(e)
            else:
                why = f"named {named or 'none'}"
            waited = round(time.monotonic() - began, 1)
            if named and set(named) <= changed:
                return {"led-by": named, "unchanged-started-after-s": waited}
            if waited >= LEADER_WAIT:
                return {"no-leader-among-changed": why[:200], "unchanged-started-after-s": waited}
            time.sleep(0.5)  # a poll's interval, bounded by the deadline above

    def teardown(self) -> None:
        super().teardown()  # starts every node still down, the unchanged ones too
        self.unchanged = []
        if self.snapshots:
            log.info(
                "file-corruption: %d rollback copies left in the nodes' own trees, removed "
                "with them; the changed files are the run's own data",
                len(self.snapshots),
            )
        self.snapshots = {}
