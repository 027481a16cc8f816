#!/usr/bin/python3
"""Writes Harrier's example model repository (Triton layout) into DIR.

  simple/        Triton's classic example: INPUT0, INPUT1 INT32 [1,16] ->
                 OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1; with a config.pbtxt.
  dense_fp32/    a tiny classifier with a dynamic batch dim: "features" FP32 [N,8] ->
                 "scores" FP32 [N,5] = features x W + b (fixed weights); no config.pbtxt, so
                 Harrier auto-completes it (max_batch_size inferred from the dynamic first dim).
  vocab_lookup/  a BYTES model: "tokens" BYTES [N] -> "ids" INT64 [N], a vocabulary lookup
                 (ai.onnx.ml LabelEncoder; unknown words map to -1).

Deterministic (fixed weights), so regenerating gives identical files. Needs Debian's
python3-onnx and python3-numpy: run with /usr/bin/python3.
usage: /usr/bin/python3 tools/make_example_models.py DIR [--force]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 17)]


def save(model, path):
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)


def simple():
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])],
        "simple",
        [helper.make_tensor_value_info("INPUT0", TensorProto.INT32, [1, 16]),
         helper.make_tensor_value_info("INPUT1", TensorProto.INT32, [1, 16])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT32, [1, 16]),
         helper.make_tensor_value_info("OUTPUT1", TensorProto.INT32, [1, 16])])
    return helper.make_model(g, producer_name="harrier-examples", opset_imports=OPSET)


SIMPLE_CONFIG = """\
# Triton's "simple" example. Every field here could be left out: Harrier completes the config
# from the model file. It is written out to show the format.
name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  { name: "INPUT0", data_type: TYPE_INT32, dims: [ 1, 16 ] },
  { name: "INPUT1", data_type: TYPE_INT32, dims: [ 1, 16 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_INT32, dims: [ 1, 16 ] },
  { name: "OUTPUT1", data_type: TYPE_INT32, dims: [ 1, 16 ] }
]
instance_group [ { count: 1, kind: KIND_CPU } ]
"""


def dense_fp32():
    rng = np.random.default_rng(11)
    w = rng.standard_normal((8, 5)).astype(np.float32)
    b = np.arange(5, dtype=np.float32) / 10
    g = helper.make_graph(
        [helper.make_node("MatMul", ["features", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "B"], ["scores"])],
        "dense_fp32",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 5])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return helper.make_model(g, producer_name="harrier-examples", opset_imports=OPSET)


VOCABULARY = ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog"]


def vocab_lookup():
    # StringNormalizer would be the obvious string op, but ONNX Runtime's needs the en_US.UTF-8
    # locale, which minimal machines lack; LabelEncoder has no such dependency.
    g = helper.make_graph(
        [helper.make_node("LabelEncoder", ["tokens"], ["ids"], domain="ai.onnx.ml",
                          keys_strings=VOCABULARY, values_int64s=list(range(len(VOCABULARY))),
                          default_int64=-1)],
        "vocab_lookup",
        [helper.make_tensor_value_info("tokens", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["N"])])
    return helper.make_model(g, producer_name="harrier-examples",
                             opset_imports=OPSET + [helper.make_opsetid("ai.onnx.ml", 2)])


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    force = "--force" in sys.argv[2:]
    models = {"simple": simple, "dense_fp32": dense_fp32, "vocab_lookup": vocab_lookup}
    for name, make in models.items():
        path = os.path.join(out, name, "1", "model.onnx")
        if force or not os.path.exists(path):
            save(make(), path)
            print("wrote", path)
    cfg = os.path.join(out, "simple", "config.pbtxt")
    if force or not os.path.exists(cfg):
        with open(cfg, "w") as f:
            f.write(SIMPLE_CONFIG)


if __name__ == "__main__":
    main()
