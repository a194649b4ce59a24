"""A reader of JetStream's file store: the messages one server holds of a
stream, read from its message blocks (`<store_dir>/jetstream/<account>/
streams/<stream>/msgs/<n>.blk`), not asked of the server.

A block is a run of records, each (little-endian): a 22-byte header (the
record's length, its top bit set when the message has headers; the stream
sequence, its top bit set for an erased message and the next for a delete
tombstone; the timestamp in ns; the subject's length), the subject, the
headers (a 4-byte length first) when there are any, the payload, and an
8-byte checksum. Read from nats-server's filestore.go (2.15); compression
and encryption, off by default, are not read. A record that cannot be what
it says (a length past the block's end) ends the block's reading: the rest
is reported as damaged, never guessed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

HEADER = struct.Struct("<IQqH")  # length, sequence, timestamp, subject length
HAS_HEADERS = 1 << 31
ERASED = 1 << 63
TOMBSTONE = 1 << 62
CHECKSUM = 8


@dataclass
class Stored:
    seq: int
    ts: int  # ns since the epoch
    subject: str
    payload: bytes


@dataclass
class Damaged:
    at: int  # the byte where the block stopped making sense
    why: str


def records(block: bytes) -> Iterator[Stored | Damaged]:
    """The messages a block holds, in its order; erased messages and
    tombstones skipped; a Damaged last when the block does not parse to its end."""
    at, end = 0, len(block)
    while at < end:
        if at + HEADER.size > end:
            yield Damaged(at, f"{end - at} bytes left, short of a record header")
            return
        length, seq, ts, slen = HEADER.unpack_from(block, at)
        headers = bool(length & HAS_HEADERS)
        length &= ~HAS_HEADERS
        body = length - HEADER.size
        if body < slen + CHECKSUM + (4 if headers else 0) or at + length > end:
            yield Damaged(at, f"a record of {length} bytes (subject {slen}) does not fit")
            return
        data = block[at + HEADER.size : at + length - CHECKSUM]
        at += length
        if seq & (ERASED | TOMBSTONE) or seq == 0:
            continue
        start = slen
        if headers:
            (hlen,) = struct.unpack_from("<I", data, slen)
            start = slen + 4 + hlen
            if start > len(data):
                yield Damaged(at - length, f"headers of {hlen} bytes overrun the record")
                return
        yield Stored(seq, ts, data[:slen].decode(errors="replace"), bytes(data[start:]))


def block_number(name: str) -> int:
    """`12.blk` -> 12: blocks are read in their number's order."""
    return int(name.split(".")[0])
