#!/usr/bin/python3
"""Checks an ONNX file written by `distdpd export --format onnx`: onnx.checker (with shape
inference), then evaluates the graph with numpy following the ONNX operator definitions
(GRU with gate blocks z, r, h and linear_before_reset, Squeeze, MatMul, Add; written from
the ONNX operator documentation, independent of distdpd and of PyTorch) over an I/Q CSV
file as one sequence (x of shape (T, 1, 2)) and compares with distdpd's output.

Usage: onnx_check.py MODEL.onnx IN.csv REF.cf32 [TOL]   (REF from `distdpd run`)
Exit 0 if max |difference| <= TOL (default 1e-5), 1 otherwise, 77 without numpy/onnx.
"""
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError as e:
    print("SKIP: %s (install python3-numpy and python3-onnx)" % e)
    sys.exit(77)


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def gru(attrs, X, W, R, B):
    """ONNX GRU, one direction, layout 0: X (T, N, D), W (1, 3H, D), R (1, 3H, H), B (1, 6H)."""
    H = attrs["hidden_size"]
    lbr = attrs.get("linear_before_reset", 0)
    Wz, Wr, Wh = np.split(W[0], 3)
    Rz, Rr, Rh = np.split(R[0], 3)
    Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = np.split(B[0], 6)
    h = np.zeros((X.shape[1], H))
    Y = np.zeros((X.shape[0], 1, X.shape[1], H))
    for t in range(X.shape[0]):
        x = X[t]
        z = sigmoid(x @ Wz.T + h @ Rz.T + Wbz + Rbz)
        r = sigmoid(x @ Wr.T + h @ Rr.T + Wbr + Rbr)
        if lbr:
            n = np.tanh(x @ Wh.T + r * (h @ Rh.T + Rbh) + Wbh)
        else:
            n = np.tanh(x @ Wh.T + (r * h) @ Rh.T + Rbh + Wbh)
        h = (1 - z) * n + z * h
        Y[t, 0] = h
    return Y


def run(model, x):
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) if t.data_type == 1 else numpy_helper.to_array(t)
           for t in model.graph.initializer}
    env[model.graph.input[0].name] = x
    for nd in model.graph.node:
        a = [env[i] for i in nd.input]
        attrs = {at.name: onnx.helper.get_attribute_value(at) for at in nd.attribute}
        if nd.op_type == "GRU":
            out = gru(attrs, *a)
        elif nd.op_type == "Squeeze":
            out = np.squeeze(a[0], axis=tuple(int(v) for v in a[1]))
        elif nd.op_type == "MatMul":
            out = a[0] @ a[1]
        elif nd.op_type == "Add":
            out = a[0] + a[1]
        else:
            sys.exit("unexpected operator %s" % nd.op_type)
        env[nd.output[0]] = out
    return env[model.graph.output[0].name]


def main():
    path, iq, ref = sys.argv[1:4]
    tol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-5
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    x = np.loadtxt(iq, delimiter=",", skiprows=1, dtype=np.float64)
    y = run(model, x[:, None, :])[:, 0, :]
    y_ref = np.fromfile(ref, dtype="<f4").reshape(-1, 2)
    diff = float(np.max(np.abs(y - y_ref)))
    ops = ",".join(n.op_type for n in model.graph.node)
    print("onnx ir %d opset %d [%s]: %d samples, max |onnx - distdpd| = %.3g (tol %g)"
          % (model.ir_version, model.opset_import[0].version, ops, len(x), diff, tol))
    sys.exit(0 if diff <= tol else 1)


if __name__ == "__main__":
    main()
