#!/usr/bin/python3
"""Generates the ONNX models Triton serves that a naive server refuses, in Triton's layout.

usage: /usr/bin/python3 tools/make_triton_models.py OUT_DIR

For tests/integration/triton_compat_test.py (Triton drop-in compatibility). Needs Debian's
python3-onnx (run it with /usr/bin/python3); IR 8 / opset 17 like tools/make_test_models.py,
whose save() it uses. No config.pbtxt is written.

Models written to OUT_DIR/<model>/1/model.onnx:

  int_div        INT32 "A", "B" [N] -> "OUTPUT0" = A / B (Div). A zero-filled request fails in
                 ONNX Runtime ("Integer division by zero"): the implicit warm-up cannot run it.
  cast_string    BYTES "INPUT0" [N] -> FP32 "OUTPUT0" (Cast): an empty string is not a number,
                 so the zero-filled warm-up fails too.
  scalar_add     FP32 "INPUT0" [] (rank 0) -> "OUTPUT0" [] = INPUT0 + 1: no batch dim, so
                 auto-complete gives max_batch_size 0, dims [1] with reshape [].
  empty_static   FP32 "INPUT0" [2, 0] -> Identity -> "OUTPUT0" [2, 0]: an empty tensor.
  free_cols      FP32 "INPUT0" [N, C] (both free) -> Identity -> "OUTPUT0": requests with C = 0.
  reshape_grid   FP32 "INPUT0" [N, 4] -> Identity -> "OUTPUT0" [N, 4], with a config that
                 presents both as dims [2, 2] (reshape [4]) and max_batch_size 4.
  reshape_grid_nobatch  the same graph without N ([4]), config max_batch_size 0.

Triton's QA models for its gRPC tests and client examples (tests/integration/
triton_qa_grpc_test.py), with Triton's configs (max_batch_size 8, dims [16]):

  simple         INT32 "INPUT0", "INPUT1" [N, 16] -> "OUTPUT0" = sum, "OUTPUT1" = difference.
  simple_int8    the same in INT8 (computed in INT32: ONNX Runtime has no INT8 Add).
  simple_string  BYTES "INPUT0", "INPUT1" [N, 16], each element a decimal integer -> BYTES
                 "OUTPUT0", "OUTPUT1": the sum and difference, as decimal strings.
  simple_identity  BYTES "INPUT0" [N, -1] -> Identity -> "OUTPUT0".
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_test_models import save  # noqa: E402 - the same IR, opset and layout


def int_div(out_dir):
    g = helper.make_graph(
        [helper.make_node("Div", ["A", "B"], ["OUTPUT0"])], "int_div",
        [helper.make_tensor_value_info("A", TensorProto.INT32, ["N"]),
         helper.make_tensor_value_info("B", TensorProto.INT32, ["N"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.INT32, ["N"])])
    save(out_dir, "int_div", g)


def cast_string(out_dir):
    g = helper.make_graph(
        [helper.make_node("Cast", ["INPUT0"], ["OUTPUT0"], to=TensorProto.FLOAT)], "cast_string",
        [helper.make_tensor_value_info("INPUT0", TensorProto.STRING, ["N"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N"])])
    save(out_dir, "cast_string", g)


def scalar_add(out_dir):
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT0", "one"], ["OUTPUT0"])], "scalar_add",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, [])], [one])
    save(out_dir, "scalar_add", g)


def identity(out_dir, name, dims):
    g = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], name,
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, dims)])
    save(out_dir, name, g)


def reshape_grid(out_dir, name, batching):
    identity(out_dir, name, ["N", 4] if batching else [4])
    tensor = 'name: "%s" data_type: TYPE_FP32 dims: [2, 2] reshape { shape: [4] }'
    with open(os.path.join(out_dir, name, "config.pbtxt"), "w") as f:
        f.write("max_batch_size: %d\ninput [{ %s }]\noutput [{ %s }]\n"
                % (4 if batching else 0, tensor % "INPUT0", tensor % "OUTPUT0"))


# Triton QA (gRPC)
# The models of Triton's examples/QA repository that its gRPC tests and client examples call,
# with the names, tensors and configs those clients expect.
QA_CONFIG = """max_batch_size: 8
input [{ name: "INPUT0", data_type: %(type)s, dims: [%(dims)s] },
       { name: "INPUT1", data_type: %(type)s, dims: [%(dims)s] }]
output [{ name: "OUTPUT0", data_type: %(type)s, dims: [%(dims)s] },
        { name: "OUTPUT1", data_type: %(type)s, dims: [%(dims)s] }]
"""


def write_config(out_dir, name, text):
    with open(os.path.join(out_dir, name, "config.pbtxt"), "w") as f:
        f.write(text)


def qa_add_sub(out_dir, name, elem_type, config_type, compute_type=None):
    """INPUT0 + INPUT1 and INPUT0 - INPUT1, computed in `compute_type` when given (cast in and
    out: ONNX Runtime's CPU Add and Sub lack INT8, and strings need a number in between)."""
    nodes, a, b = [], "INPUT0", "INPUT1"
    if compute_type is not None:
        nodes += [helper.make_node("Cast", ["INPUT0"], ["a"], to=compute_type),
                  helper.make_node("Cast", ["INPUT1"], ["b"], to=compute_type)]
        a, b = "a", "b"
    sum_name, diff_name = ("OUTPUT0", "OUTPUT1") if compute_type is None else ("sum", "diff")
    nodes += [helper.make_node("Add", [a, b], [sum_name]),
              helper.make_node("Sub", [a, b], [diff_name])]
    if compute_type is not None:
        nodes += [helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=elem_type),
                  helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=elem_type)]
    dims = ["N", 16]
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("INPUT0", elem_type, dims),
         helper.make_tensor_value_info("INPUT1", elem_type, dims)],
        [helper.make_tensor_value_info("OUTPUT0", elem_type, dims),
         helper.make_tensor_value_info("OUTPUT1", elem_type, dims)])
    save(out_dir, name, g)
    write_config(out_dir, name, QA_CONFIG % {"type": config_type, "dims": "16"})


def qa_simple_identity(out_dir):
    g = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "simple_identity",
        [helper.make_tensor_value_info("INPUT0", TensorProto.STRING, ["N", "M"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.STRING, ["N", "M"])])
    save(out_dir, "simple_identity", g)
    write_config(out_dir, "simple_identity",
                 'max_batch_size: 8\n'
                 'input [{ name: "INPUT0", data_type: TYPE_STRING, dims: [-1] }]\n'
                 'output [{ name: "OUTPUT0", data_type: TYPE_STRING, dims: [-1] }]\n')


def triton_qa_grpc_models(out_dir):
    qa_add_sub(out_dir, "simple", TensorProto.INT32, "TYPE_INT32")
    qa_add_sub(out_dir, "simple_int8", TensorProto.INT8, "TYPE_INT8", TensorProto.INT32)
    qa_add_sub(out_dir, "simple_string", TensorProto.STRING, "TYPE_STRING", TensorProto.INT32)
    qa_simple_identity(out_dir)


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    int_div(out_dir)
    cast_string(out_dir)
    scalar_add(out_dir)
    identity(out_dir, "empty_static", [2, 0])
    identity(out_dir, "free_cols", ["N", "C"])
    reshape_grid(out_dir, "reshape_grid", batching=True)
    reshape_grid(out_dir, "reshape_grid_nobatch", batching=False)
    triton_qa_grpc_models(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
