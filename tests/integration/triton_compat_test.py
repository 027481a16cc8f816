#!/usr/bin/python3
"""Triton drop-in: models Triton serves load and answer here, the way Triton's clients expect.

usage: /usr/bin/python3 tests/integration/triton_compat_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Serves the models of tools/make_triton_models.py (graphs a zero-filled warm-up cannot run,
scalar and empty tensors, reshaped inputs and outputs) with the real binary and checks, over
KServe v2 REST (JSON and the binary extension), that each is READY and answers as Triton does;
compressed request and response bodies (gzip, deflate; a bomb stops at the body limit), and
Triton's raw binary requests (Inference-Header-Content-Length: 0).
Python stdlib only. The last line is "N passed, N failed".
"""
import json
import os
import struct
import sys
import unittest
import zlib
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None
# The server's --max-body-bytes: what a compressed body may decode to.
MAX_BODY_BYTES = 8 << 20


def url(path, port=None):
    return "http://127.0.0.1:%d%s" % (port or SERVER.port, path)


def get(path, port=None):
    """(status, body bytes) of a GET."""
    try:
        with urllib.request.urlopen(url(path, port), timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def infer(model, inputs):
    """(status, parsed JSON body) of a JSON inference request."""
    body = json.dumps({"inputs": inputs}).encode()
    req = urllib.request.Request(url("/v2/models/%s/infer" % model), data=body,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def infer_binary(model, inputs, encode=None, headers=None, response_headers=None):
    """A binary-extension request: `inputs` are (name, datatype, shape, raw bytes); every output
    is asked for in binary. `encode(body)` compresses the body (its Content-Encoding is in
    `headers`); a compressed answer is decoded by its Content-Encoding, and the answer's headers
    are stored in `response_headers` when given. Returns (status, JSON header, {output name:
    raw bytes})."""
    header = {"inputs": [{"name": n, "datatype": d, "shape": s,
                          "parameters": {"binary_data_size": len(b)}} for n, d, s, b in inputs],
              "parameters": {"binary_data_output": True}}
    head = json.dumps(header).encode()
    body = head + b"".join(b for _, _, _, b in inputs)
    # Triton's definition: the length of the JSON header before any compression.
    all_headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(head))}
    all_headers.update(headers or {})
    req = urllib.request.Request(url("/v2/models/%s/infer" % model),
                                 data=encode(body) if encode else body, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body = r.read()
            if response_headers is not None:
                response_headers.update({k.lower(): v for k, v in r.headers.items()})
            coding = r.headers.get("Content-Encoding", "")
            if coding == "gzip":
                body = zlib.decompress(body, 31)
            elif coding == "deflate":
                body = zlib.decompress(body)
            n = int(r.headers.get("Inference-Header-Content-Length", len(body)))
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}"), {}
    answer = json.loads(body[:n])
    data, at = {}, n
    for o in answer["outputs"]:
        size = o["parameters"]["binary_data_size"]
        data[o["name"]] = body[at:at + size]
        at += size
    return 200, answer, data


def fp32(*values):
    return struct.pack("<%df" % len(values), *values)


class WarmupTest(unittest.TestCase):
    """No model_warmup in the config: Triton runs nothing, so a model whose graph cannot take
    zeros or empty strings must still serve."""

    def test_models_that_cannot_take_zeros_are_ready(self):
        for model in ("int_div", "cast_string"):
            status, _ = get("/v2/models/%s/ready" % model)
            self.assertEqual(status, 200, model)
        self.assertEqual(get("/v2/health/ready")[0], 200)

    def test_they_answer_real_requests_and_refuse_the_zeros(self):
        # Rank-1 [N] models: auto-complete gives max_batch_size > 0 and dims [1] with
        # reshape [] (Triton's convention), so a request of 3 is [3, 1].
        status, body = infer("int_div", [
            {"name": "A", "datatype": "INT32", "shape": [3, 1], "data": [7, -9, 100]},
            {"name": "B", "datatype": "INT32", "shape": [3, 1], "data": [2, 3, 7]}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [3, -3, 14])
        status, body = infer("cast_string", [
            {"name": "INPUT0", "datatype": "BYTES", "shape": [2, 1], "data": ["1.5", "-2"]}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [1.5, -2.0])
        # What the warm-up tried is an error for a client too, and the model stays READY.
        status, body = infer("int_div", [
            {"name": "A", "datatype": "INT32", "shape": [1, 1], "data": [1]},
            {"name": "B", "datatype": "INT32", "shape": [1, 1], "data": [0]}])
        self.assertGreaterEqual(status, 400, body)
        self.assertIn("division by zero", body.get("error", ""))
        self.assertEqual(get("/v2/models/int_div/ready")[0], 200)

    def test_the_failed_warm_up_is_logged_and_counted(self):
        log = SERVER.log_text()
        for model in ("int_div", "cast_string"):
            self.assertRegex(log, r"model '%s' version 1 READY .*default warm-up failed" % model)
        status, text = get("/metrics", SERVER.metrics_port)
        self.assertEqual(status, 200)
        text = text.decode()
        for model in ("int_div", "cast_string"):
            self.assertIn('harrier_model_warmup_failures_total{model="%s",version="1"} 1\n' % model,
                          text)


class ShapesTest(unittest.TestCase):
    """Scalars, empty tensors and reshape, as Triton presents them: a tensor's config dims are
    what clients send and receive, the model's own shape is what ONNX Runtime sees."""

    def test_scalar_input_takes_rank_zero_and_the_conventions_shape(self):
        status, config = get("/v2/models/scalar_add/config")
        self.assertEqual(status, 200)
        config = json.loads(config)
        self.assertEqual(config["max_batch_size"], 0)
        self.assertEqual(config["input"][0]["dims"], [1])
        self.assertEqual(config["input"][0]["reshape"], {"shape": []})
        for shape in ([], [1]):
            status, body = infer("scalar_add", [
                {"name": "INPUT0", "datatype": "FP32", "shape": shape, "data": [2.5]}])
            self.assertEqual(status, 200, (shape, body))
            self.assertEqual(body["outputs"][0]["shape"], [1])  # its config dims, as Triton
            self.assertEqual(body["outputs"][0]["data"], [3.5])
        status, _, data = infer_binary("scalar_add", [("INPUT0", "FP32", [], fp32(-1.0))])
        self.assertEqual(status, 200)
        self.assertEqual(data["OUTPUT0"], fp32(0.0))
        status, body = infer("scalar_add", [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2], "data": [1, 2]}])
        self.assertEqual(status, 400, body)

    def test_batched_scalar_outputs_come_back_as_batch_by_one(self):
        status, body = infer("int_div", [
            {"name": "A", "datatype": "INT32", "shape": [2, 1], "data": [9, 8]},
            {"name": "B", "datatype": "INT32", "shape": [2, 1], "data": [3, 2]}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [2, 1])
        self.assertEqual(body["outputs"][0]["data"], [3, 4])

    def test_zero_size_dimensions_load_and_empty_tensors_are_valid(self):
        self.assertEqual(get("/v2/models/empty_static/ready")[0], 200)
        status, meta = get("/v2/models/empty_static")
        self.assertEqual(json.loads(meta)["inputs"][0]["shape"], [2, 0])
        status, body = infer("empty_static", [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2, 0], "data": []}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [2, 0])
        self.assertEqual(body["outputs"][0]["data"], [])
        status, answer, data = infer_binary("empty_static", [("INPUT0", "FP32", [2, 0], b"")])
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["outputs"][0]["shape"], [2, 0])
        self.assertEqual(data["OUTPUT0"], b"")
        # A free dimension of 0 in a batched model; batch 0 itself is refused, as in Triton.
        status, answer, data = infer_binary("free_cols", [("INPUT0", "FP32", [3, 0], b"")])
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["outputs"][0]["shape"], [3, 0])
        status, body = infer("free_cols", [
            {"name": "INPUT0", "datatype": "FP32", "shape": [0, 2], "data": []}])
        self.assertEqual(status, 400, body)
        self.assertIn("batch size 0", body["error"])
        # An empty tensor still has to be the size it claims.
        status, body, _ = infer_binary("empty_static", [("INPUT0", "FP32", [2, 0], fp32(1.0))])
        self.assertEqual(status, 400, body)

    def test_reshape_presents_config_dims_with_and_without_batching(self):
        values = [float(v) for v in range(8)]
        status, body = infer("reshape_grid", [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2, 2, 2], "data": values}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [2, 2, 2])
        self.assertEqual(body["outputs"][0]["data"], values)
        status, body = infer("reshape_grid_nobatch", [
            {"name": "INPUT0", "datatype": "FP32", "shape": [2, 2], "data": values[:4]}])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [2, 2])
        self.assertEqual(body["outputs"][0]["data"], values[:4])
        status, meta = get("/v2/models/reshape_grid")
        meta = json.loads(meta)
        self.assertEqual(meta["inputs"][0]["shape"], [-1, 2, 2])
        self.assertEqual(meta["outputs"][0]["shape"], [-1, 2, 2])

    def test_an_optional_input_the_model_has_a_value_for_is_left_out_or_overridden(self):
        """Triton's onnxruntime_backend test initializer_as_input (probe 63)."""
        x = [float(v) for v in range(25)]
        given = {"name": "INPUT", "datatype": "FP32", "shape": [5, 5], "data": x}
        status, body = infer("initializer_as_input", [given])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [v + 1 for v in x])  # the model's ones
        override = {"name": "INITIALIZER", "datatype": "FP32", "shape": [5, 5], "data": [10.0] * 25}
        status, body = infer("initializer_as_input", [given, override])
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["data"], [v + 10 for v in x])
        status, body = infer("initializer_as_input", [override])
        self.assertEqual(status, 400, body)
        self.assertIn("missing input 'INPUT'", body["error"])
        status, meta = get("/v2/models/initializer_as_input")
        self.assertEqual([i["name"] for i in json.loads(meta)["inputs"]], ["INPUT", "INITIALIZER"])


def gzip_body(body):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(body) + c.flush()


def post(path, body, headers):
    """(status, headers, body bytes) of a POST with exactly these headers and body."""
    req = urllib.request.Request(url(path), data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class ErrorWordingTest(unittest.TestCase):
    """Triton's QA tests and clients match the start of these messages."""

    def test_unknown_model_and_version_in_tritons_words(self):
        status, body = get("/v2/models/nope")
        self.assertEqual(status, 404)
        self.assertTrue(json.loads(body)["error"].startswith(
            "Request for unknown model: 'nope' is not found"), body)
        status, body = get("/v2/models/scalar_add/versions/99")
        self.assertEqual(status, 404)
        self.assertTrue(json.loads(body)["error"].startswith(
            "Request for unknown model: 'scalar_add' version 99 is not found"), body)
        status, body = infer("nope", [])
        self.assertEqual(status, 404, body)
        self.assertTrue(body["error"].startswith("Request for unknown model: 'nope' is not found"),
                        body)


class CompressionTest(unittest.TestCase):
    """Content-Encoding on requests and Accept-Encoding on responses, as Triton's clients use
    them (tritonclient's request_compression_algorithm / response_compression_algorithm)."""

    VALUES = [float(v) for v in range(8)]

    def json_body(self):
        return json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [2, 2, 2],
                                       "data": self.VALUES}]}).encode()

    def test_gzip_and_deflate_json_requests(self):
        body = self.json_body()
        for coding, encoded in (("gzip", gzip_body(body)), ("deflate", zlib.compress(body)),
                                ("identity", body)):
            status, _, answer = post("/v2/models/reshape_grid/infer", encoded,
                                     {"Content-Type": "application/json",
                                      "Content-Encoding": coding})
            self.assertEqual(status, 200, (coding, answer))
            self.assertEqual(json.loads(answer)["outputs"][0]["data"], self.VALUES, coding)

    def test_compressed_binary_request_counts_the_uncompressed_header(self):
        raw = fp32(*self.VALUES)
        for coding, encode in (("gzip", gzip_body), ("deflate", zlib.compress)):
            status, answer, data = infer_binary(
                "reshape_grid", [("INPUT0", "FP32", [2, 2, 2], raw)], encode=encode,
                headers={"Content-Encoding": coding})
            self.assertEqual(status, 200, (coding, answer))
            self.assertEqual(data["OUTPUT0"], raw, coding)

    def test_responses_are_compressed_when_the_client_accepts_it(self):
        raw = fp32(*self.VALUES)
        for accept, coding in (("gzip", "gzip"), ("deflate", "deflate"),
                               ("gzip;q=0.2, deflate;q=0.9", "deflate"), ("br", None)):
            seen = {}
            status, answer, data = infer_binary("reshape_grid", [("INPUT0", "FP32", [2, 2, 2], raw)],
                                                headers={"Accept-Encoding": accept},
                                                response_headers=seen)
            self.assertEqual(status, 200, (accept, answer))
            self.assertEqual(seen.get("content-encoding"), coding, accept)
            self.assertEqual(data["OUTPUT0"], raw, accept)  # the header length is uncompressed
        status, headers, answer = post("/v2/models/reshape_grid/infer", self.json_body(),
                                       {"Content-Type": "application/json",
                                        "Accept-Encoding": "gzip"})
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-encoding"], "gzip")
        self.assertEqual(headers["vary"], "Accept-Encoding")
        self.assertEqual(json.loads(zlib.decompress(answer, 31))["outputs"][0]["data"],
                         self.VALUES)

    def test_bad_compressed_bodies_are_400(self):
        body = self.json_body()
        for coding, data, want in (("br", body, "unsupported Content-Encoding 'br'"),
                                   ("gzip", gzip_body(body)[:-9], "not valid"),
                                   ("gzip", body, "not valid"),
                                   ("deflate", zlib.compress(body) + b"tail", "after its deflate"),
                                   ("gzip, gzip", gzip_body(gzip_body(body)), "unsupported")):
            status, _, answer = post("/v2/models/reshape_grid/infer", data,
                                     {"Content-Type": "application/json",
                                      "Content-Encoding": coding})
            self.assertEqual(status, 400, (coding, answer))
            self.assertIn(want, json.loads(answer)["error"], coding)
        self.assertEqual(get("/v2/models/reshape_grid/ready")[0], 200)

    def test_a_bomb_gets_413_at_the_decoded_limit_without_the_memory(self):
        # 256 MiB of zeros in ~256 KB of gzip: 32x the server's body limit once decoded.
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        chunk = bytes(1 << 20)
        bomb = b"".join(c.compress(chunk) for _ in range(256)) + c.flush()
        self.assertLess(len(bomb), MAX_BODY_BYTES)

        def send(n):
            for _ in range(n):
                status, _, answer = post("/v2/models/reshape_grid/infer", bomb,
                                         {"Content-Type": "application/json",
                                          "Content-Encoding": "gzip"})
                self.assertEqual(status, 413, answer)
                self.assertIn("decodes to more than %d bytes" % MAX_BODY_BYTES,
                              json.loads(answer)["error"])
            return rss_kib(SERVER.proc.pid)

        # Each bomb costs at most about the limit (a buffer the allocator may keep per I/O
        # thread), far from its 256 MiB; and more bombs cost nothing more.
        before = rss_kib(SERVER.proc.pid)
        after_few = send(4)
        after_many = send(12)
        self.assertLess((after_few - before) / 1024, 64, "RSS %d -> %d KiB" % (before, after_few))
        self.assertLess((after_many - after_few) / 1024, MAX_BODY_BYTES / (1 << 20),
                        "RSS %d -> %d -> %d KiB" % (before, after_few, after_many))
        status, _, answer = post("/v2/models/reshape_grid/infer", gzip_body(self.json_body()),
                                 {"Content-Type": "application/json", "Content-Encoding": "gzip"})
        self.assertEqual(status, 200, answer)


class RawBinaryTest(unittest.TestCase):
    """Inference-Header-Content-Length: 0: the body is the raw bytes of the model's only input."""

    def raw(self, model, data, headers=None):
        all_headers = {"Content-Type": "application/octet-stream",
                       "Inference-Header-Content-Length": "0"}
        all_headers.update(headers or {})
        status, headers, answer = post("/v2/models/%s/infer" % model, data, all_headers)
        if status != 200:
            return status, json.loads(answer), b""
        # Answered in binary, as Triton answers raw requests.
        n = int(headers["inference-header-content-length"])
        return status, json.loads(answer[:n]), answer[n:]

    def test_the_shape_comes_from_the_model(self):
        values = [float(v) for v in range(8)]
        status, body, data = self.raw("reshape_grid", fp32(*values))  # 2 items of [2, 2]
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [2, 2, 2])
        self.assertEqual(data, fp32(*values))
        status, body, data = self.raw("reshape_grid_nobatch", fp32(*values[:4]))
        self.assertEqual(status, 200, body)
        self.assertEqual(data, fp32(*values[:4]))
        status, body, data = self.raw("scalar_add", fp32(41.0))
        self.assertEqual(status, 200, body)
        self.assertEqual(data, fp32(42.0))
        # Triton's deduction: one variable dimension besides the batch takes the size.
        status, body, data = self.raw("free_cols", fp32(*values[:3]))
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outputs"][0]["shape"], [1, 3])
        self.assertEqual(data, fp32(*values[:3]))
        # A one-element BYTES input: the body is the string.
        status, body, data = self.raw("cast_string", b"2.5")
        self.assertEqual(status, 200, body)
        self.assertEqual(data, fp32(2.5))
        # Compressed raw bodies work too.
        status, body, data = self.raw("reshape_grid", gzip_body(fp32(*values)),
                                      {"Content-Encoding": "gzip"})
        self.assertEqual(status, 200, body)
        self.assertEqual(data, fp32(*values))

    def test_what_cannot_be_deduced_is_400(self):
        for model, data, want in (
                ("int_div", bytes(8), "Raw request must only have 1 input (found 1) to be "
                                      "deduced but got 2 inputs in 'int_div' model configuration"),
                ("free_cols", bytes(10), "are not a whole number of 4-byte rows"),
                ("reshape_grid", bytes(20), "are not 1 to 4 items of 16 bytes"),
                ("reshape_grid", bytes(16 * 5), "are not 1 to 4 items"),
                ("reshape_grid_nobatch", bytes(12), "the body has 12 bytes")):
            status, body, _ = self.raw(model, data)
            self.assertEqual(status, 400, (model, body))
            self.assertIn(want, body["error"], model)


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo")
        harness.generate_repository(ARGS.source_dir, repo, ["make_triton_models.py"])
        SERVER = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "harrier.log"),
                                 ["--max-body-bytes", str(MAX_BODY_BYTES)])
        return SERVER

    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(WarmupTest),
                                loader.loadTestsFromTestCase(ShapesTest),
                                loader.loadTestsFromTestCase(ErrorWordingTest),
                                loader.loadTestsFromTestCase(CompressionTest),
                                loader.loadTestsFromTestCase(RawBinaryTest)])
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
