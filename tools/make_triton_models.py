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
"""
import os
import sys

from onnx import TensorProto, helper

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


def main(argv):
    if len(argv) != 2 or argv[1].startswith("-"):
        sys.stderr.write(__doc__)
        return 2
    out_dir = argv[1]
    os.makedirs(out_dir, exist_ok=True)
    int_div(out_dir)
    cast_string(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
