#!/usr/bin/env python3
"""CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bitwise: an implementation
independent of the library's dd_crc32c (slicing tables / SSE4.2), for the tests that
check its checksums (tests/cli/provenance.sh) and the fuzz seeds that need valid ones
(tests/fuzz/make_net_seeds.py). Run as a script: prints the CRC32C of FILE as 8 hex
digits."""
import sys


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the check value of the CRC catalogue

if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        print("%08x" % crc32c(f.read()))
