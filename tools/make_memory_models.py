#!/usr/bin/python3
"""Writes the model issue 12's memory test needs into DIR (Triton layout).

  wide/1/   "x" FP32 [N,2048] -> "y" FP32 [N,2048]: x times four 2048x2048 matrices in turn,
            64 MiB of weights, so that what its loads and unloads do to the server's RSS
            stands out. Four tensors of 16 MiB rather than one of 64: glibc serves a block over
            32 MiB from a mapping of its own, returned when freed, which no load keeps

Deterministic (fixed weights). Needs Debian's python3-onnx and python3-numpy: run with
/usr/bin/python3.
usage: /usr/bin/python3 tools/make_memory_models.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_example_models import OPSET, save  # noqa: E402 - the same IR, opset and atomic write

WIDTH = 2048
LAYERS = 4


def wide():
    rng = np.random.default_rng(14)
    names = ["x"] + ["h%d" % i for i in range(1, LAYERS)] + ["y"]
    nodes = [helper.make_node("MatMul", [names[i], "W%d" % i], [names[i + 1]])
             for i in range(LAYERS)]
    inits = [numpy_helper.from_array(
        (rng.standard_normal((WIDTH, WIDTH)) / WIDTH).astype(np.float32), "W%d" % i)
        for i in range(LAYERS)]
    g = helper.make_graph(nodes, "wide",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", WIDTH])],
                          inits)
    return helper.make_model(g, opset_imports=OPSET)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    save(wide(), os.path.join(sys.argv[1], "wide", "1", "model.onnx"))


if __name__ == "__main__":
    main()
