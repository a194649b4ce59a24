"""Kafka's data files by kind (file-corruption's --file-kinds): a path
under log.dirs, relative, is `<topic>-<partition>/<file>`; the controllers'
metadata log lives in `__cluster_metadata-0` in combined mode."""

from __future__ import annotations

import struct
from typing import IO

FILE_KINDS = {
    "log": "the test topics' log segments (*.log)",
    "index": "the test topics' offset indexes (*.index)",
    "timeindex": "the test topics' time indexes (*.timeindex)",
    "leader-epoch-checkpoint": "the test topics' leader-epoch-checkpoint files",
    "partition-metadata": "the test topics' partition.metadata files (topic ids)",
    "offsets-log": "the __consumer_offsets log segments (committed offsets)",
    "txn-log": "the __transaction_state log segments (transactions)",
    "metadata-log": "the KRaft metadata log's segments (__cluster_metadata-0/*.log)",
    "metadata-snapshot": "the KRaft metadata snapshots (__cluster_metadata-0/*.checkpoint)",
    "quorum-state": "the KRaft quorum-state file (the controller's vote and epoch)",
}
# The kinds written as record batches (offset-flip's: files.batch_offsets).
BATCH_KINDS = ("log", "offsets-log", "txn-log", "metadata-log")
METADATA = "__cluster_metadata-0"
INTERNAL = {"__consumer_offsets": "offsets-log", "__transaction_state": "txn-log"}
TOPIC_FILES = {
    ".log": "log",
    ".index": "index",
    ".timeindex": "timeindex",
    "leader-epoch-checkpoint": "leader-epoch-checkpoint",
    "partition.metadata": "partition-metadata",
}


def file_kind(rel: str, test_topics: list[str]) -> str | None:
    """The kind of the file at `rel` (relative to log.dirs); None for any
    other (the broker's checkpoints, producer snapshots, a deleted segment)."""
    directory, _, name = rel.rpartition("/")
    if "/" in directory or not directory:
        return None
    if directory == METADATA:
        if name.endswith(".log"):
            return "metadata-log"
        if name.endswith(".checkpoint"):
            return "metadata-snapshot"
        return "quorum-state" if name == "quorum-state" else None
    topic = directory.rpartition("-")[0]
    if topic in INTERNAL:
        return INTERNAL[topic] if name.endswith(".log") else None
    if topic not in test_topics:
        return None
    return next((kind for end, kind in TOPIC_FILES.items() if name.endswith(end)), None)


# A record batch starts with its base offset (int64) and the length of the
# rest (int32), both big-endian; its CRC covers only what follows the
# leader epoch and magic byte, never these: the leader assigns offsets
# without recomputing it.
BATCH_HEAD = struct.Struct(">qi")


def batch_offsets(fh: IO[bytes], size: int) -> list[tuple[int, int]]:
    """(position, base offset) of each whole batch of an open log segment of
    `size` bytes, read header by header; a torn tail ends the list."""
    out = []
    position = 0
    while position + BATCH_HEAD.size <= size:
        fh.seek(position)
        base, length = BATCH_HEAD.unpack(fh.read(BATCH_HEAD.size))
        end = position + BATCH_HEAD.size + length
        if length <= 0 or end > size:
            break
        out.append((position, base))
        position = end
    return out
