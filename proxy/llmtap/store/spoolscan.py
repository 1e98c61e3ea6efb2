"""Reading a spool segment back after a crash or a damaged disk: every intact record, the damage counted.

A segment is a run of ``<u32 length><u32 crc32><payload>`` frames. :func:`scan` walks it:

- an intact frame is a record;
- a frame whose checksum fails but whose length leads exactly to the next intact frame (or to the
  end) is one damaged record: it keeps its index (so the segment's acknowledgements still line up)
  and is skipped when sent — exactly one record lost;
- a frame whose header itself is damaged is skipped by searching for the next intact frame
  (resynchronisation); how many records the damaged bytes held cannot be known, so the region counts
  as one lost record and the indices after it are unreliable (their acknowledgements are not trusted:
  those records are sent again, deduplicated by the store only if the batch matches);
- an incomplete last frame with nothing intact after it is a torn write (a crash mid-append) and is
  cut off; it was never acknowledged to anyone.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field

HEADER = struct.Struct("<II")  # payload length, crc32 of the payload
MAX_RECORD = 16 << 20  # a record longer than this is not one (a damaged length)


@dataclass
class Scan:
    offsets: list[int] = field(default_factory=list)  # each record's frame offset, damaged ones included
    holes: set[int] = field(default_factory=set)  # indices of damaged records (kept, skipped when sent)
    end: int = 0  # where the last intact (or exactly-sized damaged) frame ends
    lost: int = 0  # records lost: damaged ones plus one per damaged region
    reliable: int = -1  # indices from here on follow a damaged region (-1: all reliable)
    torn: bool = False  # an incomplete last frame was found (and must be cut)


def intact_at(data: bytes | memoryview, pos: int) -> int:
    """End of the intact frame starting at ``pos``, or -1."""
    n = len(data)
    if pos + HEADER.size > n:
        return -1
    length, crc = HEADER.unpack_from(data, pos)
    end = pos + HEADER.size + length
    if length > MAX_RECORD or end > n:
        return -1
    return end if zlib.crc32(data[pos + HEADER.size : end]) == crc else -1


def _next_intact(data: bytes | memoryview, start: int) -> int:
    for pos in range(start, len(data) - HEADER.size + 1):
        if intact_at(data, pos) >= 0:
            return pos
    return -1


def scan(raw: bytes) -> Scan:
    data = memoryview(raw)
    n = len(data)
    out = Scan()
    pos = 0
    while pos + HEADER.size <= n:
        end = intact_at(data, pos)
        if end >= 0:
            out.offsets.append(pos)
            pos = end
            continue
        length, _ = HEADER.unpack_from(data, pos)
        claimed = pos + HEADER.size + length
        if length <= MAX_RECORD and (claimed == n or (claimed < n and intact_at(data, claimed) >= 0)):
            out.holes.add(len(out.offsets))  # the payload is damaged, the frame is not: one record
            out.offsets.append(pos)
            out.lost += 1
            pos = claimed
            continue
        nxt = _next_intact(data, pos + 1)
        if nxt < 0:
            if claimed > n and length <= MAX_RECORD:
                out.torn = True  # a crash mid-append: the last record never finished
            else:
                out.lost += 1  # damage up to the end
                out.torn = True
            break
        out.lost += 1
        if out.reliable < 0:
            out.reliable = len(out.offsets)
        pos = nxt
    out.end = pos if pos <= n else n
    if out.end < n and not out.torn:
        out.torn = True  # a few stray bytes after the last frame
    return out
