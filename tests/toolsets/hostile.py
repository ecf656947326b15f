"""Bundles and configs built to attack the parser or the threads (issue 18 item 6), shared by the
unit tests and the ones against the real process."""

from __future__ import annotations

import os
import random
import struct
import zlib
from pathlib import Path

DEEP_LEVELS = 25_000  # the probe: 25,000 levels in 50 KiB killed the sidecar (SIGSEGV)


def deep_yaml(levels: int = DEEP_LEVELS) -> bytes:
    return b"[" * levels + b"]" * levels


def fifos(folder: Path, count: int) -> list[Path]:
    made = []
    for i in range(count):
        path = folder / f"pipe{i}.py"
        os.mkfifo(path)
        made.append(path)
    return made


_LOCAL = struct.Struct("<4s5H3L2H")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")


def overlapping_zip(path: Path, entries: dict[str, bytes], *, copies: int = 300, kernel_bytes: int = 1 << 20) -> Path:
    """``entries`` stored normally, then ``copies`` entries that overlap (D. Fifield's "quoted
    overlap"): each one's compressed data is a stored block quoting the next one's local header,
    followed by that next entry's data, down to one shared deflate kernel. Every entry is within
    the compression-ratio limit and has a right CRC; together they inflate to about
    ``copies * kernel_bytes`` from a file of a few dozen KiB."""
    rnd = random.Random(18)
    # Mostly zeros, with enough noise to compress at about 100:1 (under the 200:1 ratio check).
    kernel_plain = bytes(rnd.getrandbits(8) if i % 97 == 0 else 0 for i in range(kernel_bytes))
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = packer.compress(kernel_plain) + packer.flush()

    out = bytearray()
    central = []

    def local(name: bytes, method: int, crc: int, csize: int, usize: int) -> bytes:
        return _LOCAL.pack(b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, csize, usize, len(name), 0) + name

    for name, data in entries.items():
        raw = name.encode()
        central.append((raw, 0, zlib.crc32(data), len(data), len(data), len(out)))
        out += local(raw, 0, zlib.crc32(data), len(data), len(data)) + data

    names = [f"assets/o{i:04d}.bin".encode() for i in range(copies)]
    # From the last entry back: each one's sizes and CRC follow from the next one's.
    headers: list[bytes] = [b""] * copies
    sizes: list[tuple[int, int, int]] = [(0, 0, 0)] * copies  # crc, compressed, uncompressed
    kernel_crc = zlib.crc32(kernel_plain)
    sizes[-1] = (kernel_crc, len(kernel), len(kernel_plain))
    headers[-1] = local(names[-1], 8, *sizes[-1])
    quoted_prefix = b""  # the headers entry i's output starts with
    for i in range(copies - 2, -1, -1):
        following = headers[i + 1]
        quoted_prefix = following + quoted_prefix
        crc = zlib.crc32(kernel_plain, zlib.crc32(quoted_prefix))
        csize = 5 + len(following) + sizes[i + 1][1]
        usize = len(following) + sizes[i + 1][2]
        sizes[i] = (crc, csize, usize)
        headers[i] = local(names[i], 8, crc, csize, usize)
    for i in range(copies):
        central.append((names[i], 8, *sizes[i], len(out)))
        out += headers[i]
        if i + 1 < copies:
            n = len(headers[i + 1])
            out += struct.pack("<BHH", 0, n, n ^ 0xFFFF)  # a stored, non-final deflate block
    out += kernel

    directory = bytearray()
    for name, method, crc, csize, usize, offset in central:
        directory += _CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, csize, usize,
                                   len(name), 0, 0, 0, 0, 0, offset) + name
    start = len(out)
    out += directory + _END.pack(b"PK\x05\x06", 0, 0, len(central), len(central), len(directory), start, 0)
    path.write_bytes(bytes(out))
    return path
