#!/usr/bin/python3
"""Harrier's integration tests: the real `harrier` binary on free ports, real clients.

usage: /usr/bin/python3 tests/integration/run.py --harrier BUILD/harrier --source-dir SRC \
           --work-dir DIR [-k PATTERN] [-v]

Builds a model repository in DIR/repo (tools/make_test_models.py, tools/make_example_models.py,
plus a `corrupt` model whose model.onnx is garbage), starts harrier on a free port with short
read timeouts, and checks every endpoint, every data type in JSON and binary form, the bad-input
list (each answered with its 4xx, after which the server still serves), curl as a client, and
shutdown on SIGTERM. Python stdlib + numpy only (run with /usr/bin/python3). The last line is
"N passed, N failed"; the exit status is non-zero when anything failed.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import weakref

import numpy as np

ARGS = None     # parsed command line
SERVER = None   # the shared HarrierProcess
REPO = None     # the model repository directory
HEADER_TIMEOUT_SECS = 1.0
BODY_TIMEOUT_SECS = 1.0


# ---- Process and socket helpers -----------------------------------------------------------

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RawResponse:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return "RawResponse(%d, %r)" % (self.status, self.body[:300])


_PENDING = weakref.WeakKeyDictionary()  # socket -> bytes read past the last response


def read_response(sock, skip_continue=True):
    """One Content-Length framed response from `sock`, or None if the server closed first.
    Bytes of later (pipelined) responses are kept for the next call."""
    buf = _PENDING.pop(sock, b"")
    while True:
        while b"\r\n\r\n" not in buf:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status == 100 and skip_continue:
            buf = rest
            continue
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, socket.timeout):
                return None
            if not chunk:
                return None
            rest += chunk
        _PENDING[sock] = rest[length:]
        return RawResponse(status, headers, rest[:length])


def connect(port, timeout=10.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def raw_request(port, data, shutdown_write=False, timeout=10.0):
    with connect(port, timeout) as s:
        try:
            s.sendall(data)
            if shutdown_write:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered early and closed; read what it said
        return read_response(s)


def wait_closed(sock, timeout):
    """True when the server closes `sock` within `timeout` seconds (data is discarded)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    return False


def http_request(method, target, body=b"", headers=None):
    """Bytes of one HTTP/1.1 request with a Content-Length body."""
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: harrier"]
    for k, v in (headers or {}).items():
        lines.append("%s: %s" % (k, v))
    lines.append("Content-Length: %d" % len(body))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HarrierProcess:
    """harrier serve on free ports, logging to a file in the work dir."""

    def __init__(self, name, extra_args=()):
        self.port = free_port()
        self.log_path = os.path.join(ARGS.work_dir, name + ".log")
        self.log = open(self.log_path, "wb")
        cmd = [ARGS.harrier, "serve", "--model-repository", REPO,
               "--http-port", str(self.port), "--grpc-port", str(free_port()),
               "--metrics-port", str(free_port()), "--log-verbose", "1"] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_live(self, timeout=120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("harrier exited with %s during startup:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            try:
                r = raw_request(self.port, http_request("GET", "/v2/health/live"), timeout=2)
                if r is not None and r.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("harrier did not become live in %ds:\n%s" % (timeout, self.log_tail()))

    def log_tail(self, lines=40):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")

    def terminate(self, sig=signal.SIGTERM, timeout=60.0):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def client(port=None):
    import harrier_client  # from SRC/tools, put on sys.path in main()
    return harrier_client.Client("127.0.0.1", port or SERVER.port, timeout=30)


SIMPLE_A = np.arange(16, dtype=np.int32).reshape(1, 16)
SIMPLE_B = np.full((1, 16), 3, dtype=np.int32)


def simple_json(**overrides):
    doc = {"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": SIMPLE_A.ravel().tolist()},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": SIMPLE_B.ravel().tolist()},
    ]}
    doc.update(overrides)
    return doc


class HarrierTestCase(unittest.TestCase):
    def assert_still_serves(self):
        """A good request on a fresh connection gets the right answer."""
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B})
        self.assertEqual(r.status, 200, r.raw[:300])
        np.testing.assert_array_equal(r.outputs["OUTPUT0"], SIMPLE_A + SIMPLE_B)
        np.testing.assert_array_equal(r.outputs["OUTPUT1"], SIMPLE_A - SIMPLE_B)

    def assert_error(self, response, status, contains=None):
        self.assertIsNotNone(response, "the server closed without answering")
        self.assertEqual(response.status, status, response.body[:500])
        doc = json.loads(response.body)
        self.assertIsInstance(doc.get("error"), str, response.body[:500])
        if contains:
            self.assertIn(contains, doc["error"])

    def post_infer(self, model, body, headers=None, **kwargs):
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return raw_request(SERVER.port, http_request("POST", "/v2/models/%s/infer" % model,
                                                     body, h), **kwargs)


# ---- Endpoints ------------------------------------------------------------------------------

class EndpointTests(HarrierTestCase):
    def test_health_live(self):
        r = raw_request(SERVER.port, http_request("GET", "/v2/health/live"))
        self.assertEqual(r.status, 200)
        self.assertEqual(r.body, b"")

    def test_health_ready_is_503_with_a_corrupt_model(self):
        # The repository holds `corrupt`, so the server as a whole is not ready.
        r = raw_request(SERVER.port, http_request("GET", "/v2/health/ready"))
        self.assertEqual(r.status, 503)

    def test_server_metadata(self):
        status, doc = client().server_metadata()
        self.assertEqual(status, 200)
        self.assertEqual(doc["name"], "harrier")
        version = subprocess.run([ARGS.harrier, "--version"], capture_output=True, text=True)
        self.assertEqual(version.stdout.strip(), "harrier " + doc["version"])
        self.assertIn("binary_tensor_data", doc["extensions"])
        self.assertIn("classification", doc["extensions"])

    def test_model_metadata(self):
        for version in (None, 1):
            status, doc = client().model_metadata("simple", version)
            self.assertEqual(status, 200, doc)
            self.assertEqual(doc["name"], "simple")
            self.assertEqual(doc["versions"], ["1"])
            self.assertEqual(doc["platform"], "onnxruntime_onnx")
            self.assertEqual([(i["name"], i["datatype"], i["shape"]) for i in doc["inputs"]],
                             [("INPUT0", "INT32", [1, 16]), ("INPUT1", "INT32", [1, 16])])
            self.assertEqual([o["name"] for o in doc["outputs"]], ["OUTPUT0", "OUTPUT1"])

    def test_model_metadata_of_auto_completed_batching_model(self):
        status, doc = client().model_metadata("identity_fp32")
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["inputs"][0]["shape"], [-1, -1])

    def test_model_ready(self):
        c = client()
        self.assertEqual(c.model_ready("simple"), 200)
        self.assertEqual(c.model_ready("simple", 1), 200)
        self.assertEqual(c.model_ready("no_such_model"), 404)
        self.assertEqual(c.model_ready("simple", 7), 404)
        self.assertEqual(c.model_ready("corrupt"), 503)

    def test_model_config(self):
        status, doc = client().model_config("simple")
        self.assertEqual(status, 200, doc)
        self.assertEqual(doc["name"], "simple")
        self.assertEqual(int(doc.get("max_batch_size", 0)), 0)
        self.assertEqual([i["name"] for i in doc["input"]], ["INPUT0", "INPUT1"])

    def test_statistics(self):
        c = client()
        self.assert_still_serves()
        status, doc = c.model_stats("simple")
        self.assertEqual(status, 200, doc)
        stats = doc["model_stats"][0]
        self.assertEqual(stats["name"], "simple")
        self.assertGreaterEqual(int(stats["inference_count"]), 1)
        self.assertGreaterEqual(int(stats["inference_stats"]["success"]["count"]), 1)
        status, doc = c.model_stats()
        self.assertEqual(status, 200)
        self.assertIn("simple", [s["name"] for s in doc["model_stats"]])

    def test_repository_index(self):
        status, doc = client().repository_index()
        self.assertEqual(status, 200, doc)
        rows = {row["name"]: row for row in doc}
        self.assertEqual(rows["simple"]["state"], "READY")
        self.assertEqual(rows["identity_fp32"]["state"], "READY")
        self.assertEqual(rows["corrupt"]["state"], "UNAVAILABLE")
        self.assertIn("model.onnx", rows["corrupt"]["reason"])

    def test_repository_load_unload_not_supported(self):
        for action in ("load", "unload"):
            r = raw_request(SERVER.port, http_request("POST", "/v2/repository/models/simple/" + action))
            self.assert_error(r, 501)
        self.assert_still_serves()

    def test_unknown_path_is_404_and_wrong_method_405(self):
        self.assert_error(raw_request(SERVER.port, http_request("GET", "/v3/nothing")), 404)
        r = raw_request(SERVER.port, http_request("GET", "/v2/models/simple/infer"))
        self.assert_error(r, 405)
        self.assertIn("allow", r.headers)

    def test_keep_alive_and_pipelining(self):
        one = http_request("GET", "/v2/health/live")
        with connect(SERVER.port) as s:
            s.sendall(one * 3)
            for _ in range(3):
                self.assertEqual(read_response(s).status, 200)
            for _ in range(3):  # and again, one at a time, on the same connection
                s.sendall(one)
                self.assertEqual(read_response(s).status, 200)

    def test_chunked_request_body(self):
        body = json.dumps(simple_json()).encode()
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + 100]), body[i:i + 100])
                           for i in range(0, len(body), 100)) + b"0\r\n\r\n"
        req = (b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: h\r\n"
               b"Transfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n" + chunked)
        r = raw_request(SERVER.port, req)
        self.assertEqual(r.status, 200, r)
        self.assertEqual(r.json()["outputs"][0]["data"], (SIMPLE_A + SIMPLE_B).ravel().tolist())


# ---- Inference features ---------------------------------------------------------------------

class InferTests(HarrierTestCase):
    def test_simple_json_and_binary(self):
        for binary_input in (False, True):
            for binary_output in (False, True):
                r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B},
                                   binary_input=binary_input, binary_output=binary_output)
                self.assertEqual(r.status, 200, r.raw[:300])
                self.assertEqual(r.json["model_name"], "simple")
                self.assertEqual(r.json["model_version"], "1")
                np.testing.assert_array_equal(r.outputs["OUTPUT0"], SIMPLE_A + SIMPLE_B)
                np.testing.assert_array_equal(r.outputs["OUTPUT1"], SIMPLE_A - SIMPLE_B)
                self.assertEqual(r.headers.get("inference-header-content-length") is not None,
                                 binary_output)

    def test_versioned_path_and_request_id(self):
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B}, version=1,
                           request_id="req-42")
        self.assertEqual(r.status, 200, r.raw[:300])
        self.assertEqual(r.json["id"], "req-42")
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B}, version=9)
        self.assertEqual(r.status, 404, r.raw[:300])

    def test_nested_and_flat_json_data(self):
        for nested in (False, True):
            r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B}, nested=nested)
            self.assertEqual(r.status, 200, r.raw[:300])
            np.testing.assert_array_equal(r.outputs["OUTPUT0"], SIMPLE_A + SIMPLE_B)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        r = client().infer("identity_fp32", {"INPUT0": x}, nested=True)
        self.assertEqual(r.status, 200, r.raw[:300])
        np.testing.assert_array_equal(r.outputs["OUTPUT0"], x)

    def test_output_subset(self):
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B}, outputs=["OUTPUT1"])
        self.assertEqual(r.status, 200, r.raw[:300])
        self.assertEqual([o["name"] for o in r.json["outputs"]], ["OUTPUT1"])
        np.testing.assert_array_equal(r.outputs["OUTPUT1"], SIMPLE_A - SIMPLE_B)

    def test_mixed_binary_and_json_outputs(self):
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B},
                           outputs=[{"name": "OUTPUT0", "parameters": {"binary_data": True}},
                                    {"name": "OUTPUT1"}])
        self.assertEqual(r.status, 200, r.raw[:300])
        by_name = {o["name"]: o for o in r.json["outputs"]}
        self.assertIn("binary_data_size", by_name["OUTPUT0"]["parameters"])
        self.assertIn("data", by_name["OUTPUT1"])
        np.testing.assert_array_equal(r.outputs["OUTPUT0"], SIMPLE_A + SIMPLE_B)
        np.testing.assert_array_equal(r.outputs["OUTPUT1"], SIMPLE_A - SIMPLE_B)

    def test_unknown_output_is_400(self):
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B}, outputs=["NOPE"])
        self.assertEqual(r.status, 400, r.raw[:300])
        self.assert_still_serves()

    def test_classification(self):
        features = np.array([[1, 0, 2, 0, -1, 3, 0.5, 0], [0, 1, 0, -2, 1, 0, 0, 4]], np.float32)
        full = client().infer("dense_fp32", {"features": features})
        self.assertEqual(full.status, 200, full.raw[:300])
        scores = full.outputs["scores"]
        self.assertEqual(scores.shape, (2, 5))
        r = client().infer("dense_fp32", {"features": features},
                           outputs=[{"name": "scores", "parameters": {"classification": 2}}])
        self.assertEqual(r.status, 200, r.raw[:300])
        out = r.json["outputs"][0]
        self.assertEqual(out["datatype"], "BYTES")
        self.assertEqual(out["shape"], [2, 2])
        classes = r.outputs["scores"]
        for row in range(2):
            expected = np.argsort(-scores[row], kind="stable")[:2]
            got = [int(v.decode().split(":")[1]) for v in classes[row]]
            self.assertEqual(got, expected.tolist())
            for v, idx in zip(classes[row], got):
                self.assertAlmostEqual(float(v.decode().split(":")[0]), float(scores[row][idx]),
                                       places=4)

    def test_corrupt_model_is_unavailable_while_others_serve(self):
        x = np.zeros((1, 2), np.float32)
        r = client().infer("corrupt", {"INPUT0": x})
        self.assertEqual(r.status, 503, r.raw[:300])
        self.assertIn("error", r.json)
        self.assert_still_serves()


# ---- Every data type, JSON and binary -------------------------------------------------------

def sample(datatype):
    """A [2, 3] tensor for `datatype` with edge values the type can hold exactly."""
    if datatype == "BOOL":
        return np.array([[True, False, True], [False, False, True]])
    if datatype == "BYTES":
        arr = np.empty(6, dtype=np.object_)
        arr[:] = [b"a", b"", b"hello world", "h\u00e9llo \u2713".encode(), b"x" * 300, b"tab\tq\""]
        return arr.reshape(2, 3)
    if datatype in ("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"):
        import harrier_client
        t = harrier_client.NUMPY_TYPES[datatype]
        info = np.iinfo(t)
        return np.array([[info.min, info.max, 0], [1, info.max - 1, info.min + 1]], dtype=t)
    if datatype == "FP16":
        return np.array([[0.5, -1.25, 65504], [0.0, -0.0009765625, 1024]], np.float16)
    if datatype == "BF16":  # float32 values that bfloat16 holds exactly
        return np.array([[1.0, -2.5, 0.15625], [256.0, 65536.0, -0.0078125]], np.float32)
    if datatype == "FP32":
        f = np.finfo(np.float32)
        return np.array([[1.5, -2.25, f.max], [f.tiny, -f.max, 1e-3]], np.float32)
    if datatype == "FP64":
        f = np.finfo(np.float64)
        return np.array([[0.1, -1e308, f.tiny], [1 / 3, f.max, 5e-324]], np.float64)
    raise ValueError(datatype)


DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "BF16", "FP32", "FP64", "BYTES"]


class DataTypeTests(HarrierTestCase):
    def round_trip(self, datatype, binary_input, binary_output, nested=False):
        x = sample(datatype)
        r = client().infer("identity_" + datatype.lower(), {"INPUT0": (x, datatype)},
                           binary_input=binary_input, binary_output=binary_output, nested=nested)
        self.assertEqual(r.status, 200, r.raw[:500])
        out = r.json["outputs"][0]
        self.assertEqual(out["name"], "OUTPUT0")
        self.assertEqual(out["datatype"], datatype)
        self.assertEqual(out["shape"], [2, 3])
        got = r.outputs["OUTPUT0"]
        if datatype == "BYTES":
            self.assertEqual(got.reshape(-1).tolist(), x.reshape(-1).tolist())
        else:
            np.testing.assert_array_equal(got, x)


def _add_datatype_tests():
    modes = {"json": (False, False, False), "json_nested": (False, False, True),
             "binary": (True, True, False), "json_in_binary_out": (False, True, False),
             "binary_in_json_out": (True, False, False)}
    for datatype in DATATYPES:
        for mode, (bin_in, bin_out, nested) in modes.items():
            def test(self, d=datatype, bi=bin_in, bo=bin_out, n=nested):
                self.round_trip(d, bi, bo, n)
            setattr(DataTypeTests, "test_%s_%s" % (datatype.lower(), mode), test)

    def test_bytes_binary_non_utf8(self):
        x = np.empty(3, dtype=np.object_)
        x[:] = [b"\xff\xfe\x00", b"\x80", b"ok"]
        x = x.reshape(1, 3)
        r = client().infer("identity_bytes", {"INPUT0": (x, "BYTES")}, binary_input=True,
                           binary_output=True)
        self.assertEqual(r.status, 200, r.raw[:500])
        self.assertEqual(r.outputs["OUTPUT0"].reshape(-1).tolist(), x.reshape(-1).tolist())
    DataTypeTests.test_bytes_binary_non_utf8 = test_bytes_binary_non_utf8


_add_datatype_tests()


# ---- Bad input: the right 4xx, then the next good request is served -------------------------

class BadInputTests(HarrierTestCase):
    def binary_simple(self, claimed=None, header_length_delta=0, raw_cut=0):
        a, b = SIMPLE_A.tobytes(), SIMPLE_B.tobytes()
        doc = {"inputs": [
            {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": claimed or len(a)}},
            {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
             "parameters": {"binary_data_size": claimed or len(b)}}]}
        header = json.dumps(doc).encode()
        body = header + a + b
        if raw_cut:
            body = body[:-raw_cut]
        return body, {"Inference-Header-Content-Length": str(len(header) + header_length_delta),
                      "Content-Type": "application/octet-stream"}

    def test_good_binary_request(self):
        body, headers = self.binary_simple()
        r = self.post_infer("simple", body, headers)
        self.assertEqual(r.status, 200, r)

    def test_truncated_binary_data(self):
        body, headers = self.binary_simple(raw_cut=20)
        self.assert_error(self.post_infer("simple", body, headers), 400)
        self.assert_still_serves()

    def test_binary_size_claim_larger_than_data(self):
        body, headers = self.binary_simple(claimed=128)
        self.assert_error(self.post_infer("simple", body, headers), 400)
        self.assert_still_serves()

    def test_lying_inference_header_content_length(self):
        for delta in (10_000, 7, -7):
            body, headers = self.binary_simple(header_length_delta=delta)
            self.assert_error(self.post_infer("simple", body, headers), 400)
        body, headers = self.binary_simple()
        headers["Inference-Header-Content-Length"] = "12abc"
        self.assert_error(self.post_infer("simple", body, headers), 400)
        self.assert_still_serves()

    def test_body_shorter_than_content_length_then_close(self):
        body = json.dumps(simple_json()).encode()
        req = http_request("POST", "/v2/models/simple/infer", body)
        r = raw_request(SERVER.port, req[:-40], shutdown_write=True)
        self.assert_error(r, 400, "closed before")
        self.assert_still_serves()

    def test_body_longer_claimed_than_sent_times_out_with_408(self):
        body = json.dumps(simple_json()).encode()
        req = http_request("POST", "/v2/models/simple/infer", body)
        start = time.monotonic()
        r = raw_request(SERVER.port, req[:-40], timeout=BODY_TIMEOUT_SECS + 10)
        self.assert_error(r, 408)
        self.assertGreaterEqual(time.monotonic() - start, BODY_TIMEOUT_SECS * 0.8)
        self.assert_still_serves()

    def test_non_utf8_json(self):
        body = json.dumps(simple_json(id="ID_HERE")).encode().replace(b"ID_HERE", b"\xff\xfe")
        self.assert_error(self.post_infer("simple", body), 400)
        self.assert_still_serves()

    def test_nan_and_infinity_text(self):
        for word in (b"NaN", b"Infinity", b"-Infinity", b"nan"):
            x = b'{"inputs":[{"name":"INPUT0","shape":[1,2],"datatype":"FP32","data":[1.0,%s]}]}' % word
            self.assert_error(self.post_infer("identity_fp32", x), 400)
        self.assert_still_serves()

    def test_billion_element_shape_claim(self):
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1000000000, 1],
                                       "datatype": "FP32", "data": [1.0]}]}).encode()
        self.assert_error(self.post_infer("identity_fp32", body), 413)
        # The same claim through the binary extension, with a few bytes behind it.
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1000000000, 1],
                                         "datatype": "FP32",
                                         "parameters": {"binary_data_size": 4000000000}}]}).encode()
        self.assert_error(self.post_infer("identity_fp32", header + b"\0" * 16,
                                          {"Inference-Header-Content-Length": str(len(header))}),
                          413)
        self.assert_still_serves()

    def test_duplicate_input_names(self):
        doc = simple_json()
        doc["inputs"][1]["name"] = "INPUT0"
        self.assert_error(self.post_infer("simple", json.dumps(doc).encode()), 400)
        self.assert_still_serves()

    def test_missing_input(self):
        doc = simple_json()
        del doc["inputs"][1]
        self.assert_error(self.post_infer("simple", json.dumps(doc).encode()), 400, "INPUT1")
        self.assert_still_serves()

    def test_unknown_fields(self):
        self.assert_error(self.post_infer("simple", json.dumps(simple_json(bogus=1)).encode()), 400)
        doc = simple_json()
        doc["inputs"][0]["bogus"] = True
        self.assert_error(self.post_infer("simple", json.dumps(doc).encode()), 400)
        self.assert_still_serves()

    def test_malformed_json_and_wrong_fields(self):
        cases = [b"", b"{", b"[]", b'{"inputs": 3}', b"not json at all"]
        doc = simple_json()
        doc["inputs"][0]["datatype"] = "FP32"
        cases.append(json.dumps(doc).encode())             # wrong datatype for the model
        doc = simple_json()
        doc["inputs"][0]["shape"] = [2, 8]
        cases.append(json.dumps(doc).encode())             # wrong shape for the model
        doc = simple_json()
        doc["inputs"][0]["data"] = doc["inputs"][0]["data"][:-1]
        cases.append(json.dumps(doc).encode())             # data shorter than the shape
        doc = simple_json()
        doc["inputs"][0]["data"][0] = 2 ** 40
        cases.append(json.dumps(doc).encode())             # out of INT32 range
        for body in cases:
            self.assert_error(self.post_infer("simple", body), 400)
        self.assert_still_serves()

    def test_bytes_element_length_past_the_data(self):
        raw = struct.pack("<I", 1000) + b"abc"
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 1], "datatype": "BYTES",
                                         "parameters": {"binary_data_size": len(raw)}}]}).encode()
        r = self.post_infer("identity_bytes", header + raw,
                            {"Inference-Header-Content-Length": str(len(header))})
        self.assert_error(r, 400)
        self.assert_still_serves()

    def test_unknown_model(self):
        self.assert_error(self.post_infer("no_such_model", json.dumps(simple_json()).encode()), 404)
        self.assert_still_serves()

    def test_huge_headers(self):
        req = (b"GET /v2/health/live HTTP/1.1\r\nHost: h\r\nX-Big: " + b"a" * 100_000 +
               b"\r\n\r\n")
        self.assert_error(raw_request(SERVER.port, req), 431)
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 50) for i in range(3000))
        self.assert_error(raw_request(SERVER.port, b"GET / HTTP/1.1\r\n" + many + b"\r\n"), 431)
        self.assert_still_serves()

    def test_body_over_the_limit_refused_from_its_content_length(self):
        with connect(SERVER.port) as s:
            s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: h\r\n"
                      b"Content-Length: 10000000000\r\n\r\n")  # 10 GB claimed, nothing sent
            r = read_response(s)
            self.assert_error(r, 413)
            self.assertEqual(r.headers.get("connection"), "close")
        self.assert_still_serves()

    def test_malformed_http(self):
        self.assert_error(raw_request(SERVER.port, b"GARBAGE\r\n\r\n"), 400)
        self.assert_error(raw_request(SERVER.port, b"GET / HTTP/1.1\r\nBad Header\r\n\r\n"), 400)
        bad_chunk = (b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: h\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n")
        self.assert_error(raw_request(SERVER.port, bad_chunk), 400)
        self.assert_error(raw_request(SERVER.port, b"POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
                          400)
        self.assert_still_serves()

    def test_slow_header_client_is_cut_off_while_others_are_served(self):
        with connect(SERVER.port, timeout=HEADER_TIMEOUT_SECS + 10) as slow:
            start = time.monotonic()
            slow.sendall(b"GET /v2/health/live HTTP/1.1\r\nHost: h\r\nX-Half: ")
            for _ in range(3):
                self.assert_still_serves()
            r = read_response(slow)
            self.assert_error(r, 408)
            self.assertGreaterEqual(time.monotonic() - start, HEADER_TIMEOUT_SECS * 0.8)
            self.assertTrue(wait_closed(slow, 10))

    def test_silent_connection_is_closed(self):
        with connect(SERVER.port) as s:
            self.assertTrue(wait_closed(s, HEADER_TIMEOUT_SECS + 10))
        self.assert_still_serves()


# ---- curl ----------------------------------------------------------------------------------

class CurlTests(HarrierTestCase):
    def curl(self, *args):
        cmd = ["curl", "-sS", "--max-time", "30"] + list(args)
        return subprocess.run(cmd, capture_output=True, check=True)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (SERVER.port, path)

    def test_curl_live_and_404(self):
        out = self.curl("-o", "/dev/null", "-w", "%{http_code}", self.url("/v2/health/live"))
        self.assertEqual(out.stdout, b"200")
        out = self.curl("-w", "\n%{http_code}", self.url("/v2/models/nope"))
        body, _, code = out.stdout.rpartition(b"\n")
        self.assertEqual(code, b"404")
        self.assertIn("error", json.loads(body))

    def test_curl_json_infer(self):
        with tempfile.NamedTemporaryFile(suffix=".json", dir=ARGS.work_dir) as f:
            f.write(json.dumps(simple_json()).encode())
            f.flush()
            out = self.curl("-X", "POST", "-H", "Content-Type: application/json",
                            "--data-binary", "@" + f.name, self.url("/v2/models/simple/infer"))
        doc = json.loads(out.stdout)
        by_name = {o["name"]: o["data"] for o in doc["outputs"]}
        self.assertEqual(by_name["OUTPUT0"], (SIMPLE_A + SIMPLE_B).ravel().tolist())

    def test_curl_binary_infer_with_expect_100_continue(self):
        x = np.random.default_rng(1).standard_normal((4, 50000)).astype(np.float32)  # 800 KB
        header = json.dumps({"inputs": [{"name": "INPUT0", "shape": [4, 50000], "datatype": "FP32",
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "parameters": {"binary_data_output": True}}).encode()
        with tempfile.NamedTemporaryFile(suffix=".bin", dir=ARGS.work_dir) as f:
            f.write(header + x.tobytes())
            f.flush()
            out = self.curl("-X", "POST", "-H", "Expect: 100-continue",
                            "-H", "Inference-Header-Content-Length: %d" % len(header),
                            "-H", "Content-Type: application/octet-stream",
                            "-D", "-", "--data-binary", "@" + f.name,
                            self.url("/v2/models/identity_fp32/infer"))
        raw = out.stdout
        # -D - prints the interim 100 and the final header block before the body.
        head_end = raw.rfind(b"\r\n\r\n", 0, raw.find(b'{"model_name"')) + 4
        head = raw[:head_end].decode("latin-1").lower()
        self.assertIn("100 continue", head)
        json_len = int(head.split("inference-header-content-length:")[1].split("\r\n")[0])
        body = raw[head_end:]
        doc = json.loads(body[:json_len])
        self.assertEqual(doc["outputs"][0]["parameters"]["binary_data_size"], x.nbytes)
        np.testing.assert_array_equal(np.frombuffer(body[json_len:], "<f4").reshape(4, 50000), x)


# ---- Scheduling: cancellation, deadlines, priority --------------------------------------------

SLOW_SIZE = 1024  # tools/make_test_models.py: the `slow` model's input width


def slow_input():
    """The slow model's input; every element of its output is this input's mean (3)."""
    x = (np.arange(SLOW_SIZE) % 7).astype(np.float32)
    return (x + np.float32(3.0 - x.mean())).reshape(1, SLOW_SIZE)


def slow_request_bytes(parameters=None, headers=None, model="slow"):
    import harrier_client
    body, extra = harrier_client.encode_infer_request({"INPUT0": slow_input()},
                                                      parameters=parameters)
    extra.update(headers or {})
    return http_request("POST", "/v2/models/%s/infer" % model, body, extra)


def timed_slow_infer(test, model="slow"):
    """Runs a slow model once on a fresh connection; returns (result, seconds)."""
    start = time.monotonic()
    r = client().infer(model, {"INPUT0": slow_input()})
    elapsed = time.monotonic() - start
    test.assertEqual(r.status, 200, r.raw[:300])
    np.testing.assert_allclose(r.outputs["OUTPUT0"], np.full((1, SLOW_SIZE), 3.0), rtol=1e-3)
    return r, elapsed


class SchedulingTests(HarrierTestCase):
    def test_disconnecting_client_frees_the_instance(self):
        def slow_stats():
            status, doc = client().model_stats("slow")
            self.assertEqual(status, 200)
            return doc["model_stats"][0]

        # One slow run, alone: a warm instance and the reference time T.
        _, t_run = timed_slow_infer(self)
        before = slow_stats()
        # A client starts a slow run and goes away a tenth of the way in.
        s = connect(SERVER.port)
        s.sendall(slow_request_bytes())
        time.sleep(max(0.05, t_run / 10))
        s.close()
        start = time.monotonic()
        _, t_next = timed_slow_infer(self)
        after = slow_stats()
        # The abandoned run did not complete: only the next one counts as an inference.
        self.assertEqual(after["inference_count"] - before["inference_count"], 1)
        # Without cancellation the next request waits ~0.9 T in the queue for the abandoned
        # run (and takes ~1.9 T in all); with it, the instance is free within milliseconds.
        # The server's own queue and compute times are compared, not wall-clock run times,
        # which vary two-fold on a loaded machine.
        stats = lambda doc, name: doc["inference_stats"][name]["ns"] / 1e9
        queued = stats(after, "queue") - stats(before, "queue")
        computed = stats(after, "compute_infer") - stats(before, "compute_infer")
        message = ("the next request waited %.3f s for the instance and computed %.3f s "
                   "(%.3f s in all; an undisturbed run took %.3f s)"
                   % (queued, computed, time.monotonic() - start, t_run))
        if ARGS.verbose:
            print(message)
        self.assertLess(queued, max(0.1, computed / 4), message)

    def _queued_behind_a_slow_run(self, parameters=None, headers=None, model="slow"):
        """Sends a slow request, then `parameters`/`headers` on a second slow request queued
        behind it. Returns (second response, seconds it took, one run's seconds)."""
        _, t_run = timed_slow_infer(self, model)
        first = connect(SERVER.port, timeout=30)
        try:
            first.sendall(slow_request_bytes(model=model))
            time.sleep(min(0.1, t_run / 5))
            start = time.monotonic()
            second = raw_request(SERVER.port, slow_request_bytes(parameters, headers, model),
                                 timeout=30)
            elapsed = time.monotonic() - start
            r = read_response(first)
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 200, r.body[:300])
        finally:
            first.close()
        self.assertIsNotNone(second)
        return second, elapsed, t_run

    def test_timeout_parameter_on_a_queued_request_gets_504(self):
        # As in Triton, `timeout` applies where the model's queue policy allows an override.
        r, elapsed, t_run = self._queued_behind_a_slow_run(parameters={"timeout": 50000},
                                                           model="slow_timeout_override")
        self.assertEqual(r.status, 504, r.body[:300])
        self.assertLess(elapsed, 1.5 * t_run, "the timed-out request reached the model")

    def test_request_timeout_header_on_a_queued_request_gets_504(self):
        r, elapsed, t_run = self._queued_behind_a_slow_run(
            headers={"X-Request-Timeout-Us": "50000"})
        self.assertEqual(r.status, 504, r.body[:300])
        self.assertLess(elapsed, 1.5 * t_run, "the timed-out request reached the model")

    def test_generous_deadline_and_priority_are_accepted(self):
        r = client().infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B},
                           parameters={"priority": 1, "timeout": 10000000},
                           timeout_us=10000000, client_id="integration")
        self.assertEqual(r.status, 200, r.raw[:300])
        np.testing.assert_array_equal(r.outputs["OUTPUT0"], SIMPLE_A + SIMPLE_B)

    def test_malformed_request_timeout_header_is_400(self):
        for value in ("soon", "-1", "1.5", "99999999999999999999"):
            r = raw_request(SERVER.port, http_request(
                "POST", "/v2/models/simple/infer", json.dumps(simple_json()).encode(),
                {"X-Request-Timeout-Us": value}))
            self.assertEqual(r.status, 400, value)
            self.assertIn("X-Request-Timeout-Us", r.json()["error"])
        self.assert_still_serves()

    def test_scheduling_parameters_of_the_wrong_type_are_400(self):
        for params, name in (({"priority": "high"}, "priority"), ({"priority": -1}, "priority"),
                             ({"priority": 1.5}, "priority"), ({"timeout": "1s"}, "timeout"),
                             ({"timeout": True}, "timeout")):
            r = raw_request(SERVER.port, http_request(
                "POST", "/v2/models/simple/infer",
                json.dumps(simple_json(parameters=params)).encode()))
            self.assertEqual(r.status, 400, params)
            self.assertIn("'%s'" % name, r.json()["error"])

    def test_overlong_client_id_is_400(self):
        r = raw_request(SERVER.port, http_request(
            "POST", "/v2/models/simple/infer", json.dumps(simple_json()).encode(),
            {"X-Client-Id": "c" * 129}))
        self.assertEqual(r.status, 400)
        self.assertIn("X-Client-Id", r.json()["error"])


# ---- Process lifecycle ---------------------------------------------------------------------

class ProcessTests(HarrierTestCase):
    def test_version_and_help(self):
        out = subprocess.run([ARGS.harrier, "--version"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        self.assertRegex(out.stdout.strip(), r"^harrier \d+\.\d+\.\d+")
        out = subprocess.run([ARGS.harrier, "serve", "--help"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0)
        for flag in ("--model-repository", "--http-port", "--grpc-port", "--metrics-port",
                     "--log-format", "--log-verbose", "--http-threads", "--max-body-bytes"):
            self.assertIn(flag, out.stdout)

    def test_unusable_repository_exits_1(self):
        missing = os.path.join(ARGS.work_dir, "no-such-repo")
        out = subprocess.run([ARGS.harrier, "serve", "--model-repository", missing,
                              "--http-port", str(free_port())],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 1)
        self.assertIn("no-such-repo", out.stdout + out.stderr)

    def test_json_logs(self):
        p = HarrierProcess("json-logs", ["--log-format", "json"])
        try:
            p.wait_live()
        finally:
            self.assertEqual(p.terminate(), 0)
        with open(p.log_path, "rb") as f:
            lines = [l for l in f.read().splitlines() if l.strip()]
        self.assertGreater(len(lines), 2)
        for line in lines:
            doc = json.loads(line)  # every line is one JSON object
            self.assertIn("message", doc)
        self.assertTrue(any("listening on" in json.loads(l)["message"] for l in lines))

    def test_sigterm_finishes_the_in_flight_request_then_exits_0(self):
        p = HarrierProcess("sigterm")
        try:
            p.wait_live()
            idle = connect(p.port)  # an idle keep-alive connection: closed at shutdown
            idle.sendall(http_request("GET", "/v2/health/live"))
            self.assertEqual(read_response(idle).status, 200)

            body = json.dumps(simple_json()).encode()
            req = http_request("POST", "/v2/models/simple/infer", body,
                               {"Content-Type": "application/json"})
            busy = connect(p.port, timeout=30)
            busy.sendall(req[:-50])          # the request is in flight...
            time.sleep(0.2)
            p.proc.send_signal(signal.SIGTERM)
            self.assertTrue(wait_closed(idle, 10), "idle connection not closed on SIGTERM")
            self.assertIsNone(p.proc.poll(), "exited with a request in flight")
            busy.sendall(req[-50:])          # ...and completes after the signal
            r = read_response(busy)
            self.assertIsNotNone(r, "in-flight request dropped:\n" + p.log_tail())
            self.assertEqual(r.status, 200, r)
            self.assertEqual(r.headers.get("connection"), "close")
            self.assertEqual(r.json()["outputs"][0]["data"], (SIMPLE_A + SIMPLE_B).ravel().tolist())
            busy.close()
            idle.close()
            self.assertEqual(p.proc.wait(timeout=60), 0, p.log_tail())
            with self.assertRaises(OSError):  # nothing listens any more
                connect(p.port, timeout=2).close()
        finally:
            p.terminate(signal.SIGKILL)

    def test_sigint_exits_0(self):
        p = HarrierProcess("sigint")
        try:
            p.wait_live()
            self.assert_still_serves_on(p.port)
        finally:
            self.assertEqual(p.terminate(signal.SIGINT), 0)

    def assert_still_serves_on(self, port):
        r = client(port).infer("simple", {"INPUT0": SIMPLE_A, "INPUT1": SIMPLE_B})
        self.assertEqual(r.status, 200)


# ---- Runner --------------------------------------------------------------------------------

def build_repository(repo):
    if os.path.exists(repo):
        shutil.rmtree(repo)
    os.makedirs(repo)
    tools = os.path.join(ARGS.source_dir, "tools")
    for script in ("make_test_models.py", "make_example_models.py"):
        subprocess.run(["/usr/bin/python3", os.path.join(tools, script), repo], check=True,
                       stdout=subprocess.DEVNULL)
    # The slow model again, with a queue policy that lets a request's `timeout` apply.
    override = os.path.join(repo, "slow_timeout_override")
    shutil.copytree(os.path.join(repo, "slow"), override)
    with open(os.path.join(override, "config.pbtxt"), "w") as f:
        f.write('name: "slow_timeout_override"\nplatform: "onnxruntime_onnx"\n'
                'dynamic_batching { default_queue_policy { allow_timeout_override: true } }\n')
    corrupt = os.path.join(repo, "corrupt", "1")
    os.makedirs(corrupt)
    with open(os.path.join(corrupt, "model.onnx"), "wb") as f:
        f.write(b"this is not an ONNX model \x00\xff\x13" * 10)


class CountingResult(unittest.TextTestResult):
    pass


def main():
    global ARGS, SERVER, REPO
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harrier", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("-k", dest="pattern", action="append", default=None,
                   help="only tests whose name contains PATTERN")
    p.add_argument("-v", "--verbose", action="store_true")
    ARGS = p.parse_args()
    ARGS.harrier = os.path.abspath(ARGS.harrier)
    ARGS.work_dir = os.path.abspath(ARGS.work_dir)
    os.makedirs(ARGS.work_dir, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.abspath(ARGS.source_dir), "tools"))
    REPO = os.path.join(ARGS.work_dir, "repo")

    loader = unittest.TestLoader()
    if ARGS.pattern:
        loader.testNamePatterns = ["*%s*" % k for k in ARGS.pattern]
    suite = unittest.TestSuite()
    for case in (EndpointTests, InferTests, DataTypeTests, BadInputTests, CurlTests,
                 SchedulingTests, ProcessTests):
        suite.addTests(loader.loadTestsFromTestCase(case))

    try:
        build_repository(REPO)
        SERVER = HarrierProcess("harrier", [
            "--http-threads", "2",
            "--http-header-timeout-secs", str(HEADER_TIMEOUT_SECS),
            "--http-body-timeout-secs", str(BODY_TIMEOUT_SECS)])
        SERVER.wait_live()
    except Exception as e:  # noqa: BLE001 - report any setup failure as a failed run
        print("setup failed: %s" % e)
        if SERVER is not None:
            SERVER.terminate(signal.SIGKILL)
        print("0 passed, %d failed" % suite.countTestCases())
        return 1

    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if ARGS.verbose else 1,
                                     resultclass=CountingResult).run(suite)
    rc = SERVER.terminate()
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    if rc != 0:
        print("shared server exited with %s on SIGTERM (expected 0):\n%s" % (rc, SERVER.log_tail()))
        failed += 1
    passed = result.testsRun - len(result.failures) - len(result.errors) - len(result.skipped)
    if failed:
        print("server log: %s" % SERVER.log_path)
    for test, _ in result.expectedFailures:
        print("expected failure (a feature not there yet): %s" % test.id())
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
