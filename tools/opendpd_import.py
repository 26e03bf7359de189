#!/usr/bin/python3
"""Converts an OpenDPD (or any PyTorch) checkpoint of a model distdpd also has into an
.npz that `distdpd import --npz` reads (docs/deploy.md).

Usage: opendpd_import.py FILE.pt OUT.npz
  FILE.pt: what torch.save wrote: a state_dict (OpenDPD saves net.state_dict(), keys
  "backbone.rnn.weight_ih_l0", ...), a dict holding one under "state_dict" or
  "model_state_dict", or a whole nn.Module. Every floating-point tensor is written as
  float32 NAME.npy with the "backbone." prefix removed; other entries are skipped (and
  listed). Then:
      distdpd import --npz OUT.npz --data DATASET --out RUN [--model gru] [--opts hidden=23]
  (the model defaults to gru; hidden and layers come from the tensor shapes).
Needs Debian's python3-torch and python3-numpy.
"""
import sys

import numpy as np
import torch


def state_dict_of(obj):
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if isinstance(obj, dict):
        for key in ("state_dict", "model_state_dict"):
            if key in obj and isinstance(obj[key], dict):
                return obj[key]
        return obj
    sys.exit("%s: not a state_dict, a dict holding one, or an nn.Module (%s)" % (sys.argv[1], type(obj).__name__))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1:3]
    sd = state_dict_of(torch.load(src, map_location="cpu"))
    arrays = {}
    for name, t in sd.items():
        if not torch.is_tensor(t) or not t.is_floating_point():
            print("skipped %s (not a floating-point tensor)" % name)
            continue
        if name.startswith("backbone."):
            name = name[len("backbone."):]
        arrays[name] = t.detach().to(torch.float32).contiguous().numpy()
    if not arrays:
        sys.exit("%s: no floating-point tensors" % src)
    np.savez(out, **arrays)
    for name, a in arrays.items():
        print("%s %s" % (name, tuple(a.shape)))
    print("%s: %d tensors" % (out, len(arrays)))


main()
