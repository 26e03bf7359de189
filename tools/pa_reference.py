#!/usr/bin/python3
"""Independent numpy reference for the PA simulator (src/sim/pa.c, docs/pa.md).

Writes tests/data/pa_reference.csv: a 512-sample band-limited test input (peak 1) and
the noiseless output of every built-in model at its default parameters, computed here
from the formulas and parameter sets of docs/pa.md ("Sources"), independently of
the C code. tests/test_pa.c feeds the same input to dd_pa_apply() (noise off) and
compares.

Run from the repository root:  /usr/bin/python3 tools/pa_reference.py
"""
import numpy as np

N = 512
FS = 800e6

rng = np.random.default_rng(20240611)
x = rng.standard_normal(N) + 1j * rng.standard_normal(N)
X = np.fft.fft(x)
f = np.fft.fftfreq(N, 1 / FS)
X[np.abs(f) > 98e6] = 0
x = np.fft.ifft(X)
x /= np.abs(x).max()
x = x.astype(np.complex64).astype(np.complex128)  # the C test reads float32


def saleh(u, aa=2.1587, ba=1.1517, ap=4.0033, bp=9.1040):
    r = np.abs(u)
    return aa * u / (1 + ba * r**2) * np.exp(1j * ap * r**2 / (1 + bp * r**2))


def rapp(u, G=1.0, vsat=1.0, p=2.0, alpha=0.0, beta=1.0):
    r = np.abs(u)
    amp_gain = G / (1 + (G * r / vsat) ** (2 * p)) ** (1 / (2 * p))
    return amp_gain * u * np.exp(1j * alpha * r**2 / (1 + beta * r**2))


def ghorbani(u):
    x1, x2, x3, x4 = 8.1081, 1.5413, 6.5202, -0.0718
    y1, y2, y3, y4 = 4.6645, 2.0965, 10.88, -0.003
    r = np.abs(u)
    A = x1 * r**x2 / (1 + x3 * r**x2) + x4 * r
    P = y1 * r**y2 / (1 + y3 * r**y2) + y4 * r
    out = np.zeros_like(u)
    nz = r > 0
    out[nz] = A[nz] * u[nz] / r[nz] * np.exp(1j * P[nz])
    return out


def delay(u, m):
    return np.concatenate([np.zeros(m, complex), u[: len(u) - m]])


def mp(u, coef, orders):
    """coef[i][m]: order orders[i], tap m."""
    y = np.zeros_like(u)
    for i, k in enumerate(orders):
        for m, c in enumerate(coef[i]):
            um = delay(u, m)
            y += c * um * np.abs(um) ** (k - 1)
    return y


DING = [[1.0513 + 0.0904j, -0.0680 - 0.0023j, 0.0289 - 0.0054j],
        [-0.0542 - 0.2900j, 0.2234 + 0.2317j, -0.0621 - 0.0932j],
        [-0.9657 - 0.7028j, -0.2451 - 0.3735j, 0.1229 + 0.1508j]]
WARP = [[0.9295 - 0.0001j, 0.2939 + 0.0005j, -0.1270 + 0.0034j, 0.0741 - 0.0018j],
        [0.1419 - 0.0008j, -0.0735 + 0.0833j, -0.0535 + 0.0004j, 0.0908 - 0.0473j],
        [0.0084 - 0.0569j, -0.4610 + 0.0274j, -0.3011 - 0.1403j, -0.0623 - 0.0269j],
        [0.1774 + 0.0265j, 0.0848 + 0.0613j, -0.0362 - 0.0307j, 0.0415 + 0.0429j]]

FIR_IN = [1, 0.10 - 0.04j, -0.02 + 0.015j]
FIR_OUT = [1, -0.06 + 0.03j, 0.015j]
REAL_FIR_IN = [1, 0.30 - 0.12j, -0.06 + 0.045j]
REAL_FIR_OUT = [1, -0.18 + 0.09j, 0.045j]


def fir(u, h):
    return sum(c * delay(u, k) for k, c in enumerate(h))


def rms_gain(u, target):
    return target / np.sqrt(np.mean(np.abs(u) ** 2))


def realistic(xin):
    g = rms_gain(xin, 0.32)
    s = g * xin
    p0 = np.mean(np.abs(s) ** 2)
    u = fir(s, REAL_FIR_IN)
    v = rapp(u, alpha=0.35, beta=1.0)
    v += (0.03 - 0.02j) * u * np.abs(delay(u, 1)) ** 2
    l_th = 1 - np.exp(-1 / (10e-6 * FS))
    l_c = 1 - np.exp(-1 / (50e-9 * FS))
    l_r = 1 - np.exp(-1 / (2e-6 * FS))
    P, S = p0, 0.0
    for n in range(len(s)):
        pw = abs(s[n]) ** 2
        P += l_th * (pw - P)
        S += (l_c if pw > S else l_r) * (pw - S)
        v[n] *= max(0.0, 1 - 0.5 * (P - p0) - 0.4 * S)
    return fir(v, REAL_FIR_OUT)


models = {
    "saleh": lambda u: saleh(rms_gain(u, 0.3) * u),
    "rapp": lambda u: rapp(rms_gain(u, 0.35) * u),
    "ghorbani": lambda u: ghorbani(rms_gain(u, 0.3) * u),
    "mp-ding": lambda u: mp(rms_gain(u, 0.2) * u, DING, [1, 3, 5]),
    "mp-warp": lambda u: mp(rms_gain(u, 0.25) * u, WARP, [1, 3, 5, 7]),
    "wiener": lambda u: rapp(fir(rms_gain(u, 0.35) * u, FIR_IN), alpha=0.35),
    "hammerstein": lambda u: fir(rapp(rms_gain(u, 0.35) * u, alpha=0.35), FIR_OUT),
    "wiener-hammerstein": lambda u: fir(rapp(fir(rms_gain(u, 0.35) * u, FIR_IN), alpha=0.35),
                                        FIR_OUT),
    "realistic": realistic,
}

cols = [x.real, x.imag]
head = ["I_in", "Q_in"]
for name, fn in models.items():
    y = fn(x.copy())
    cols += [y.real, y.imag]
    head += ["I_" + name, "Q_" + name]
np.savetxt("tests/data/pa_reference.csv", np.array(cols).T, delimiter=",", fmt="%.9e",
           header=",".join(head), comments="")
print("wrote tests/data/pa_reference.csv:", len(models), "models,", N, "samples")
