#!/usr/bin/env python3
"""Count and p99 of every interval of HdrHistogram interval logs, added up.

An independent reader for bench/scale-out.sh: it decodes the logs' V2 +
deflate histograms itself (no soakd code, no HdrHistogram library) and
computes the quantile the way HdrHistogram does (the highest value
equivalent to the bucket where the running count reaches ceil(q * total)),
so its p99 can be compared with the one `soakd merge` wrote.

Usage: hdrlog.py LOG... -> prints "count N p99 SECONDS" (values are µs in
the log; the divisor 1e6 gives seconds).
"""

import base64
import math
import struct
import sys
import zlib

V2_COOKIE = 0x1C849303
V2_DEFLATE_COOKIE = 0x1C849304


def varint_zigzag(buf, pos):
    """HdrHistogram's LEB128 (at most 9 bytes, the 9th all 8 bits), zig-zag."""
    value, shift = 0, 0
    for i in range(9):
        b = buf[pos]
        pos += 1
        if i == 8:
            value |= b << 56
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (value >> 1) ^ -(value & 1), pos


def decode(text):
    raw = base64.b64decode(text)
    cookie, length = struct.unpack(">ii", raw[:8])
    # The low byte's high nibble carries the word size (0x10 for 8 bytes).
    assert cookie & ~0xF0 == V2_DEFLATE_COOKIE, hex(cookie)
    data = zlib.decompress(raw[8 : 8 + length])
    cookie, payload_len, offset, sigfigs, lowest, highest, _ratio = struct.unpack(">iiiiqqd", data[:40])
    assert cookie & ~0xF0 == V2_COOKIE and offset == 0, (hex(cookie), offset)
    counts = {}
    pos, index, end = 40, 0, 40 + payload_len
    while pos < end:
        n, pos = varint_zigzag(data, pos)
        if n < 0:
            index += -n
        else:
            if n:
                counts[index] = counts.get(index, 0) + n
            index += 1
    return (lowest, sigfigs), counts


def layout(lowest, sigfigs):
    unit = int(math.floor(math.log2(lowest)))
    sub_count_mag = int(math.ceil(math.log2(2 * 10**sigfigs)))
    half_mag = max(sub_count_mag, 1) - 1
    return unit, half_mag


def value_for(index, unit, half_mag):
    half = 1 << half_mag
    bucket = (index >> half_mag) - 1
    sub = (index & (half - 1)) + half
    if bucket < 0:
        sub -= half
        bucket = 0
    return sub << (bucket + unit), bucket


def main():
    total, shape = {}, None
    for path in sys.argv[1:]:
        for line in open(path):
            if line.startswith("#") or line.startswith('"') or not line.strip():
                continue
            fields = line.strip().split(",")
            if fields[0].startswith("Tag="):
                fields = fields[1:]
            s, counts = decode(fields[3])
            assert shape in (None, s), (shape, s)
            shape = s
            for i, n in counts.items():
                total[i] = total.get(i, 0) + n
    count = sum(total.values())
    if not count:
        print("count 0 p99 none")
        return
    unit, half_mag = layout(*shape)
    want = max(1, math.ceil(0.99 * count))
    running = 0
    for i in sorted(total):
        running += total[i]
        if running >= want:
            value, bucket = value_for(i, unit, half_mag)
            # The bucket index of the value itself (value_for's loop index
            # may sit in the lower half of bucket 0).
            pow2 = (value | ((1 << (half_mag + 1)) - 1) << unit).bit_length()
            bucket = pow2 - unit - (half_mag + 1)
            highest = value + (1 << (unit + bucket)) - 1
            print("count %d p99 %s" % (count, highest / 1e6))
            return


if __name__ == "__main__":
    main()
