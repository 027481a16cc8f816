#!/usr/bin/python3
"""Writes the models issue 12's traffic tests need into DIR (Triton layout).

  ranker/1/   "features" FP32 [N,8] -> "scores" FP32 [N,5]: features x W + b (fast)
  ranker/2/   the same signature and the same scores, computed the slow way: the features
              pass through a chain of 512x512 identity MatMuls first (a few milliseconds on
              one core), a candidate made slower on purpose for the rollout guard's test
  ranker/3/   the same signature, other weights: its scores differ (the shadow test's
              disagreeing version)
  flaky/1/    ranker/1 again
  flaky/2/    the same signature, but every run fails in ONNX Runtime (a Reshape of the
              [1,8] features to [3,-1], which no shape check can refuse at load): an engine
              failure, for the circuit breaker's test

Deterministic (fixed weights). Needs Debian's python3-onnx and python3-numpy: run with
/usr/bin/python3.
usage: /usr/bin/python3 tools/make_lifecycle_models.py DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_example_models import OPSET, save  # noqa: E402 - the same IR, opset and atomic write


def ranker(weights, slow_links=0):
    w, b = weights
    nodes, inits = [], [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    x = "features"
    if slow_links:
        # Pad to 512 wide, go through identity MatMuls, take the first 8 columns back.
        inits.append(numpy_helper.from_array(np.eye(8, 512, dtype=np.float32), "UP"))
        inits.append(numpy_helper.from_array(np.eye(512, dtype=np.float32), "I"))
        inits.append(numpy_helper.from_array(np.eye(512, 8, dtype=np.float32), "DOWN"))
        nodes.append(helper.make_node("MatMul", [x, "UP"], ["h0"]))
        for i in range(slow_links):
            nodes.append(helper.make_node("MatMul", ["h%d" % i, "I"], ["h%d" % (i + 1)]))
        nodes.append(helper.make_node("MatMul", ["h%d" % slow_links, "DOWN"], ["x8"]))
        x = "x8"
    nodes.append(helper.make_node("MatMul", [x, "W"], ["xw"]))
    nodes.append(helper.make_node("Add", ["xw", "B"], ["scores"]))
    g = helper.make_graph(nodes, "ranker",
                          [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 8])],
                          [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 5])],
                          inits)
    return helper.make_model(g, opset_imports=OPSET)


def failing(weights):
    w, b = weights
    g = helper.make_graph(
        [helper.make_node("Reshape", ["features", "odd"], ["r"]),
         helper.make_node("Reshape", ["r", "back"], ["x"]),
         helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "B"], ["scores"])],
        "flaky",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(np.array([3, -1], dtype=np.int64), "odd"),
         numpy_helper.from_array(np.array([-1, 8], dtype=np.int64), "back"),
         numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return helper.make_model(g, opset_imports=OPSET)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = sys.argv[1]
    rng = np.random.default_rng(12)
    base = (rng.standard_normal((8, 5)).astype(np.float32),
            rng.standard_normal(5).astype(np.float32))
    other = (rng.standard_normal((8, 5)).astype(np.float32),
             rng.standard_normal(5).astype(np.float32))
    save(ranker(base), os.path.join(root, "ranker", "1", "model.onnx"))
    save(ranker(base, slow_links=24), os.path.join(root, "ranker", "2", "model.onnx"))
    save(ranker(other), os.path.join(root, "ranker", "3", "model.onnx"))
    save(ranker(base), os.path.join(root, "flaky", "1", "model.onnx"))
    save(failing(base), os.path.join(root, "flaky", "2", "model.onnx"))
    for model in ("ranker", "flaky"):
        with open(os.path.join(root, model, "config.pbtxt"), "w") as f:
            # Every version serves (the traffic policy picks among them).
            f.write('version_policy: { all: {} }\n')


if __name__ == "__main__":
    main()
