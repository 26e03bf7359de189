#!/usr/bin/python3
"""Reference conversions float32 -> IEEE binary16 and float32 -> bfloat16 for distdpd's
fp16 / bf16 gradient codecs (src/compress/quant.c), read by tests/test_compress_quant.c.

half:     numpy's float32 -> float16 cast (round to nearest even, subnormals kept,
          overflow to inf)
bfloat16: torch 1.13 `tensor.to(torch.bfloat16)` (round to nearest even of the top 16
          bits, NaN -> NaN)

The inputs are edge cases (signed zeros, ties in the normal and subnormal ranges, the
largest finite values and the overflow thresholds, half subnormals and the values that
round to zero, float32 subnormals, inf, NaN) and random values over many magnitudes
and random bit patterns.

Writes tests/data/quant_refs.txt (text): '#' comment lines, then one line per value:

  F32 F16 BF16        float32 bits (8 hex digits), half bits and bfloat16 bits (4 hex
                      digits each), as the references produce them

Our fp16 saturates where numpy gives inf for a finite input (|x| >= 65520): the test
expects 0x7bff with the sign then; NaNs are compared by NaN-ness only.

Usage: /usr/bin/python3 tools/make_quant_refs.py [output]   (run from the source root)
"""
import sys

import numpy as np
import torch


def bits_f32(v):
    return np.array([v], dtype=np.float32).view(np.uint32)[0]


def from_bits(u):
    return np.array([u], dtype=np.uint32).view(np.float32)[0]


def edge_cases():
    v = []
    u = []  # raw float32 bit patterns
    v += [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 0.1, -0.1, 1.0 / 3.0, 1e-3, -7.5e-4]
    # half: ties between 1 and 1 + 2^-10 (-> even), 1 + 3 * 2^-11 (-> 1 + 2^-9), just off ties
    for base in (1.0, 2.0, 1024.0, 0.25):
        ulp = base * 2.0 ** -10
        for k in range(0, 8):
            t = base + (k + 0.5) * ulp
            v += [t, -t]
        v += [base + 0.5 * ulp + ulp * 2.0 ** -12, base + 0.5 * ulp - ulp * 2.0 ** -12]
    v += [2049.0, 2051.0, 2047.0, 4097.0, 4099.0, 2047.9999, 4095.99]
    # half range limits
    v += [65504.0, -65504.0, 65519.0, 65519.996, 65520.0, -65520.0, 65536.0, 1e5, -1e5, 3e38, -3e38]
    # half normal / subnormal boundary and subnormals
    mn = 2.0 ** -14
    sub = 2.0 ** -24
    v += [mn, -mn, mn * (1 - 2.0 ** -11), mn * (1 - 2.0 ** -12), mn - sub / 2, mn - sub, mn - 1.5 * sub]
    for k in range(0, 12):
        v += [(k + 0.5) * sub, -(k + 0.5) * sub, k * sub, (k + 0.25) * sub, (k + 0.75) * sub]
    v += [sub / 2, sub / 2 * (1 + 2.0 ** -20), sub / 2 * (1 - 2.0 ** -20), sub / 4, 2.0 ** -26, 1e-9, -1e-9]
    v += [1023.5 * sub, 1022.5 * sub, 1023.75 * sub, 511.5 * sub, 100.5 * sub]
    # bfloat16 ties: 1 + 2^-8 (-> 1), 1 + 3 * 2^-8 (-> 1 + 2^-6), off-tie neighbours
    for base in (1.0, 3.0, 2.0 ** -100, 2.0 ** 100, 2.0 ** -126):
        ulp = base * 2.0 ** -7
        for k in range(0, 6):
            t = base + (k + 0.5) * ulp
            v += [t, -t]
    # float32 extremes and subnormals
    u += [0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0x7F7F0000, 0x7F7EFFFF]
    u += [0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x00028000, 0x007FFFFF, 0x00800000, 0x807FFFFF]
    u += [0x7F800000, 0xFF800000]
    u += [0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x7FC01234]
    # half rounding carrying into the exponent; bf16 carry
    u += [0x3F7FFFFF, 0x477FEFFF, 0x477FF000, 0x477FE000, 0x3FFFFFFF, 0x407FF000, 0x407FEFFF]
    return [bits_f32(x) for x in v] + [np.uint32(x) for x in u]


def random_cases(rng, n_mag=400, n_bits=200):
    mag = 10.0 ** rng.uniform(-12, 12, n_mag)
    sgn = np.where(rng.random(n_mag) < 0.5, -1.0, 1.0)
    vals = (mag * sgn).astype(np.float32)
    vals2 = rng.normal(0, 1e-3, 100).astype(np.float32)  # gradient-like
    bits = rng.integers(0, 2 ** 32, n_bits, dtype=np.uint64).astype(np.uint32)
    return list(vals.view(np.uint32)) + list(vals2.view(np.uint32)) + list(bits)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/quant_refs.txt"
    rng = np.random.default_rng(20240606)
    u = np.array(edge_cases() + random_cases(rng), dtype=np.uint32)
    f = u.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        h = f.astype(np.float16).view(np.uint16)
    b = torch.from_numpy(f.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    with open(out, "w") as fh:
        fh.write("# distdpd fp16/bf16 references: numpy %s float16, torch %s bfloat16; "
                 "made by tools/make_quant_refs.py\n" % (np.__version__, torch.__version__))
        fh.write("# columns: float32 bits, float16 bits, bfloat16 bits (hex)\n")
        for i in range(len(u)):
            fh.write("%08x %04x %04x\n" % (int(u[i]), int(h[i]), int(b[i])))
    print("wrote %d values to %s" % (len(u), out))


if __name__ == "__main__":
    main()
