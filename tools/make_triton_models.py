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
  initializer_as_input  Triton's onnxruntime_backend test of that name: FP32 "INPUT" [5, 5] ->
                 "OUTPUT" = INPUT + INITIALIZER, where "INITIALIZER" [5, 5] is an initializer
                 (ones) also listed as a graph input; its config lists it `optional: true`, so
                 a request may leave it out (OUTPUT = INPUT + 1) or send it to override it.

Triton QA: the models Triton's qa/L0_http and qa/L0_grpc tests and its client examples
(src/python/examples in triton-inference-server/client) call, with Triton's names, configs and
tensor names, for tests/integration/triton_qa_http_test.py and triton_qa_grpc_test.py
(Identity graphs unless said):

  onnx_zero_1_float32      FP32 INPUT0 -> OUTPUT0, max_batch_size 8, dims [-1]
  onnx_zero_1_float32_queue  the same with dynamic_batching: 1 s queue delay, preferred batch 8,
                           max_queue_size 1 (the second request waiting is refused)
  onnx_zero_1_float16      FP16, dims [-1, -1]
  onnx_zero_3_float32      three FP32 INPUTn -> OUTPUTn, dims [-1]
  onnx_zero_1_object       BYTES, dims [-1]
  onnx_zero_1_object_1_element  the same graph, input dims [1]
  simple_identity, simple_identity_int64  BYTES / INT64 INPUT0 -> OUTPUT0, dims [-1]
  simple                   INT32 INPUT0, INPUT1 [16] -> OUTPUT0 sum, OUTPUT1 difference,
                           max_batch_size 8 (Triton's docs/examples model_repository/simple)
  simple_string            the same on BYTES holding decimal integers (Cast in, Cast out)
  simple_int8              the same in INT8 (computed in INT32: ONNX Runtime has no INT8 Add)
  image_nchw               FP32 INPUT [3, 8, 8] FORMAT_NCHW -> OUTPUT [4] scores (the mean of
                           each channel times a fixed 3x4 matrix), max_batch_size 8, its
                           classes named by labels.txt (label_filename): a classifier as
                           image_client.py expects one
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


def initializer_as_input(out_dir, name="initializer_as_input"):
    ones = numpy_helper.from_array(np.ones((5, 5), dtype=np.float32), "INITIALIZER")
    io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [5, 5])  # noqa: E731
    g = helper.make_graph(
        [helper.make_node("Add", ["INPUT", "INITIALIZER"], ["OUTPUT"])], name,
        [io("INPUT"), io("INITIALIZER")], [io("OUTPUT")], [ones])
    save(out_dir, name, g)
    with open(os.path.join(out_dir, name, "config.pbtxt"), "w") as f:
        f.write('platform: "onnxruntime_onnx"\nmax_batch_size: 0\n'
                'input [{ name: "INPUT" data_type: TYPE_FP32 dims: [5, 5] },\n'
                '       { name: "INITIALIZER" data_type: TYPE_FP32 dims: [5, 5] optional: true }]\n'
                'output [{ name: "OUTPUT" data_type: TYPE_FP32 dims: [5, 5] }]\n')


# Triton QA (HTTP and gRPC) ---------------------------------------------------------------------------


def qa_config(out_dir, name, max_batch_size, inputs, outputs, extra=""):
    """Writes a config.pbtxt: `inputs` and `outputs` are (name, TYPE_x, dims[, more fields])."""
    def tensors(items):
        return ", ".join('{ name: "%s" data_type: %s dims: [%s]%s }'
                         % (t[0], t[1], ", ".join(str(d) for d in t[2]),
                            " " + t[3] if len(t) > 3 else "") for t in items)
    with open(os.path.join(out_dir, name, "config.pbtxt"), "w") as f:
        f.write('name: "%s"\nplatform: "onnxruntime_onnx"\nmax_batch_size: %d\n'
                "input [ %s ]\noutput [ %s ]\n%s"
                % (name, max_batch_size, tensors(inputs), tensors(outputs), extra))


def qa_identity(out_dir, name, elem_type, config_type, io_count=1, rank=1, input_dims=None):
    """Triton's gen_qa_identity_models.py layout: INPUTn -> OUTPUTn, batch 8, free dims."""
    nodes, ins, outs = [], [], []
    for i in range(io_count):
        dims = ["N"] + ["d%d_%d" % (i, r) for r in range(rank)]
        nodes.append(helper.make_node("Identity", ["INPUT%d" % i], ["OUTPUT%d" % i]))
        ins.append(helper.make_tensor_value_info("INPUT%d" % i, elem_type, dims))
        outs.append(helper.make_tensor_value_info("OUTPUT%d" % i, elem_type, dims))
    save(out_dir, name, helper.make_graph(nodes, name, ins, outs))
    free = [-1] * rank
    qa_config(out_dir, name, 8,
              [("INPUT%d" % i, config_type, input_dims or free) for i in range(io_count)],
              [("OUTPUT%d" % i, config_type, free) for i in range(io_count)])


def qa_simple(out_dir, name, elem_type, kind, compute_type=None):
    """Triton's `simple`: INPUT0 + INPUT1 and INPUT0 - INPUT1, computed in `compute_type` when
    given (cast in and out: strings need a number in between, ONNX Runtime has no INT8 Add)."""
    nodes = []
    a, b = "INPUT0", "INPUT1"
    if compute_type is not None:
        nodes += [helper.make_node("Cast", ["INPUT0"], ["a"], to=compute_type),
                  helper.make_node("Cast", ["INPUT1"], ["b"], to=compute_type)]
        a, b = "a", "b"
    sums = ("sum", "diff") if compute_type is not None else ("OUTPUT0", "OUTPUT1")
    nodes += [helper.make_node("Add", [a, b], [sums[0]]),
              helper.make_node("Sub", [a, b], [sums[1]])]
    if compute_type is not None:
        nodes += [helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=elem_type),
                  helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=elem_type)]
    io = lambda n: helper.make_tensor_value_info(n, elem_type, ["N", 16])  # noqa: E731
    save(out_dir, name, helper.make_graph(nodes, name, [io("INPUT0"), io("INPUT1")],
                                          [io("OUTPUT0"), io("OUTPUT1")]))
    qa_config(out_dir, name, 8, [("INPUT0", kind, [16]), ("INPUT1", kind, [16])],
              [("OUTPUT0", kind, [16]), ("OUTPUT1", kind, [16])])


IMAGE_LABELS = ["RED", "GREEN", "BLUE", "BRIGHT"]
IMAGE_WEIGHTS = [[1.0, 0.0, 0.0, 0.5], [0.0, 1.0, 0.0, 0.5], [0.0, 0.0, 1.0, -1.0]]


def qa_image(out_dir, name="image_nchw"):
    w = numpy_helper.from_array(np.array(IMAGE_WEIGHTS, dtype=np.float32), "W")
    shape = numpy_helper.from_array(np.array([-1, 3], dtype=np.int64), "shape")
    g = helper.make_graph(
        [helper.make_node("GlobalAveragePool", ["INPUT"], ["pooled"]),
         helper.make_node("Reshape", ["pooled", "shape"], ["flat"]),
         helper.make_node("MatMul", ["flat", "W"], ["OUTPUT"])], name,
        [helper.make_tensor_value_info("INPUT", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("OUTPUT", TensorProto.FLOAT, ["N", 4])], [w, shape])
    save(out_dir, name, g)
    qa_config(out_dir, name, 8, [("INPUT", "TYPE_FP32", [3, 8, 8], "format: FORMAT_NCHW")],
              [("OUTPUT", "TYPE_FP32", [4], 'label_filename: "labels.txt"')])
    with open(os.path.join(out_dir, name, "labels.txt"), "w") as f:
        f.write("".join(label + "\n" for label in IMAGE_LABELS))


def triton_qa(out_dir):
    qa_identity(out_dir, "onnx_zero_1_float32", TensorProto.FLOAT, "TYPE_FP32")
    qa_identity(out_dir, "onnx_zero_1_float32_queue", TensorProto.FLOAT, "TYPE_FP32")
    with open(os.path.join(out_dir, "onnx_zero_1_float32_queue", "config.pbtxt"), "a") as f:
        f.write("dynamic_batching { max_queue_delay_microseconds: 1000000 "
                "preferred_batch_size: [ 8 ] default_queue_policy { max_queue_size: 1 } }\n")
    qa_identity(out_dir, "onnx_zero_1_float16", TensorProto.FLOAT16, "TYPE_FP16", rank=2)
    qa_identity(out_dir, "onnx_zero_3_float32", TensorProto.FLOAT, "TYPE_FP32", io_count=3)
    qa_identity(out_dir, "onnx_zero_1_object", TensorProto.STRING, "TYPE_STRING")
    qa_identity(out_dir, "onnx_zero_1_object_1_element", TensorProto.STRING, "TYPE_STRING",
                input_dims=[1])
    qa_identity(out_dir, "simple_identity", TensorProto.STRING, "TYPE_STRING")
    qa_identity(out_dir, "simple_identity_int64", TensorProto.INT64, "TYPE_INT64")
    qa_simple(out_dir, "simple", TensorProto.INT32, "TYPE_INT32")
    qa_simple(out_dir, "simple_string", TensorProto.STRING, "TYPE_STRING", TensorProto.INT32)
    qa_simple(out_dir, "simple_int8", TensorProto.INT8, "TYPE_INT8", TensorProto.INT32)
    qa_image(out_dir)


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
    initializer_as_input(out_dir)
    triton_qa(out_dir)  # Triton QA (HTTP and gRPC)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
