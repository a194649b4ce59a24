"""RabbitMQ's data files by kind (file-corruption's --file-kinds), under a
node's RABBITMQ_MNESIA_BASE: `<node>/quorum/<node>/*.wal` (the Ra WAL every
quorum queue on the node shares), `<node>/quorum/<node>/<queue>/*.segment`,
`<node>/stream/<queue>/*.segment|*.index`, and the metadata store's own
files (Mnesia on 3.x: *.DCD, *.DCL, *.DAT)."""

from __future__ import annotations

FILE_KINDS = {
    "quorum-wal": "the quorum queues' write-ahead log (quorum/<node>/*.wal)",
    "quorum-segment": "the quorum queues' segment files (quorum/<node>/<queue>/*.segment)",
    "stream-segment": "the streams' segment files (stream/<queue>/*.segment)",
    "stream-index": "the streams' index files (stream/<queue>/*.index)",
    "metadata": "the metadata store's files (Mnesia: *.DCD, *.DCL, *.DAT)",
}
DEFAULT_FILE_KINDS = ("quorum-wal", "quorum-segment", "stream-segment")
# Ra (2.2, RabbitMQ 3.10) writes a WAL's 5-byte header ("RAWA", version) to a
# temporary file, fsyncs it and renames it into place: no crash tears it,
# and a node whose WAL header is short exits on start (case_clause in
# ra_log_wal:open_at_first_record) and stays down.
SEALED_HEADERS = {"quorum-wal": 5}
METADATA_ENDS = (".DCD", ".DCL", ".DAT")


def file_kind(rel: str) -> str | None:
    """The kind of the file at `rel` (relative to the mnesia base); None for
    any other (plugins' state, the node's cluster files)."""
    parts = rel.split("/")
    name = parts[-1]
    if len(parts) >= 3 and parts[1] == "quorum":
        if len(parts) == 4 and name.endswith(".wal"):
            return "quorum-wal"
        if len(parts) == 5 and name.endswith(".segment"):
            return "quorum-segment"
        return None
    if len(parts) == 4 and parts[1] == "stream":
        if name.endswith(".segment"):
            return "stream-segment"
        return "stream-index" if name.endswith(".index") else None
    if len(parts) == 2 and name.endswith(METADATA_ENDS):
        return "metadata"
    return None
