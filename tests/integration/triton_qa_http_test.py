#!/usr/bin/python3
"""Triton's own HTTP QA tests and HTTP client examples, re-expressed against Harrier.

usage: /usr/bin/python3 tests/integration/triton_qa_http_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Each test ports one case of triton-inference-server/server qa/L0_http (http_test.py,
http_input_size_limit_test.py, http_request_many_chunks.py, nested_json_crash.py,
python_http_aio_test.py, http_restricted_api_test.py, the curl cases of test.sh) or one client
example of triton-inference-server/client src/python/examples (simple_http_*, reuse_infer_
objects_client.py, image_client.py): its name is the Triton case's, its docstring says which
file, and it sends the same requests and checks the same answers (status codes, the error
texts the Triton test matches, output values) with the stdlib, numpy and tools/harrier_client.py
in place of `requests` and `tritonclient`. Where Harrier differs on purpose the test checks
Harrier's answer and says so; docs/triton-compatibility.md ("Triton's QA tests and client
examples") lists every case, the ones that do not apply included.

Models: tools/make_triton_models.py ("Triton QA (HTTP)"), Triton's names and configs. The main
server runs with --allow-client-shm true and Triton's --http-max-input-size at LIMIT_BYTES (the
size-limit cases, scaled down from Triton's 64 and 128 MiB); the model-control and
restricted-API cases start servers of their own. The last line is "N passed, N failed".
"""
import base64
import gzip
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unittest
import zlib

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None
REPO = None
LIMIT_BYTES = 4 << 20  # --http-max-input-size of the main server
hc = None  # tools/harrier_client.py, imported in main() once tools/ is on sys.path


# ---- the wire, as `requests` and tritonclient.http put it ---------------------------------


def call(method, path, body=None, headers=None, port=None, timeout=60):
    """(status, {lower-cased header: value}, body bytes) of one request on its own connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port or SERVER.port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def call_json(method, path, payload=None, headers=None, port=None):
    """(status, parsed JSON body or {}) of a request whose body is `payload` as JSON."""
    body = None if payload is None else json.dumps(payload).encode()
    all_headers = {"Content-Type": "application/json"} if body is not None else {}
    all_headers.update(headers or {})
    status, _, answer = call(method, path, body, all_headers, port)
    return status, json.loads(answer) if answer else {}


def error_of(body):
    try:
        return json.loads(body).get("error", "")
    except ValueError:
        return body.decode("utf-8", "replace")


class In:
    """An input as tritonclient's InferInput sends it: JSON or binary data, or shared memory."""

    def __init__(self, name, array, datatype, binary=True, shm=None):
        self.name, self.array, self.datatype, self.binary, self.shm = (
            name, array, datatype, binary, shm)


def infer(model, inputs, outputs=None, parameters=None, query="", headers=None, encode=None,
          accept=None, port=None, version=""):
    """tritonclient.http's infer(): `inputs` are In; `outputs` are (name, {parameters}) pairs
    (None: all outputs, asked for in binary as the client does). `encode` compresses the body
    ("gzip"/"deflate"), `accept` asks for a compressed answer. Returns harrier_client's
    InferResult (status, json, outputs as numpy, error)."""
    header = {"inputs": []}
    raw = []
    for i in inputs:
        entry = {"name": i.name, "shape": list(i.array.shape) if i.array is not None else i.shape,
                 "datatype": i.datatype}
        if i.shm is not None:
            region, size, offset = i.shm
            entry["parameters"] = {"shared_memory_region": region,
                                   "shared_memory_byte_size": size}
            if offset:
                entry["parameters"]["shared_memory_offset"] = offset
        elif i.binary:
            data = hc.to_raw(i.array, i.datatype)
            entry["parameters"] = {"binary_data_size": len(data)}
            raw.append(data)
        else:
            entry["data"] = hc.to_json_data(i.array, i.datatype)
        header["inputs"].append(entry)
    params = dict(parameters or {})
    if outputs is None:
        params.setdefault("binary_data_output", True)
    else:
        header["outputs"] = [{"name": n, "parameters": p} if p else {"name": n}
                             for n, p in outputs]
    if params:
        header["parameters"] = params
    head = json.dumps(header).encode()
    body = head + b"".join(raw)
    all_headers = {"Content-Type": "application/json"}
    if raw:
        all_headers["Inference-Header-Content-Length"] = str(len(head))
    if encode == "gzip":
        body = gzip.compress(body)
    elif encode == "deflate":
        body = zlib.compress(body)
    if encode:
        all_headers["Content-Encoding"] = encode
    if accept:
        all_headers["Accept-Encoding"] = accept
    all_headers.update(headers or {})
    path = "/v2/models/%s%s/infer%s" % (model, "/versions/" + version if version else "", query)
    status, got, answer = call("POST", path, body, all_headers, port)
    coding = got.get("content-encoding")
    if coding == "gzip":
        answer = gzip.decompress(answer)
    elif coding == "deflate":
        answer = zlib.decompress(answer)
    return hc.InferResult(status, got, answer)


def raw_infer(model, data, extra_headers=None):
    """http_test.py's _raw_binary_helper: Inference-Header-Content-Length: 0 and the bytes."""
    headers = {"Inference-Header-Content-Length": "0"}
    headers.update(extra_headers or {})
    return call("POST", "/v2/models/%s/infer" % model, data, headers)


def binary_tail(headers, body):
    return body[int(headers["inference-header-content-length"]):]


def strings(values):
    a = np.empty(len(values), dtype=np.object_)
    a[:] = [v if isinstance(v, bytes) else str(v).encode() for v in values]
    return a


def is_live(port=None):
    return call("GET", "/v2/health/live", port=port)[0] == 200


# ---- system shared memory, as tritonclient.utils.shared_memory makes it --------------------


def Region(key, size):  # noqa: N802 - reads as the class it makes
    """A shared-memory region's object (harness.ShmRegion), its key made unique to this run."""
    return harness.ShmRegion("/qahttp_%d_%s" % (os.getpid(), key.strip("/")), size)


def shm_register(name, region, size, port=None):
    return call_json("POST", "/v2/systemsharedmemory/region/%s/register" % name,
                     {"key": region.key, "offset": 0, "byte_size": size}, port=port)


def shm_unregister_all(port=None):
    for kind in ("systemsharedmemory", "cudasharedmemory"):
        status, body = call_json("POST", "/v2/%s/unregister" % kind, port=port)
        assert status == 200, (kind, status, body)


# ---- qa/L0_http/http_test.py ---------------------------------------------------------------


class HttpTest(unittest.TestCase):
    """qa/L0_http/http_test.py, class HttpTest (models as test.sh copies them)."""

    def raw_binary_helper(self, model, input_bytes, expected_output_bytes, extra_headers=None):
        status, headers, body = raw_infer(model, input_bytes, extra_headers)
        self.assertEqual(status, 200, body)
        self.assertEqual(binary_tail(headers, body), expected_output_bytes)

    def test_raw_binary(self):
        """http_test.py test_raw_binary: 8 raw floats to onnx_zero_1_float32 (batch 8, dims
        [-1]) come back as binary after the JSON header."""
        data = np.arange(8, dtype=np.float32).tobytes()
        self.raw_binary_helper("onnx_zero_1_float32", data, data)

    def test_raw_binary_longer(self):
        """http_test.py test_raw_binary_longer: the same with 32 floats."""
        data = np.arange(32, dtype=np.float32).tobytes()
        self.raw_binary_helper("onnx_zero_1_float32", data, data)

    def test_byte(self):
        """http_test.py test_byte: a raw body to a one-element BYTES input is that element;
        the answer is the element with its 4-byte length before it."""
        status, headers, body = raw_infer("onnx_zero_1_object_1_element", b"427")
        self.assertEqual(status, 200, body)
        self.assertEqual(binary_tail(headers, body)[4:].decode(), "427")

    def test_byte_too_many_elements(self):
        """http_test.py test_byte_too_many_elements: 400 in Triton's words."""
        status, _, body = raw_infer("onnx_zero_1_object", b"427")
        self.assertEqual(status, 400, body)
        self.assertIn("For BYTE datatype raw input 'INPUT0', the model must have input shape [1]",
                      body.decode())

    def test_multi_variable_dimensions(self):
        """http_test.py test_multi_variable_dimensions: dims [-1, -1] cannot be deduced."""
        status, _, body = raw_infer("onnx_zero_1_float16", np.ones([2, 2], np.float16).tobytes())
        self.assertEqual(status, 400, body)
        self.assertIn("The shape of the raw input 'INPUT0' can not be deduced because there are "
                      "more than one variable-sized dimension", body.decode())

    def test_multi_inputs(self):
        """http_test.py test_multi_inputs: a raw request to a model of three inputs."""
        status, _, body = raw_infer("onnx_zero_3_float32", np.arange(24, dtype=np.float32).tobytes())
        self.assertEqual(status, 400, body)
        self.assertIn("Raw request must only have 1 input (found 1) to be deduced but got 3 "
                      "inputs in", body.decode())

    def test_content_encoding_chunked_manually(self):
        """http_test.py test_content_encoding_chunked_manually: a body the caller chunked
        itself (Transfer-Encoding: chunked, one chunk) is read as the raw input."""
        data = np.arange(8, dtype=np.float32).tobytes()
        chunked = b"%X\r\n" % len(data) + data + b"\r\n0\r\n\r\n"
        with socket.create_connection(("127.0.0.1", SERVER.port), timeout=30) as s:
            s.sendall(b"POST /v2/models/onnx_zero_1_float32/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Inference-Header-Content-Length: 0\r\nTransfer-Encoding: chunked\r\n"
                      b"Connection: close\r\n\r\n" + chunked)
            response = b""
            while chunk := s.recv(65536):
                response += chunk
        head, _, body = response.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200"), response[:300])
        headers = {k.lower(): v.strip() for k, _, v in
                   (line.decode().partition(":") for line in head.split(b"\r\n")[1:])}
        self.assertEqual(binary_tail(headers, body), data)

    def test_descriptive_status_code(self):
        """http_test.py test_descriptive_status_code: onnx_zero_1_float32_queue holds one
        request for up to 1 s (max_queue_size 1); a second one meanwhile is 503."""
        data = np.arange(8, dtype=np.float32).tobytes()
        first = {}
        t = threading.Thread(target=lambda: first.update(r=raw_infer(
            "onnx_zero_1_float32_queue", data)))
        t.start()
        time.sleep(0.5)
        status, _, body = raw_infer("onnx_zero_1_float32_queue", data)
        t.join()
        self.assertEqual(status, 503, body)
        self.assertIn("Exceeds maximum queue size", error_of(body))
        self.assertEqual(first["r"][0], 200, first["r"][2])

    def test_buffer_size_overflow(self):
        """http_test.py test_buffer_size_overflow: element counts and byte sizes that overflow
        64 bits are 400 in Triton's words."""
        for shape, want in (([2 ** 4, 2 ** 60 + 2],
                             "causes total element count to exceed maximum size of"),
                            ([2 ** 2, 2 ** 60 + 2], "byte size overflow for input")):
            status, body = call_json("POST", "/v2/models/onnx_zero_1_float32/infer", {
                "inputs": [{"name": "INPUT0", "shape": shape, "datatype": "FP32",
                            "data": [1.0]}]})
            self.assertEqual(status, 400, (shape, body))
            self.assertIn(want, body["error"])

    def test_negative_dimensions(self):
        """http_test.py test_negative_dimensions: Triton's words; Harrier answers 400 where
        Triton answers 500 (a client's mistake is not a server error)."""
        status, body = call_json("POST", "/v2/models/onnx_zero_1_float32/infer", {
            "inputs": [{"name": "INPUT0", "shape": [2, -5], "datatype": "FP32", "data": [1.0]}]})
        self.assertEqual(status, 400, body)
        self.assertIn("Unable to parse 'shape': attempt to access JSON non-unsigned-integer as "
                      "unsigned-integer", body["error"])

    def test_loading_large_invalid_model(self):
        """http_test.py test_loading_large_invalid_model: a load request over the input size
        limit (Triton: a 2 GiB file override; here just over LIMIT_BYTES) is refused with the
        limit's words; Harrier's status is 413."""
        encoded = base64.b64encode(b"A" * (LIMIT_BYTES * 3 // 4 + 1024)).decode()
        status, body = call_json("POST", "/v2/repository/models/invalid_onnx/load", {
            "parameters": {"config": json.dumps({"backend": "onnxruntime"}),
                           "file:1/model.onnx": encoded}})
        self.assertEqual(status, 413, body)
        self.assertIn("JSON size exceeds the maximum allowed value", body["error"])

    def test_json_recursion_depth_limit(self):
        """http_test.py test_json_recursion_depth_limit: `data` nested 50 deep is flattened,
        120 deep is refused in Triton's words (its limit, 100)."""
        for datatype, value, model, depth, ok in (
                ("BYTES", '"hello"', "simple_identity", 120, False),
                ("BYTES", '"hello"', "simple_identity", 50, True),
                ("INT64", "123", "simple_identity_int64", 120, False),
                ("INT64", "123", "simple_identity_int64", 50, True)):
            with self.subTest(datatype=datatype, depth=depth):
                data = "[" * depth + value + "]" * depth
                body = ('{"inputs":[{"name":"INPUT0","datatype":"%s","shape":[1,1],"data":%s}]}'
                        % (datatype, data)).encode()
                status, _, answer = call("POST", "/v2/models/%s/infer" % model, body,
                                         {"Content-Type": "application/json"})
                if ok:
                    self.assertEqual(status, 200, answer)
                    self.assertEqual(json.loads(answer)["outputs"][0]["data"],
                                     [json.loads(value)])
                else:
                    self.assertNotEqual(status, 200)
                    self.assertIn("JSON nesting depth exceeds maximum allowed limit (100)",
                                  error_of(answer))

    def test_duplicate_output_names(self):
        """http_test.py test_duplicate_output_names: 400 in Triton's words, server still live."""
        status, body = call_json("POST", "/v2/models/onnx_zero_1_float32/infer", {
            "inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 8],
                        "data": [list(range(8))]}],
            "outputs": [{"name": "OUTPUT0"}, {"name": "OUTPUT0"}]})
        self.assertEqual(status, 400, body)
        self.assertIn("Duplicate output name 'OUTPUT0' is not allowed in a request",
                      body["error"])
        self.assertTrue(is_live())


# ---- qa/L0_http/http_input_size_limit_test.py ----------------------------------------------


ELEMENTS = LIMIT_BYTES // 4
OFFSET = 32


class InferSizeLimitTest(unittest.TestCase):
    """qa/L0_http/http_input_size_limit_test.py at --http-max-input-size LIMIT_BYTES (Triton's
    flag name). Harrier answers 413 where Triton answers 400; the words are Triton's."""

    def check_refused(self, status, body):
        self.assertEqual(status, 413, body[:300])
        self.assertIn("exceeds the maximum allowed value", error_of(body))

    def test_default_limit_raw_binary(self):
        """http_input_size_limit_test.py test_default_limit_raw_binary (and
        test_large_input_raw_binary: the same at a raised limit)."""
        status, _, body = raw_infer("onnx_zero_1_float32",
                                    np.ones(ELEMENTS + OFFSET, np.float32).tobytes())
        self.check_refused(status, body)
        small = np.ones(ELEMENTS - OFFSET, np.float32)
        status, headers, body = raw_infer("onnx_zero_1_float32", small.tobytes())
        self.assertEqual(status, 200, body[:300])
        self.assertTrue(np.array_equal(np.frombuffer(binary_tail(headers, body), np.float32),
                                       small))

    def test_default_limit_json(self):
        """http_input_size_limit_test.py test_default_limit_json (and test_large_input_json)."""
        def send(n):
            body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                           "shape": [1, n], "data": [1.0] * n}]}).encode()
            return body, call("POST", "/v2/models/onnx_zero_1_float32/infer", body,
                              {"Content-Type": "application/json"})
        _, (status, _, answer) = send(ELEMENTS + OFFSET)
        self.check_refused(status, answer)
        n = (ELEMENTS - OFFSET) * 4 // 5
        body, (status, _, answer) = send(n)
        self.assertLess(len(body), LIMIT_BYTES)
        self.assertEqual(status, 200, answer[:300])
        result = json.loads(answer)
        self.assertEqual(len(result["outputs"]), 1)
        self.assertEqual(result["outputs"][0]["shape"][1], n)

    def test_large_string_in_json(self):
        """http_input_size_limit_test.py test_large_string_in_json: one string over the limit
        (Triton: 2 GiB); the message names the JSON size and Triton's flag."""
        body = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [1, 1],
                                       "data": ["A" * (LIMIT_BYTES + 64)]}]}).encode()
        status, _, answer = call("POST", "/v2/models/simple_identity/infer", body,
                                 {"Content-Type": "application/json"})
        self.check_refused(status, answer)
        self.assertIn("Request JSON size", error_of(answer))
        self.assertIn("Use --http-max-input-size to increase the limit", error_of(answer))

    def test_default_limit_compressed(self):
        """http_input_size_limit_test.py test_default_limit_compressed (and
        test_large_input_compressed): the limit applies to the decompressed size."""
        def padded(target):
            text = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32",
                                           "shape": [1, 1000], "data": [1.0] * 1000}]}, indent=4)
            text = text[:-1] + " " * (target - len(text)) + text[-1]
            return gzip.compress(text.encode()), len(text)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        big, size = padded(LIMIT_BYTES + (1 << 20))
        self.assertGreater(size, LIMIT_BYTES)
        self.assertLess(len(big), LIMIT_BYTES)
        status, _, answer = call("POST", "/v2/models/onnx_zero_1_float32/infer", big, headers)
        self.check_refused(status, answer)
        small, size = padded(LIMIT_BYTES - (1 << 20))
        status, _, answer = call("POST", "/v2/models/onnx_zero_1_float32/infer", small, headers)
        self.assertEqual(status, 200, answer[:300])
        self.assertIn("outputs", json.loads(answer))


# ---- qa/L0_http/http_request_many_chunks.py, nested_json_crash.py ---------------------------


class ManyChunksTest(unittest.TestCase):
    """qa/L0_http/http_request_many_chunks.py: a million one-byte chunks (alloca-sized
    stack overflows in old Triton) get an ordinary answer."""

    CHUNKS = 1000000

    def send_chunked(self, request_line, extra=""):
        with socket.create_connection(("127.0.0.1", SERVER.port), timeout=120) as s:
            s.sendall(("%s\r\nHost: localhost\r\n%sContent-Type: application/octet-stream\r\n"
                       "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                       % (request_line, extra)).encode())
            try:
                s.sendall(b"1\r\nA\r\n" * self.CHUNKS + b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass  # answered before the whole body: the answer is still to be read
            response = b""
            try:
                while chunk := s.recv(65536):
                    response += chunk
            except ConnectionResetError:
                pass
        return response.decode("utf-8", "replace")

    def test_infer(self):
        """http_request_many_chunks.py test_infer: a raw request to `simple` (two inputs)."""
        response = self.send_chunked("POST /v2/models/simple/infer HTTP/1.1",
                                     "Inference-Header-Content-Length: 0\r\n")
        self.assertIn("Raw request must only have 1 input (found 1) to be deduced but got 2 "
                      "inputs in 'simple' model configuration", response)

    def test_json_endpoints(self):
        """http_request_many_chunks.py test_registry_index, test_model_control (load and
        unload), test_logging, test_system_shm_register, test_cuda_shm_register: each JSON
        endpoint refuses the body in Triton's words ("failed to parse the request JSON
        buffer"; the parser's own detail after them is Harrier's)."""
        for line in ("POST /v2/repository/index HTTP/1.1",
                     "POST /v2/repository/models/simple/load HTTP/1.1",
                     "POST /v2/repository/models/simple/unload HTTP/1.1",
                     "POST /v2/logging HTTP/1.1",
                     "POST /v2/systemsharedmemory/region/test_system_shm_register/register "
                     "HTTP/1.1",
                     "POST /v2/cudasharedmemory/region/test_cuda_shm_register/register HTTP/1.1"):
            with self.subTest(line):
                response = self.send_chunked(line)
                self.assertTrue(response.startswith("HTTP/1.1 400"), response[:300])
                self.assertIn("failed to parse the request JSON buffer", response)
        self.assertTrue(is_live())

    def test_trace_and_generate(self):
        """http_request_many_chunks.py test_trace, test_generate: Harrier has no trace API
        (404) and `simple` is not a generative model; the server answers and stays up."""
        for line in ("POST /v2/models/simple/trace/setting HTTP/1.1",
                     "POST /v2/models/simple/generate HTTP/1.1"):
            with self.subTest(line):
                response = self.send_chunked(line)
                self.assertRegex(response, r"^HTTP/1.1 4\d\d", response[:300])
        self.assertTrue(is_live())


class NestedJsonCrashTest(unittest.TestCase):
    """qa/L0_http/nested_json_crash.py: 150000 levels of `data` nesting get an answer (no
    crash, no timeout), and the server stays up."""

    def test_nested_json_crash(self):
        depth = 150000
        body = ('{"inputs": [{"name": "INPUT0", "shape": [1], "datatype": "INT32", "data": %s}]}'
                % ("[" * depth + "1" + "]" * depth)).encode()
        status, _, answer = call("POST", "/v2/models/simple_identity/infer", body,
                                 {"Content-Type": "application/json"}, timeout=10)
        self.assertEqual(status, 400, answer[:300])
        self.assertIn("JSON nesting depth exceeds maximum allowed limit (100)", error_of(answer))
        self.assertTrue(is_live())


# ---- qa/L0_http/python_http_aio_test.py --------------------------------------------------


class HttpAioClientTest(unittest.TestCase):
    """qa/L0_http/python_http_aio_test.py, TestHttpAioClient: each call tritonclient.http.aio
    makes, against the main server (model control mode none)."""

    def test_is_server_live(self):
        self.assertTrue(is_live())

    def test_is_server_ready(self):
        self.assertEqual(call("GET", "/v2/health/ready")[0], 200)

    def test_is_model_ready(self):
        self.assertEqual(call("GET", "/v2/models/simple/ready")[0], 200)

    def test_get_server_metadata(self):
        """Triton's test expects the name "triton"; Harrier names itself (a documented
        difference, docs/triton-compatibility.md)."""
        status, body = call_json("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertEqual(body["name"], "harrier")

    def test_get_model_metadata(self):
        status, body = call_json("GET", "/v2/models/simple")
        self.assertEqual((status, body["name"]), (200, "simple"))

    def test_get_model_config(self):
        status, body = call_json("GET", "/v2/models/simple/config")
        self.assertEqual((status, body["name"]), (200, "simple"))

    def test_get_model_repository_index(self):
        """Triton counts its 7 models; here every model directory of the repository."""
        status, body = call_json("POST", "/v2/repository/index", {})
        self.assertEqual(status, 200)
        self.assertEqual(sorted(m["name"] for m in body), sorted(os.listdir(REPO)))

    def test_load_model(self):
        status, body = call_json("POST", "/v2/repository/models/simple/load", {})
        self.assertNotEqual(status, 200)
        self.assertIn("explicit model load / unload is not allowed if polling is enabled",
                      body["error"])

    def test_unload_model(self):
        status, body = call_json("POST", "/v2/repository/models/simple/unload", {})
        self.assertNotEqual(status, 200)
        self.assertIn("explicit model load / unload is not allowed if polling is enabled",
                      body["error"])

    def test_get_inference_statistics(self):
        status, body = call_json("GET", "/v2/models/stats")
        self.assertEqual(status, 200)
        self.assertIn("model_stats", body)

    def test_system_shared_memory(self):
        """test_get_system_shared_memory_status, test_register_system_shared_memory (an
        empty name and key fail), test_unregister_system_shared_memory."""
        self.assertEqual(call("GET", "/v2/systemsharedmemory/status")[0], 200)
        status, _ = call_json("POST", "/v2/systemsharedmemory/region//register",
                              {"key": "", "offset": 0, "byte_size": 0})
        self.assertGreaterEqual(status, 400)
        self.assertEqual(call("POST", "/v2/systemsharedmemory/unregister")[0], 200)

    def test_cuda_shared_memory(self):
        """test_get_cuda_shared_memory_status, test_register_cuda_shared_memory (fails: no
        GPU here, and an empty handle in Triton), test_unregister_cuda_shared_memory."""
        status, body = call_json("GET", "/v2/cudasharedmemory/status")
        self.assertEqual((status, body), (200, []))
        status, _ = call_json("POST", "/v2/cudasharedmemory/region//register",
                              {"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 0})
        self.assertGreaterEqual(status, 400)
        self.assertEqual(call("POST", "/v2/cudasharedmemory/unregister")[0], 200)


# ---- qa/L0_http/test.sh: the curl cases ---------------------------------------------------


ONES_TO_16 = list(range(1, 17))
SUMS = "[2,4,6,8,10,12,14,16,18,20,22,24,26,28,30,32]"
ZEROS = "[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]"


class CurlTest(unittest.TestCase):
    """qa/L0_http/test.sh, "Test combinations of binary and JSON data": curl's bodies to
    `simple` and the grep -c checks on the answer's text (JSON data present or absent)."""

    def curl(self, parameters=None, outputs=None, inputs=("INPUT0", "INPUT1"), data=ONES_TO_16):
        req = {"inputs": [{"name": n, "datatype": "INT32", "shape": [1, 16], "data": data}
                          for n in inputs]}
        if parameters is not None:
            req["parameters"] = parameters
        if outputs is not None:
            req["outputs"] = outputs
        # curl -d: no Content-Type of JSON (application/x-www-form-urlencoded).
        status, _, body = call("POST", "/v2/models/simple/infer",
                               json.dumps(req, separators=(",", ":")).encode(),
                               {"Content-Type": "application/x-www-form-urlencoded"})
        return status, body.decode("utf-8", "replace")

    def check(self, status, text, sums, zeros):
        self.assertEqual(status, 200, text)
        self.assertEqual(text.count(SUMS), sums, text)
        self.assertEqual(text.count(ZEROS), zeros, text)

    def test_binary_and_json_combinations(self):
        """no parameters, no outputs: JSON; binary_data true/false per output; binary_data
        true with the other output unspecified; binary_data_output with no outputs; and
        binary_data_output overridden by binary_data false."""
        self.check(*self.curl(), 1, 1)
        self.check(*self.curl(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                                       {"name": "OUTPUT1",
                                        "parameters": {"binary_data": False}}]), 0, 1)
        self.check(*self.curl(outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                                       {"name": "OUTPUT1"}]), 0, 1)
        self.check(*self.curl(parameters={"binary_data_output": True}), 0, 0)
        self.check(*self.curl(parameters={"binary_data_output": True},
                              outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": False}},
                                       {"name": "OUTPUT1"}]), 1, 1)

    def test_data_that_misaligns_with_the_shape(self):
        """15 and 18 values for a [1,16] input: Triton's message starts the error (Harrier's
        detail follows, so the body is not Triton's byte for byte); then the server still
        answers a good request."""
        for data in (ONES_TO_16[:15], ONES_TO_16 + [17, 18]):
            status, text = self.curl(inputs=("INPUT0",), data=data)
            self.assertNotEqual(status, 200)
            self.assertTrue(json.loads(text)["error"].startswith(
                "Unable to parse 'data': Shape does not match true shape of 'data' field"), text)
        self.check(*self.curl(), 1, 1)

    def test_base_path_url(self):
        """test.sh "Test with the base path in url": simple_http_infer_client.py -u
        localhost:8000/base_path must fail (POST /base_path/v2/models/simple/infer)."""
        status, _, _ = call("POST", "/base_path/v2/models/simple/infer", b"{}",
                            {"Content-Type": "application/json"})
        self.assertEqual(status, 404)


# ---- qa/L0_http/http_restricted_api_test.py and test.sh's restricted-API starts -----------


class RestrictedApiTest(unittest.TestCase):
    """qa/L0_http/http_restricted_api_test.py RestrictedAPITest, against a server of its own
    started as test.sh starts Triton; and test.sh's two restrictions that stop the start."""

    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Harrier(
            ARGS.harrier, REPO, os.path.join(ARGS.work_dir, "restricted.log"),
            ["--http-restricted-api", "model-repository:admin-key=admin-value",
             "--http-restricted-api", "inference,metadata:infer-key=infer-value"])

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            assert cls.server.terminate() == 0

    def test_sanity(self):
        """test_sanity: statistics are not restricted, with or without a header."""
        for headers in ({}, {"infer-key": "infer-value"}):
            status, _, body = call("GET", "/v2/models/simple/stats", None, headers,
                                   self.server.port)
            self.assertEqual(status, 200, body)

    def test_model_repository(self):
        """test_model_repository: the wrong header is refused in Triton's words; the right
        one reaches the call (which mode none refuses)."""
        status, body = call_json("POST", "/v2/repository/models/simple/unload", {},
                                 {"infer-key": "infer-value"}, self.server.port)
        self.assertEqual(status, 403, body)
        self.assertIn("This API is restricted", body["error"])
        status, body = call_json("POST", "/v2/repository/models/simple/unload", {},
                                 {"admin-key": "admin-value"}, self.server.port)
        self.assertIn("explicit model load / unload is not allowed", body["error"])

    def test_infer(self):
        """test_infer: without infer-key refused, with it answered."""
        ones = np.ones((1, 16), np.int32)
        inputs = [In("INPUT0", ones, "INT32"), In("INPUT1", ones, "INT32")]
        result = infer("simple", inputs, headers={"test": "1"}, port=self.server.port)
        self.assertEqual(result.status, 403)
        self.assertIn("This API is restricted", result.error)
        result = infer("simple", inputs, headers={"infer-key": "infer-value"},
                       port=self.server.port)
        self.assertEqual(result.status, 200, result.error)
        self.assertTrue(np.array_equal(result.outputs["OUTPUT0"], ones * 2))

    def start_fails(self, *restrictions):
        args = [ARGS.harrier, "serve", "--model-repository", REPO, "--http-port", "0",
                "--grpc-port", "0", "--metrics-port", "0"]
        for r in restrictions:
            args += ["--http-restricted-api", r]
        r = subprocess.run(args, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        return r.stdout + r.stderr

    def test_repeated_api_stops_the_start(self):
        """test.sh "Repeated API not allowed": health in two groups."""
        out = self.start_fails("model-repository,health:k1=v1", "metadata,health:k2=v2")
        self.assertIn("api 'health' can not be specified in multiple config groups", out)

    def test_unknown_api_stops_the_start(self):
        """test.sh "Unknown API not allowed"."""
        out = self.start_fails("model-reposit,health:k1=v1", "metadata,health:k2=v2")
        self.assertIn("unknown restricted api 'model-reposit'", out)


# ---- the client examples (triton-inference-server/client src/python/examples) ------------


def simple_inputs(binary0=False, binary1=True, in1=None):
    in0 = np.arange(16, dtype=np.int32).reshape(1, 16)
    in1 = np.full((1, 16), -1, np.int32) if in1 is None else in1
    return in0, in1, [In("INPUT0", in0, "INT32", binary0), In("INPUT1", in1, "INT32", binary1)]


class ClientExamplesTest(unittest.TestCase):
    """The HTTP examples of triton-inference-server/client src/python/examples, as
    tritonclient.http sends them (qa/L0_http/test.sh runs them against Triton)."""

    def check_simple(self, result, in0, in1):
        self.assertEqual(result.status, 200, result.error)
        self.assertTrue(np.array_equal(result.outputs["OUTPUT0"], in0 + in1))
        self.assertTrue(np.array_equal(result.outputs["OUTPUT1"], in0 - in1))

    def test_simple_http_infer_client(self):
        """simple_http_infer_client.py: INPUT0 JSON, INPUT1 binary; OUTPUT0 binary, OUTPUT1
        JSON; query parameters test_1=1&test_2=2; statistics of one model; the same with no
        outputs named; a wrong model name "Request for unknown model". test.sh also runs the
        C++ client with -H test:1, and both compressions."""
        in0, in1, inputs = simple_inputs()
        outputs = [("OUTPUT0", {"binary_data": True}), ("OUTPUT1", {"binary_data": False})]
        for encode, accept in ((None, None), ("gzip", "gzip"), ("deflate", "deflate")):
            with self.subTest(compression=encode):
                result = infer("simple", inputs, outputs, query="?test_1=1&test_2=2",
                               headers={"test": "1"}, encode=encode, accept=accept)
                self.check_simple(result, in0, in1)
                self.assertIn("binary_data_size", result.json["outputs"][0]["parameters"])
                self.assertIn("data", result.json["outputs"][1])
        status, stats = call_json("GET", "/v2/models/simple/stats")
        self.assertEqual(status, 200)
        self.assertEqual(len(stats["model_stats"]), 1)
        self.check_simple(infer("simple", inputs, None, query="?test_1=1&test_2=2"), in0, in1)
        result = infer("wrong_model_name", inputs, outputs)
        self.assertNotEqual(result.status, 200)
        self.assertTrue(result.error.startswith("Request for unknown model"), result.error)

    def test_simple_http_async_infer_client(self):
        """simple_http_async_infer_client.py and simple_http_aio_infer_client.py: requests
        in flight together (concurrency 2; aio's gather of a named-outputs and a no-outputs
        request), each answered right."""
        in0, in1, inputs = simple_inputs(True, True, np.ones((1, 16), np.int32))
        results = [None] * 4
        outputs = [("OUTPUT0", {"binary_data": True}), ("OUTPUT1", {"binary_data": True})]

        def run(i):
            results[i] = infer("simple", inputs, outputs if i % 2 == 0 else None)
        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in results:
            self.check_simple(r, in0, in1)

    def test_simple_http_health_metadata(self):
        """simple_http_health_metadata.py (and its aio twin): live (with query parameters),
        ready, model ready, server and model metadata, an unknown model's metadata. The
        server's name is "harrier", not "triton" (a documented difference)."""
        self.assertEqual(call("GET", "/v2/health/live?test_1=1&test_2=2")[0], 200)
        self.assertEqual(call("GET", "/v2/health/ready")[0], 200)
        self.assertEqual(call("GET", "/v2/models/simple/ready")[0], 200)
        self.assertEqual(call_json("GET", "/v2")[1]["name"], "harrier")
        status, meta = call_json("GET", "/v2/models/simple?test_1=1&test_2=2")
        self.assertEqual((status, meta["name"]), (200, "simple"))
        status, body = call_json("GET", "/v2/models/wrong_model_name")
        self.assertNotEqual(status, 200)
        self.assertIn("Request for unknown model", body["error"])

    def test_simple_http_string_infer_client(self):
        """simple_http_string_infer_client.py (and aio): simple_string on decimal strings
        (INPUT0 binary, INPUT1 JSON; OUTPUT0 binary, OUTPUT1 JSON); simple_identity on
        strings with an embedded NUL and on 4-byte blobs, binary and JSON."""
        in0 = np.arange(16, dtype=np.int32).reshape(1, 16)
        in1 = np.ones((1, 16), np.int32)
        result = infer("simple_string",
                       [In("INPUT0", strings(in0.reshape(-1)).reshape(1, 16), "BYTES", True),
                        In("INPUT1", strings(in1.reshape(-1)).reshape(1, 16), "BYTES", False)],
                       [("OUTPUT0", {"binary_data": True}), ("OUTPUT1", {"binary_data": False})])
        self.assertEqual(result.status, 200, result.error)
        self.assertEqual([int(v) for v in result.outputs["OUTPUT0"].reshape(-1)],
                         list((in0 + in1).reshape(-1)))
        self.assertEqual([int(v) for v in result.outputs["OUTPUT1"].reshape(-1)],
                         list((in0 - in1).reshape(-1)))
        for values in ([b"he\x00llo"] * 16, [b"\x00\x01\x02\x03"] * 16):
            array = strings(values).reshape(1, 16)
            for binary in (True, False):
                with self.subTest(value=values[0], binary=binary):
                    result = infer("simple_identity", [In("INPUT0", array, "BYTES", binary)],
                                   [("OUTPUT0", {"binary_data": binary})])
                    self.assertEqual(result.status, 200, result.error)
                    self.assertEqual(list(result.outputs["OUTPUT0"].reshape(-1)), values)

    def test_simple_http_shm_client(self):
        """simple_http_shm_client.py (and aio): both inputs in one system shared-memory
        region, both outputs in another; status lists them; unregister all."""
        shm_unregister_all()
        in0 = np.arange(16, dtype=np.int32)
        in1 = np.ones(16, np.int32)
        size = in0.nbytes
        out_region, in_region = Region("output_simple", size * 2), Region("input_simple", size * 2)
        try:
            self.assertEqual(shm_register("output_data", out_region, size * 2)[0], 200)
            in_region.write(in0.tobytes())
            in_region.write(in1.tobytes(), size)
            self.assertEqual(shm_register("input_data", in_region, size * 2)[0], 200)
            inputs = [In("INPUT0", None, "INT32", shm=("input_data", size, 0)),
                      In("INPUT1", None, "INT32", shm=("input_data", size, size))]
            for i in inputs:
                i.shape = [1, 16]
            result = infer("simple", inputs, [
                ("OUTPUT0", {"binary_data": True, "shared_memory_region": "output_data",
                             "shared_memory_byte_size": size}),
                ("OUTPUT1", {"binary_data": True, "shared_memory_region": "output_data",
                             "shared_memory_byte_size": size, "shared_memory_offset": size})])
            self.assertEqual(result.status, 200, result.error)
            for o in result.json["outputs"]:
                self.assertEqual((o["datatype"], o["shape"]), ("INT32", [1, 16]))
            self.assertTrue(np.array_equal(np.frombuffer(out_region.read(size), np.int32),
                                           in0 + in1))
            self.assertTrue(np.array_equal(np.frombuffer(out_region.read(size, size), np.int32),
                                           in0 - in1))
            status, regions = call_json("GET", "/v2/systemsharedmemory/status")
            self.assertEqual(sorted(r["name"] for r in regions), ["input_data", "output_data"])
        finally:
            shm_unregister_all()
            in_region.destroy()
            out_region.destroy()

    def test_simple_http_shm_string_client(self):
        """simple_http_shm_string_client.py (and aio): serialized BYTES tensors in four
        regions, simple_string's answers written into the output regions."""
        shm_unregister_all()
        in0 = np.arange(16, dtype=np.int32)
        in1 = np.ones(16, np.int32)
        ser = lambda a: hc.to_raw(strings(a), "BYTES")  # noqa: E731
        data = {"input0": ser(in0), "input1": ser(in1), "output0": ser(in0 + in1),
                "output1": ser(in0 - in1)}
        regions = {k: Region(k + "_simple", len(v)) for k, v in data.items()}
        try:
            for k, region in regions.items():
                if k.startswith("input"):
                    region.write(data[k])
                self.assertEqual(shm_register(k + "_data", region, len(data[k]))[0], 200)
            inputs = [In("INPUT0", None, "BYTES", shm=("input0_data", len(data["input0"]), 0)),
                      In("INPUT1", None, "BYTES", shm=("input1_data", len(data["input1"]), 0))]
            for i in inputs:
                i.shape = [1, 16]
            result = infer("simple_string", inputs, [
                ("OUTPUT%d" % n, {"binary_data": True,
                                  "shared_memory_region": "output%d_data" % n,
                                  "shared_memory_byte_size": len(data["output%d" % n])})
                for n in (0, 1)])
            self.assertEqual(result.status, 200, result.error)
            for n in (0, 1):
                got = regions["output%d" % n].read(len(data["output%d" % n]))
                self.assertEqual(got, data["output%d" % n])
        finally:
            shm_unregister_all()
            for region in regions.values():
                region.destroy()

    def test_reuse_infer_objects_client(self):
        """reuse_infer_objects_client.py (HTTP): the same inputs and outputs alternately in
        shared memory and not (binary by default), three requests."""
        shm_unregister_all()
        in0 = np.arange(16, dtype=np.int32)
        in1 = np.ones(16, np.int32)
        size = in0.nbytes
        regions = {n: Region(n + "_simple", size) for n in ("output0", "output1", "input0",
                                                           "input1")}
        try:
            regions["input0"].write(in0.tobytes())
            regions["input1"].write(in1.tobytes())
            for n, region in regions.items():
                self.assertEqual(shm_register(n + "_data", region, size)[0], 200)
            for use_shm in (True, False, True):
                if use_shm:
                    a, b = in0, in1
                    inputs = [In("INPUT0", None, "INT32", shm=("input0_data", size, 0)),
                              In("INPUT1", None, "INT32", shm=("input1_data", size, 0))]
                    for i in inputs:
                        i.shape = [1, 16]
                    outputs = [("OUTPUT%d" % n, {"binary_data": True,
                                                 "shared_memory_region": "output%d_data" % n,
                                                 "shared_memory_byte_size": size})
                               for n in (0, 1)]
                else:
                    a, b = in0, in1 * 2
                    inputs = [In("INPUT0", a.reshape(1, 16), "INT32"),
                              In("INPUT1", b.reshape(1, 16), "INT32")]
                    outputs = [("OUTPUT0", {"binary_data": True}),
                               ("OUTPUT1", {"binary_data": True})]
                result = infer("simple", inputs, outputs)
                self.assertEqual(result.status, 200, result.error)
                if use_shm:
                    sums = np.frombuffer(regions["output0"].read(size), np.int32)
                    diffs = np.frombuffer(regions["output1"].read(size), np.int32)
                else:
                    sums = result.outputs["OUTPUT0"].reshape(-1)
                    diffs = result.outputs["OUTPUT1"].reshape(-1)
                self.assertTrue(np.array_equal(sums, a + b), use_shm)
                self.assertTrue(np.array_equal(diffs, a - b), use_shm)
        finally:
            shm_unregister_all()
            for region in regions.values():
                region.destroy()

    def test_image_client(self):
        """image_client.py's HTTP path (sync and -a async), with a small NCHW classifier in
        place of Triton's inception_graphdef: the metadata and config checks of parse_model,
        one image batched, classification with class_count 3, answered "value:index:label"
        from the model's label_filename, the three fields the client prints."""
        status, meta = call_json("GET", "/v2/models/image_nchw")
        self.assertEqual(status, 200)
        status, config = call_json("GET", "/v2/models/image_nchw/config")
        self.assertEqual(status, 200)
        self.assertEqual((len(meta["inputs"]), len(meta["outputs"]), len(config["input"])),
                         (1, 1, 1))
        self.assertEqual(meta["outputs"][0]["datatype"], "FP32")
        self.assertEqual(config["max_batch_size"], 8)
        self.assertEqual(len(meta["inputs"][0]["shape"]), 4)  # 3 + the batch dimension
        self.assertEqual(config["input"][0]["format"], "FORMAT_NCHW")
        c, h, w = meta["inputs"][0]["shape"][1:]
        # preprocess(): an RGB image scaled INCEPTION-style, HWC -> CHW, batched.
        rng = np.random.default_rng(7)
        pixels = rng.integers(0, 256, size=(h, w, c)).astype(np.float32)
        image = np.transpose(pixels / 127.5 - 1, (2, 0, 1))[np.newaxis].astype(np.float32)
        expected = image.mean(axis=(2, 3)) @ np.array([[1, 0, 0, .5], [0, 1, 0, .5],
                                                       [0, 0, 1, -1]], np.float32)
        order = np.argsort(-expected[0])[:3]
        for run in range(2):  # sync, then async (-a): the same request, its id
            result = infer("image_nchw", [In("INPUT", image, "FP32")],
                           [("OUTPUT", {"binary_data": True, "classification": 3})],
                           parameters=None)
            self.assertEqual(result.status, 200, result.error)
            classes = [v.decode().split(":") for v in result.outputs["OUTPUT"].reshape(-1)]
            self.assertEqual([int(i) for _, i, _ in classes], list(order), run)
            self.assertTrue(np.allclose([float(v) for v, _, _ in classes], expected[0][order],
                                        atol=1e-4))
            labels = ["RED", "GREEN", "BLUE", "BRIGHT"]  # image_nchw/labels.txt
            self.assertEqual([label for _, _, label in classes], [labels[i] for i in order])


class ModelControlTest(unittest.TestCase):
    """simple_http_model_control.py and simple_http_aio_model_control.py against a server in
    explicit mode (test.sh's second and third servers), and test.sh's check of the server log
    for "Invalid config override"."""

    def test_simple_http_model_control(self):
        server = harness.Harrier(ARGS.harrier, REPO,
                                 os.path.join(ARGS.work_dir, "explicit.log"),
                                 # --id triton: the name simple_http_health_metadata.py
                                 # checks for.
                                 ["--model-control-mode", "explicit", "--id", "triton"])
        try:
            port = server.port
            self.assertEqual(call_json("GET", "/v2", port=port)[1]["name"], "triton")
            status, index = call_json("POST", "/v2/repository/index", {}, port=port)
            self.assertEqual(status, 200)
            self.assertEqual(len(index), len(os.listdir(REPO)))  # Triton's repository: 7
            status, body = call_json("POST", "/v2/repository/models/simple/load", {}, port=port)
            self.assertEqual(status, 200, body)
            self.assertEqual(call("GET", "/v2/models/simple/ready", port=port)[0], 200)
            # A config override that is not JSON: "failed to load", and the log says why.
            bad = '"parameters": {"config": {{"max_batch_size": "16"}}}'
            status, body = call_json("POST", "/v2/repository/models/simple/load",
                                     {"parameters": {"config": bad}}, port=port)
            self.assertNotEqual(status, 200)
            self.assertIn("failed to load", body["error"])
            self.assertIn("Invalid config override", server.log_text())
            # The right form (an int64 as a JSON string, as protobuf's JSON allows).
            status, body = call_json("POST", "/v2/repository/models/simple/load",
                                     {"parameters": {"config": '{"max_batch_size":"16"}'}},
                                     port=port)
            self.assertEqual(status, 200, body)
            status, config = call_json("GET", "/v2/models/simple/config", port=port)
            self.assertEqual(config["max_batch_size"], 16)
            status, body = call_json("POST", "/v2/repository/models/simple/unload", {},
                                     port=port)
            self.assertEqual(status, 200, body)
            self.assertNotEqual(call("GET", "/v2/models/simple/ready", port=port)[0], 200)
            status, body = call_json("POST", "/v2/repository/models/wrong_model_name/load", {},
                                     port=port)
            self.assertNotEqual(status, 200)
            self.assertIn("failed to load", body["error"])
        finally:
            self.assertEqual(server.terminate(), 0)


def main():
    global ARGS, REPO, hc
    ARGS = harness.parse_args(__doc__)
    import harrier_client  # tools/, on sys.path once parse_args ran
    hc = harrier_client

    def start():
        global SERVER, REPO
        REPO = os.path.join(ARGS.work_dir, "repo")
        harness.generate_repository(ARGS.source_dir, REPO, ["make_triton_models.py"])
        SERVER = harness.Harrier(ARGS.harrier, REPO, os.path.join(ARGS.work_dir, "harrier.log"),
                                 ["--allow-client-shm", "true",
                                  "--http-max-input-size", str(LIMIT_BYTES)])
        return SERVER

    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(c) for c in (
        HttpTest, InferSizeLimitTest, ManyChunksTest, NestedJsonCrashTest, HttpAioClientTest,
        CurlTest, RestrictedApiTest, ClientExamplesTest, ModelControlTest)])
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
