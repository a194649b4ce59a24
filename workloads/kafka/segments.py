"""Kafka's log segments read on a node, as its own replica holds them: one
JSON line per record of the named topics' partitions, offset order.

Run there with the node's python3 (the standard library only; pushed by
state.py like lazyfs's file system), over the broker's data directory:

    python3 segments.py DATA_DIR TOPIC [TOPIC ...]

Each line: {"topic", "partition", "offset", "epoch" (the batch's partition
leader epoch), "pid", "pepoch", "seq" (producer id, epoch and the record's
sequence; -1 when none), "txn" (a transactional batch), "control" ("commit"
or "abort" for a transaction marker, else null), "id" (the message id the
value holds, or null), "value" (the value's first bytes, when no id is in
it), and only when the value says so: "sent_to" (the topic it was sent
to, when not this one) and "intact": false (its check does not match)};
then one {"end": ...} line per partition with its log's start offset as
the segments say and "epochs", the [epoch, start offset] pairs its
leader-epoch-checkpoint lists; {"error": ...} for a segment it could not
read (a compression it does not know, a torn batch).

The record batch format (magic 2) is Kafka's own (its
DefaultRecordBatch: a 61-byte header, then records of varints), read here
so that no JVM starts per segment.
"""

import json
import os
import struct
import sys
import zlib

PAD = b"."
SEP = b"|"
HEADER = struct.Struct(">qiiBIhiqqqhii")  # baseOffset .. recordsCount: 61 bytes
COMPRESSION = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}


def varint(buf, pos):
    """A zig-zag varint (Kafka's ByteUtils.readVarint/readVarlong)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
    return (result >> 1) ^ -(result & 1), pos


def records(data, count, base_offset, base_seq):
    """(offset, sequence, key, value) of each record of a batch's payload."""
    pos = 0
    for _ in range(count):
        length, pos = varint(data, pos)
        end = pos + length
        pos += 1  # attributes
        _, pos = varint(data, pos)  # timestamp delta
        delta, pos = varint(data, pos)
        klen, pos = varint(data, pos)
        key = data[pos : pos + klen] if klen >= 0 else None
        pos += max(klen, 0)
        vlen, pos = varint(data, pos)
        value = data[pos : pos + vlen] if vlen >= 0 else None
        pos = end
        seq = base_seq + delta if base_seq >= 0 else -1
        yield base_offset + delta, seq, key, value


def record_value(msg_id, topic, key, size):
    """A queuecheck record value: `id|topic|check`, padded with dots to
    `size` bytes. The check is the CRC-32 of `id|topic|key`: a record
    appended to another topic than the one it was sent to (KAFKA-19012's
    class), or altered on its way, shows in the log that holds it."""
    head = b"%d|%s|" % (msg_id, topic.encode())
    return (head + b"%08x" % zlib.crc32(head + (key or b""))).ljust(size, PAD)


def read_value(value, key=None):
    """(id, topic it was sent to, intact) of a record value; (id, None, None)
    for a value of the id alone (runs before the check), (None, None, None)
    for a value that is not queuecheck's."""
    fields = value.rstrip(PAD).split(SEP) if value else [b""]
    if not fields[0].isdigit():
        return None, None, None
    if len(fields) != 3:
        return int(fields[0]), None, None
    head = SEP.join(fields[:2]) + SEP
    intact = b"%08x" % zlib.crc32(head + (key or b"")) == fields[2]
    return int(fields[0]), fields[1].decode("utf-8", "replace"), intact


def read_segment(path, topic, partition, out):
    with open(path, "rb") as fh:
        data = fh.read()
    pos = 0
    while pos + HEADER.size <= len(data):
        (base, length, epoch, magic, _crc, attrs, last_delta, _ts, _max_ts, pid, pepoch, seq,
         count) = HEADER.unpack_from(data, pos)  # fmt: skip
        if length <= 0 or pos + 12 + length > len(data):
            if any(data[pos : pos + 12]):  # preallocated zeros end a segment
                out.write(json.dumps({"error": f"{path}: a torn batch at byte {pos}"}) + "\n")
            return
        body = data[pos + HEADER.size : pos + 12 + length]
        pos += 12 + length
        if magic != 2:
            out.write(json.dumps({"error": f"{path}: batch magic {magic} at {base}"}) + "\n")
            continue
        codec = attrs & 0x7
        if codec == 1:
            body = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        elif codec:
            name = COMPRESSION.get(codec, codec)
            out.write(json.dumps({"error": f"{path}: {name} batch at {base}"}) + "\n")
            continue
        txn, control = bool(attrs & 0x10), bool(attrs & 0x20)
        for offset, rseq, key, value in records(body, count, base, seq):
            row = {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "epoch": epoch,
                "pid": pid,
                "pepoch": pepoch,
                "seq": rseq,
                "txn": txn,
                "control": None,
                "id": None,
            }
            if control:
                kind = struct.unpack_from(">hh", key)[1] if key and len(key) >= 4 else -1
                row["control"] = {0: "abort", 1: "commit"}.get(kind, str(kind))
            else:
                row["id"], sent_to, intact = read_value(value, key)
                if row["id"] is None and value is not None:
                    row["value"] = value[:64].decode("utf-8", "replace")
                if sent_to is not None and sent_to != topic:
                    row["sent_to"] = sent_to
                if intact is False:
                    row["intact"] = False
            out.write(json.dumps(row, separators=(",", ":")) + "\n")
        del last_delta


def leader_epochs(path):
    """[[epoch, start offset], ...] of a partition's leader-epoch-checkpoint
    (a version line, a count line, then "epoch offset" lines): the epochs
    this replica knows of, including its own as leader when it wrote
    nothing yet (a leader assigns its epoch's start when it is elected);
    an epoch followed by another at the same start is not kept there."""
    try:
        with open(path) as fh:
            lines = fh.read().split("\n")
    except OSError:
        return []
    pairs = [ln.split() for ln in lines[2:]]
    return [[int(e), int(o)] for e, o in (p for p in pairs if len(p) == 2)]


def main(argv):
    data_dir, topics = argv[1], argv[2:]
    out = sys.stdout
    for topic in topics:
        prefix = topic + "-"
        for name in sorted(os.listdir(data_dir)):
            tail = name[len(prefix) :]
            if not name.startswith(prefix) or not tail.isdigit():
                continue
            partition = int(tail)
            folder = os.path.join(data_dir, name)
            logs = sorted(f for f in os.listdir(folder) if f.endswith(".log"))
            for log in logs:
                read_segment(os.path.join(folder, log), topic, partition, out)
            start = int(logs[0].split(".")[0]) if logs else 0
            end = {"topic": topic, "partition": partition, "start": start}
            end["epochs"] = leader_epochs(os.path.join(folder, "leader-epoch-checkpoint"))
            out.write(json.dumps({"end": end}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
