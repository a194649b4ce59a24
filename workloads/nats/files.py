"""The kinds of nats-server's data files, for file-corruption (read in
nats-server 2.15's filestore.go, raft.go and jetstream_cluster.go): under
the store directory's `jetstream/`, each account's streams
(`<account>/streams/<stream>/`: message blocks `msgs/<n>.blk`, the
stream's state `msgs/index.db`, its config `meta.inf`/`meta.sum`, its
consumers under `obs/`), and the system account's Raft groups
(`$SYS/_js_/<group>/`: the stream's, each consumer's and the meta group
`_meta_`, each a log of message blocks under `msgs/`, snapshots under
`snapshots/`, and its term, vote and peers beside them)."""

from __future__ import annotations

OLDER = "stream-block-older"  # not a path's kind: with_older_blocks names them
FILE_KINDS = {
    "stream-block": "the streams' message blocks (<account>/streams/<stream>/msgs/*.blk)",
    OLDER: "the streams' message blocks but each stream's last, the one "
    "being written: older messages, whose Raft log entries a snapshot has usually compacted away",
    "stream-index": "the streams' state files (<account>/streams/<stream>/msgs/index.db)",
    "stream-meta": "the streams' config files (<account>/streams/<stream>/meta.inf, meta.sum)",
    "consumer": "the consumers' state and config (<account>/streams/<stream>/obs/...)",
    "raft-log": "every Raft group's log ($SYS/_js_/<group>/msgs/...)",
    "raft-snapshot": "every Raft group's snapshots ($SYS/_js_/<group>/snapshots/snap.*)",
    "raft-state": "every Raft group's term, vote and peers ($SYS/_js_/<group>/*.idx ...)",
}
DEFAULT_FILE_KINDS = ("stream-block",)
RAFT = ("$SYS", "_js_")


def file_kind(rel: str) -> str | None:
    """The kind of the file at `rel` (relative to the store's `jetstream/`);
    None for any other."""
    parts = rel.split("/")
    if parts[:2] == list(RAFT) and len(parts) >= 4:
        under = parts[3]
        if under == "msgs":
            return "raft-log"
        if under == "snapshots":
            return "raft-snapshot"
        return "raft-state" if len(parts) == 4 else None
    if len(parts) >= 4 and parts[1] == "streams":
        tail = parts[3:]
        if tail[0] == "obs":
            return "consumer"
        if tail == ["msgs", "index.db"]:
            return "stream-index"
        if len(tail) == 2 and tail[0] == "msgs" and tail[1].endswith(".blk"):
            return "stream-block"
        if tail in (["meta.inf"], ["meta.sum"]):
            return "stream-meta"
    return None


def with_older_blocks(
    found: list[tuple[str, str, int]], kinds: list[str]
) -> list[tuple[str, str, int]]:
    """Those of `found` (kind, path, size; listed with stream-block among
    its kinds) that `kinds` asks for, each stream's blocks but its
    highest-numbered named stream-block-older if asked. A server writes
    only its last block: a message damaged there is usually still in the
    stream's Raft log, which repairs it at the restart; one in an older
    block usually is not, a snapshot having compacted the log past it."""

    def number(path: str) -> tuple[str, int]:
        folder, _, name = path.rpartition("/")
        return folder, int(name.removesuffix(".blk"))

    last: dict[str, int] = {}
    for kind, path, _ in found:
        if kind == "stream-block":
            folder, n = number(path)
            last[folder] = max(last.get(folder, n), n)
    out = []
    for kind, path, size in found:
        if kind == "stream-block" and OLDER in kinds:
            folder, n = number(path)
            kind = OLDER if n < last[folder] else kind
        if kind in kinds:
            out.append((kind, path, size))
    return sorted(out)
