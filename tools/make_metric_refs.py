#!/usr/bin/python3
"""Reference vectors for distdpd's metrics (tests/test_metrics.c).

Generates deterministic test signals, writes them as CSV (I,Q, %.9g of float32 values)
under tests/data/, and computes the expected metrics independently with numpy and
scipy.signal.welch, following OpenDPD's utils/metrics.py conventions:

  * signals cut into nperseg-long segments, the last zero-padded;
  * NMSE: per-segment 10 log10(mean|e|^2 / mean|ref|^2), averaged in dB (+ pooled NMSE);
  * ACLR: scipy welch(seg, fs, nperseg, return_onesided=False, scaling='spectrum') per
    segment (defaults: periodic Hann, detrend 'constant'), reordered with
    concatenate(ps[half:], ps[:half]), averaged over segments, sub-channel band sums;
  * EVM: per segment fftshift(fft(seg)), per sub-channel mean|Xp - Xr| / mean|Xr|,
    averaged over sub-channels, 20 log10 of the mean over segments;
  * 3GPP-style ACLR: scipy welch over the whole signal (Hann, 50 % overlap, no detrend,
    density), sum over bins whose centre is in [fc - B/2, fc + B/2), fc = 0 and +-bw_main.

All arithmetic is float64 on the float32 sample values (what the C code reads back).
If the OpenDPD DPA_200MHz data set is present (../shared/data/opendpd/DPA_200MHz from the
source root) the same metrics of its test split are added under "dataset"; the data set
itself is never written here.

Run from the source root:  /usr/bin/python3 tools/make_metric_refs.py
"""
import json
import os
import sys

import numpy as np
from scipy.signal import welch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DATA = os.path.join(ROOT, "tests", "data")
DATASET = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "opendpd", "DPA_200MHz"))


def segments(x, nperseg):
    """(nseg, nperseg) complex128 array, the last segment zero-padded."""
    nseg = -(-len(x) // nperseg)
    out = np.zeros((nseg, nperseg), dtype=np.complex128)
    for s in range(nseg):
        part = x[s * nperseg:(s + 1) * nperseg]
        out[s, :len(part)] = part
    return out


def main_channel_indices(freq, bw_main):
    left = int(np.min(np.where(freq >= -bw_main / 2)))
    right = int(np.max(np.where(freq <= bw_main / 2)))
    return left, right


def nmse_segmented(ref, test, nperseg):
    r, t = segments(ref, nperseg), segments(test, nperseg)
    mse = np.mean(np.abs(t - r) ** 2, axis=-1)
    energy = np.mean(np.abs(r) ** 2, axis=-1)
    return float(np.mean(10 * np.log10(mse / energy)))


def nmse_pooled(ref, test):
    return float(10 * np.log10(np.sum(np.abs(test - ref) ** 2) / np.sum(np.abs(ref) ** 2)))


def psd_segmented(x, spec, scaling="spectrum"):
    """OpenDPD's per-segment PSD, monotonic frequency order, averaged over segments."""
    n = spec["nperseg"]
    freq, ps = welch(segments(x, n), fs=spec["fs"], nperseg=n, return_onesided=False,
                     scaling=scaling, axis=-1)
    half = int(n / 2)
    freq = np.concatenate((freq[half:], freq[:half]))
    ps = np.concatenate((ps[..., half:], ps[..., :half]), axis=-1)
    return freq, np.mean(ps, axis=0)


def aclr_opendpd(x, spec):
    freq, psd = psd_segmented(x, spec)
    left, right = main_channel_indices(freq, spec["bw_main"])
    sub = int((right - left) / spec["n_sub"])
    powers = [np.sum(psd[left + c * sub:left + (c + 1) * sub]) for c in range(spec["n_sub"])]
    pmax = max(powers)
    al = 10 * np.log10(np.sum(psd[left - sub:left]) / pmax)
    ar = 10 * np.log10(np.sum(psd[right:right + sub]) / pmax)
    return {"left_db": float(al), "right_db": float(ar), "avg_db": float((al + ar) / 2),
            "index_left": left, "index_right": right, "sub_len": sub}


def evm_spectral(ref, test, spec):
    n = spec["nperseg"]
    xr = np.fft.fftshift(np.fft.fft(segments(ref, n), n=n, axis=-1), axes=-1)
    xp = np.fft.fftshift(np.fft.fft(segments(test, n), n=n, axis=-1), axes=-1)
    freq = np.fft.fftshift(np.fft.fftfreq(n, d=1 / spec["fs"]))
    left, right = main_channel_indices(freq, spec["bw_main"])
    sub = int((right - left) / spec["n_sub"])
    err = np.zeros((xr.shape[0], spec["n_sub"]))
    for c in range(spec["n_sub"]):
        sl = slice(left + c * sub, left + (c + 1) * sub)
        err[:, c] = np.mean(np.abs(xp[:, sl] - xr[:, sl]), axis=-1) / np.mean(np.abs(xr[:, sl]), axis=-1)
    return float(20 * np.log10(np.mean(err.mean(axis=-1))))


def welch_whole(x, spec, detrend):
    n = spec["nperseg"]
    f, p = welch(x, fs=spec["fs"], window="hann", nperseg=n, noverlap=n // 2,
                 detrend="constant" if detrend else False, return_onesided=False,
                 scaling="density")
    return np.fft.fftshift(f), np.fft.fftshift(p)


def aclr_3gpp(x, spec):
    f, p = welch_whole(x, spec, detrend=False)
    bw = spec["bw_occupied"] if spec["bw_occupied"] > 0 else spec["bw_main"]

    def band(fc):
        return np.sum(p[(f >= fc - bw / 2) & (f < fc + bw / 2)])

    main = band(0.0)
    al = 10 * np.log10(band(-spec["bw_main"]) / main)
    ar = 10 * np.log10(band(spec["bw_main"]) / main)
    return {"left_db": float(al), "right_db": float(ar), "avg_db": float((al + ar) / 2)}


def f32(z):
    """Round a complex signal to complex64 and back, as stored and read by the C side."""
    return np.asarray(z, dtype=np.complex64).astype(np.complex128)


def band_limited_noise(rng, n, fs, bw_occ, rms):
    w = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    spec = np.fft.fft(w)
    spec[np.abs(np.fft.fftfreq(n, 1 / fs)) > bw_occ / 2] = 0
    x = np.fft.ifft(spec)
    return x * (rms / np.sqrt(np.mean(np.abs(x) ** 2)))


def delayed(x, d):
    out = np.zeros_like(x)
    out[d:] = x[:-d]
    return out


def write_csv(path, z):
    z = np.asarray(z, dtype=np.complex64)
    with open(path, "w") as fh:
        fh.write("I,Q\n")
        for v in z:
            fh.write("%.9g,%.9g\n" % (float(v.real), float(v.imag)))
    back = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    assert np.array_equal(back[:, 0] + 1j * back[:, 1], z), path


def all_metrics(ref, test, spec):
    out = {
        "nmse_segmented_db": nmse_segmented(ref, test, spec["nperseg"]),
        "nmse_pooled_db": nmse_pooled(ref, test),
        "aclr_opendpd": aclr_opendpd(test, spec),
        "aclr_3gpp": aclr_3gpp(test, spec),
        "evm_spectral_db": evm_spectral(ref, test, spec),
    }
    return out


def make_case(name, seed, spec, n, bw_occ_sig, rms, pa, model):
    rng = np.random.default_rng(seed)
    x = band_limited_noise(rng, n, spec["fs"], bw_occ_sig, rms)
    ref = f32(pa(x))                                  # "measured" PA output
    test = f32(model(x) + 1e-3 * rms * (rng.standard_normal(n) + 1j * rng.standard_normal(n)))
    ref_csv = "tests/data/metrics_%s_ref.csv" % name
    test_csv = "tests/data/metrics_%s_test.csv" % name
    write_csv(os.path.join(ROOT, ref_csv), ref)
    write_csv(os.path.join(ROOT, test_csv), test)
    case = {"name": name, "n": n, "spec": spec, "ref_csv": ref_csv, "test_csv": test_csv}
    case.update(all_metrics(ref, test, spec))
    npr = spec["nperseg"]
    bins = sorted({0, 1, npr // 4, npr // 2 - 3, npr // 2, npr // 2 + 7, 3 * npr // 4, npr - 1})
    _, pw = welch_whole(test, spec, detrend=True)
    _, pw0 = welch_whole(test, spec, detrend=False)
    _, pseg = psd_segmented(test, spec, scaling="spectrum")
    _, psegd = psd_segmented(test, spec, scaling="density")
    case["psd_bins"] = bins
    case["welch_density_detrend"] = [float(pw[b]) for b in bins]
    case["welch_density_nodetrend"] = [float(pw0[b]) for b in bins]
    case["psd_segmented_spectrum"] = [float(pseg[b]) for b in bins]
    case["psd_segmented_density"] = [float(psegd[b]) for b in bins]
    return case


def read_iq(path):
    a = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    return f32(a[:, 0] + 1j * a[:, 1])


def dataset_refs():
    xin = os.path.join(DATASET, "test_input.csv")
    xout = os.path.join(DATASET, "test_output.csv")
    if not (os.path.exists(xin) and os.path.exists(xout)):
        print("data set not found at %s: no 'dataset' entry" % DATASET, file=sys.stderr)
        return None
    with open(os.path.join(DATASET, "spec.json")) as fh:
        sj = json.load(fh)
    spec = {"fs": float(sj["input_signal_fs"]), "bw_main": float(sj["bw_main_ch"]),
            "n_sub": int(sj["n_sub_ch"]), "nperseg": int(sj["nperseg"]), "bw_occupied": 0.0}
    x, y = read_iq(xin), read_iq(xout)
    # integer lag by cross-correlation over +-32 samples, then LS complex gain
    best, lag = -1.0, 0
    for d in range(-32, 33):
        if d >= 0:
            c = np.sum(y[d:] * np.conj(x[:len(x) - d]))
        else:
            c = np.sum(y[:len(y) + d] * np.conj(x[-d:]))
        if abs(c) > best:
            best, lag = abs(c), d
    g = np.sum(y * np.conj(x)) / np.sum(np.abs(x) ** 2)  # lag-0 gain-only fit
    gx = f32(g * x)
    return {
        "path": "../shared/data/opendpd/DPA_200MHz",
        "n": int(len(x)),
        "spec": spec,
        "lag": int(lag),
        "gain_re": float(g.real), "gain_im": float(g.imag),
        "aclr_opendpd": aclr_opendpd(y, spec),
        "aclr_3gpp": aclr_3gpp(y, spec),
        "nmse_gain_segmented_db": nmse_segmented(y, gx, spec["nperseg"]),
        "nmse_gain_pooled_db": nmse_pooled(y, gx),
        "evm_gain_db": evm_spectral(y, gx, spec),
    }


def main():
    os.makedirs(DATA, exist_ok=True)
    cases = []
    spec1 = {"fs": 800e6, "bw_main": 200e6, "n_sub": 10, "nperseg": 2560, "bw_occupied": 0.0}

    def pa1(x):
        return (1.0 + 0.05j) * x - (0.35 + 0.12j) * x * np.abs(x) ** 2 \
            + 0.04 * delayed(x * np.abs(x) ** 2, 1)

    def model1(x):
        return (1.0 + 0.05j) * x - (0.33 + 0.125j) * x * np.abs(x) ** 2

    cases.append(make_case("nl200", 20240611, spec1, 2 * 2560 + 700, 180e6, 0.2, pa1, model1))

    spec2 = {"fs": 122.88e6, "bw_main": 20e6, "n_sub": 4, "nperseg": 1024, "bw_occupied": 18e6}

    def pa2(x):
        a2 = np.abs(x) ** 2
        return (0.9 - 0.1j) * x - (0.2 - 0.05j) * x * a2 + (0.1 + 0.02j) * x * a2 ** 2 \
            + (0.05 - 0.03j) * delayed(x, 2)

    def model2(x):
        return (0.9 - 0.1j) * x - (0.19 - 0.05j) * x * np.abs(x) ** 2 + (0.05 - 0.03j) * delayed(x, 2)

    cases.append(make_case("lte20", 7, spec2, 3 * 1024 + 300, 18e6, 0.3, pa2, model2))

    out = {"generator": "tools/make_metric_refs.py",
           "numpy": np.__version__,
           "scipy": __import__("scipy").__version__,
           "cases": cases}
    ds = dataset_refs()
    if ds is not None:
        out["dataset"] = ds
    with open(os.path.join(DATA, "metrics_ref.json"), "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    for c in cases:
        print(c["name"], {k: c[k] for k in ("nmse_segmented_db", "nmse_pooled_db", "evm_spectral_db")},
              "aclr", c["aclr_opendpd"], "3gpp", c["aclr_3gpp"])
    if ds is not None:
        print("dataset", json.dumps(ds))


if __name__ == "__main__":
    main()
