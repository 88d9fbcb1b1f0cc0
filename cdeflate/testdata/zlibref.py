#!/usr/bin/env python3
# C zlib's gzip output for cdeflate's tests. Requests on stdin, answers on
# stdout, little-endian framing:
#   request: level u8, chunk u32 (0: the whole input in one call), n u32, data
#   answer:  n u32, gzip bytes
# Each request is zlib.compressobj(level, DEFLATED, 16+15, 8) fed the input
# in pieces of chunk bytes (Z_NO_FLUSH), then flush() (Z_FINISH).
import struct
import sys
import zlib

inp, out = sys.stdin.buffer, sys.stdout.buffer


def read(n):
    b = inp.read(n)
    if len(b) != n:
        sys.exit(0)
    return b


if len(sys.argv) > 1 and sys.argv[1] == "version":
    print(zlib.ZLIB_RUNTIME_VERSION)
    sys.exit(0)

while True:
    level, chunk, n = struct.unpack("<BII", read(9))
    data = read(n) if n else b""
    c = zlib.compressobj(level, zlib.DEFLATED, 31, 8)
    parts = []
    step = chunk or max(n, 1)
    for i in range(0, n, step):
        parts.append(c.compress(data[i:i + step]))
    parts.append(c.flush())
    res = b"".join(parts)
    out.write(struct.pack("<I", len(res)))
    out.write(res)
    out.flush()
