#!/usr/bin/python3
"""Generates Harrier's small ONNX test models in Triton's repository layout.

usage: /usr/bin/python3 tools/make_test_models.py OUT_DIR [--with-unsupported]

Needs Debian's python3-onnx and python3-numpy: run it with /usr/bin/python3 (the `python3`
first on PATH is a separate interpreter without them). Every model is IR 8 / opset 17, which
ONNX Runtime 1.29 loads, and a few hundred bytes at most (`slow`: a few KB). No config.pbtxt is written: the
config is auto-completed from the model.

Models written to OUT_DIR/<model>/1/model.onnx:

  identity_<type>   one per Harrier data type (bool, uint8, uint16, uint32, uint64, int8, int16,
                    int32, int64, fp16, bf16, fp32, fp64, bytes; the KServe name lower-cased):
                    input "INPUT0" [N, -1] -> Identity -> output "OUTPUT0" [N, -1], both dims
                    free (N is a symbolic dim, the second has no dim at all). A round trip of
                    each type through the whole server.
  simple            Triton's "simple" example: INT32 "INPUT0", "INPUT1" [N, 16] ->
                    "OUTPUT0" = INPUT0 + INPUT1, "OUTPUT1" = INPUT0 - INPUT1.
  add_sub_fp32      FP32 "INPUT0", "INPUT1" [4] (static) -> "OUTPUT0" = sum, "OUTPUT1" = diff.
  slow              FP32 "INPUT0" [1, 1024] -> "OUTPUT0" [1, 1024], every element the mean of
                    the input, computed the slow way: the input is broadcast to 1024x1024 and
                    multiplied SLOW_MATMULS (110) times by a 1024x1024 matrix of 1/1024 (made
                    in the graph by ConstantOfShape, so the file stays a few KB). Each MatMul
                    is ~10 ms on one core, so a run takes about a second (less with more
                    intra-op threads) and ONNX Runtime's terminate flag, checked between
                    nodes, stops it within milliseconds. For cancellation and deadline tests.
  busy              the `slow` graph with BUSY_MATMULS (1) MatMul instead of 110: the same input
                    and output, a few milliseconds a run. For overload tests.

With --with-unsupported, also models that load in ONNX Runtime but that Harrier must refuse
(they would make a repository not ready, so they are opt-in):

  unsupported_float8     an unused FLOAT8E4M3FN input "INPUT_FP8" next to FP32 INPUT0 -> OUTPUT0
                         (IR 9 / opset 19; the element type is set by number because Debian's
                         onnx 1.12 predates float8. COMPLEX64 cannot serve here: ONNX Runtime
                         itself refuses to load a model with a complex input.)
  unsupported_sequence   a seq(tensor(float)) input "INPUT_SEQ" -> SequenceLength -> INT64 output
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

OPSET = 17
IR_VERSION = 8
FLOAT8E4M3FN = 17  # TensorProto.FLOAT8E4M3FN in onnx >= 1.14

# KServe name (lower-cased) -> ONNX element type.
TYPES = [
    ("bool", TensorProto.BOOL),
    ("uint8", TensorProto.UINT8),
    ("uint16", TensorProto.UINT16),
    ("uint32", TensorProto.UINT32),
    ("uint64", TensorProto.UINT64),
    ("int8", TensorProto.INT8),
    ("int16", TensorProto.INT16),
    ("int32", TensorProto.INT32),
    ("int64", TensorProto.INT64),
    ("fp16", TensorProto.FLOAT16),
    ("bf16", TensorProto.BFLOAT16),
    ("fp32", TensorProto.FLOAT),
    ("fp64", TensorProto.DOUBLE),
    ("bytes", TensorProto.STRING),
]


def save(out_dir, name, graph, ir_version=IR_VERSION, opset=OPSET, check=True):
    model = helper.make_model(graph, producer_name="harrier-test",
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    if check:
        onnx.checker.check_model(model)
    path = os.path.join(out_dir, name, "1")
    os.makedirs(path, exist_ok=True)
    onnx.save(model, os.path.join(path, "model.onnx"))


def identity(out_dir, suffix, elem_type):
    # [ "N", None ]: a symbolic dim and a dim with neither value nor name; both read back as -1.
    g = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity_" + suffix,
        [helper.make_tensor_value_info("INPUT0", elem_type, ["N", None])],
        [helper.make_tensor_value_info("OUTPUT0", elem_type, ["N", None])])
    save(out_dir, "identity_" + suffix, g)


def two_in_two_out(out_dir, name, elem_type, dims):
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"]),
         helper.make_node("Sub", ["INPUT0", "INPUT1"], ["OUTPUT1"])], name,
        [helper.make_tensor_value_info("INPUT0", elem_type, dims),
         helper.make_tensor_value_info("INPUT1", elem_type, dims)],
        [helper.make_tensor_value_info("OUTPUT0", elem_type, dims),
         helper.make_tensor_value_info("OUTPUT1", elem_type, dims)])
    save(out_dir, name, g)


SLOW_SIZE = 1024
SLOW_MATMULS = 110
BUSY_MATMULS = 1


def slow(out_dir, name="slow", matmuls=SLOW_MATMULS):
    n = SLOW_SIZE
    nodes = [
        helper.make_node("Constant", [], ["shape_nn"],
                         value=helper.make_tensor("shape_nn", TensorProto.INT64, [2], [n, n])),
        helper.make_node("ConstantOfShape", ["shape_nn"], ["W"],
                         value=helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0 / n])),
        helper.make_node("Expand", ["INPUT0", "shape_nn"], ["X0"]),
    ]
    for i in range(matmuls):
        nodes.append(helper.make_node("MatMul", ["X%d" % i, "W"], ["X%d" % (i + 1)]))
    nodes += [
        helper.make_node("Constant", [], ["starts"],
                         value=helper.make_tensor("starts", TensorProto.INT64, [1], [0])),
        helper.make_node("Constant", [], ["ends"],
                         value=helper.make_tensor("ends", TensorProto.INT64, [1], [1])),
        helper.make_node("Slice", ["X%d" % matmuls, "starts", "ends"], ["OUTPUT0"]),
    ]
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [1, n])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [1, n])])
    save(out_dir, name, g)


def unsupported(out_dir):
    fp8 = helper.make_tensor_value_info("INPUT_FP8", TensorProto.FLOAT, [2])
    fp8.type.tensor_type.elem_type = FLOAT8E4M3FN
    g = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "unsupported_float8",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [2]), fp8],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [2])])
    save(out_dir, "unsupported_float8", g, ir_version=9, opset=19, check=False)

    seq = helper.make_tensor_sequence_value_info("INPUT_SEQ", TensorProto.FLOAT, None)
    g = helper.make_graph(
        [helper.make_node("SequenceLength", ["INPUT_SEQ"], ["OUTPUT0"])], "unsupported_sequence",
        [seq], [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT64, [])])
    save(out_dir, "unsupported_sequence", g)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1 or any(a not in ("--with-unsupported",) for a in argv[1:] if a.startswith("--")):
        sys.stderr.write(__doc__)
        return 2
    out_dir = args[0]
    os.makedirs(out_dir, exist_ok=True)
    for suffix, elem_type in TYPES:
        identity(out_dir, suffix, elem_type)
    two_in_two_out(out_dir, "simple", TensorProto.INT32, ["N", 16])
    two_in_two_out(out_dir, "add_sub_fp32", TensorProto.FLOAT, [4])
    slow(out_dir)
    slow(out_dir, "busy", BUSY_MATMULS)
    if "--with-unsupported" in argv:
        unsupported(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
