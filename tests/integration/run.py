#!/usr/bin/python3
"""Harrier's integration tests: the real `harrier` binary on free ports, real clients.

usage: /usr/bin/python3 tests/integration/run.py --harrier BUILD/harrier --source-dir SRC \
           --work-dir DIR [-k PATTERN] [-v]

Builds a model repository in DIR/repo (tools/make_test_models.py, tools/make_example_models.py,
plus a `corrupt` model whose model.onnx is garbage and `unknown_config_field`, whose config.pbtxt
has a field Harrier does not know: each must fail alone), starts harrier on a free port with
short read timeouts, and checks every endpoint, the example models' answers, every data type in
JSON and binary form, the bad-input list (each answered with its 4xx, after which the server
still serves), curl as a client, and shutdown on SIGTERM. Scheduling under concurrency (batched
outputs split back to the right clients, shapes batched apart, priorities, queue limits,
overload protection, the in-flight limit, per-model and per-client rate limits, SIGTERM under
load) runs on servers of their own over small repositories (DIR/repo-*).
Python stdlib + numpy only (run with /usr/bin/python3). The last line is "N passed, N failed";
the exit status is non-zero when anything failed.
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
import threading
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

    def __init__(self, name, extra_args=(), repo=None):
        self.port = free_port()
        self.metrics_port = free_port()
        self.log_path = os.path.join(ARGS.work_dir, name + ".log")
        self.log = open(self.log_path, "wb")
        cmd = [ARGS.harrier, "serve", "--model-repository", repo or REPO,
               "--http-port", str(self.port), "--grpc-port", str(free_port()),
               "--metrics-port", str(self.metrics_port), "--log-verbose", "1"] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_live(self, timeout=120.0):
        """Until the REST port answers live and the metrics port, which starts after it (the
        scheduling tests read its gauges), accepts connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("harrier exited with %s during startup:\n%s"
                                   % (self.proc.returncode, self.log_tail()))
            try:
                r = raw_request(self.port, http_request("GET", "/v2/health/live"), timeout=2)
                if r is not None and r.status == 200:
                    connect(self.metrics_port, timeout=2).close()
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("harrier did not become live in %ds:\n%s" % (timeout, self.log_tail()))

    def log_tail(self, lines=40):
        if not self.log.closed:
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
        self.assertIn("model_repository", doc["extensions"])

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
        # The file, named relative to the repository (ONNX Runtime's text included); the
        # server's own directories are not the client's business.
        self.assertIn("corrupt/1/model.onnx", rows["corrupt"]["reason"])
        self.assertNotIn(REPO, rows["corrupt"]["reason"])
        self.assertNotIn(ARGS.work_dir, rows["corrupt"]["reason"])

    def test_unknown_config_field_fails_only_that_model(self):
        # README, "Coming from Triton": a config.pbtxt field Harrier does not know fails that
        # model's load, and only that model's. `unknown_config_field` is identity_fp32's model
        # file under a config with `sequence_batching { }` on line 3 (build_repository).
        c = client()
        status, doc = c.repository_index()
        self.assertEqual(status, 200, doc)
        rows = {row["name"]: row for row in doc}
        bad = rows["unknown_config_field"]
        self.assertEqual(bad["state"], "UNAVAILABLE", bad)
        # docs/model-repository.md: the file relative to the repository, its line and column,
        # and protobuf's words naming the field.
        self.assertIn("unknown_config_field/config.pbtxt:3:1: ", bad["reason"])
        self.assertIn('no field named "sequence_batching"', bad["reason"])
        self.assertNotIn(REPO, bad["reason"])
        self.assertEqual(c.model_ready("unknown_config_field"), 503)
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        r = c.infer("unknown_config_field", {"INPUT0": x})
        self.assertEqual(r.status, 503, r.raw[:300])
        self.assertIn('no field named "sequence_batching"', r.error)
        # The same model file under its own name, and the rest of the repository, serve.
        self.assertEqual(rows["identity_fp32"]["state"], "READY")
        self.assertEqual(c.model_ready("identity_fp32"), 200)
        r = c.infer("identity_fp32", {"INPUT0": x})
        self.assertEqual(r.status, 200, r.raw[:300])
        np.testing.assert_array_equal(r.outputs["OUTPUT0"], x)
        self.assert_still_serves()

    def test_repository_load_unload_need_explicit_mode(self):
        # This server runs with the default --model-control-mode none: Triton's refusal.
        for action in ("load", "unload"):
            r = raw_request(SERVER.port, http_request("POST", "/v2/repository/models/simple/" + action))
            self.assert_error(r, 503)
            self.assertIn("explicit model load / unload is not allowed", r.json()["error"])
        self.assert_still_serves()

    def test_unknown_path_is_404_and_wrong_method_405(self):
        self.assert_error(raw_request(SERVER.port, http_request("GET", "/v3/nothing")), 404)
        r = raw_request(SERVER.port, http_request("GET", "/v2/models/simple/infer"))
        self.assert_error(r, 405)
        self.assertIn("allow", r.headers)

    def test_head_is_served_wherever_get_is(self):
        # RFC 9110 §9.1: the head of the GET answer, with its length, and no body; the
        # connection then serves the next request (a body sent after a HEAD would be read as
        # the next response's start).
        import http.client
        conn = http.client.HTTPConnection("127.0.0.1", SERVER.port, timeout=10)
        try:
            conn.request("GET", "/v2/models/simple")
            get = conn.getresponse()
            body = get.read()
            for path in ("/v2/models/simple", "/v2/health/live", "/v1/models"):
                conn.request("HEAD", path)
                r = conn.getresponse()
                self.assertEqual(r.status, 200, path)
                self.assertEqual(r.read(), b"", path)
                if path == "/v2/models/simple":
                    self.assertEqual(r.getheader("content-length"), str(len(body)))
            conn.request("GET", "/v2/health/live")
            self.assertEqual(conn.getresponse().status, 200)
        finally:
            conn.close()

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

    def test_vocab_lookup_example_maps_words_to_their_ids(self):
        # README: the example `vocab_lookup` takes BYTES words and answers INT64 ids, and its
        # input, [N] in the model, takes requests of shape [batch, 1]. Its vocabulary
        # (tools/make_example_models.py): the 0, quick 1, brown 2, fox 3, jumps 4, over 5,
        # lazy 6, dog 7; any other word -1.
        with open(os.path.join(REPO, "vocab_lookup", "1", "model.onnx"), "rb") as f:
            served = f.read()
        with open(os.path.join(ARGS.source_dir, "examples", "models", "vocab_lookup", "1",
                               "model.onnx"), "rb") as f:
            self.assertEqual(served, f.read(), "the model served here is not the one in "
                             "examples/models (tools/make_example_models.py writes both)")
        status, doc = client().model_metadata("vocab_lookup")
        self.assertEqual(status, 200, doc)
        self.assertEqual([(i["name"], i["datatype"], i["shape"]) for i in doc["inputs"]],
                         [("tokens", "BYTES", [-1, 1])])
        self.assertEqual([(o["name"], o["datatype"], o["shape"]) for o in doc["outputs"]],
                         [("ids", "INT64", [-1, 1])])
        words = np.empty(4, dtype=np.object_)
        words[:] = [b"dog", b"the", b"cat", b"lazy"]
        for binary_input, binary_output in ((False, False), (True, True)):
            r = client().infer("vocab_lookup", {"tokens": (words.reshape(4, 1), "BYTES")},
                               binary_input=binary_input, binary_output=binary_output)
            self.assertEqual(r.status, 200, r.raw[:300])
            out = r.json["outputs"][0]
            self.assertEqual((out["name"], out["datatype"], out["shape"]), ("ids", "INT64", [4, 1]))
            self.assertEqual(r.outputs["ids"].dtype, np.int64)
            np.testing.assert_array_equal(r.outputs["ids"], [[7], [0], [-1], [6]])

    def test_corrupt_model_is_unavailable_while_others_serve(self):
        x = np.zeros((1, 2), np.float32)
        r = client().infer("corrupt", {"INPUT0": x})
        self.assertEqual(r.status, 503, r.raw[:300])
        self.assertIn("error", r.json)
        self.assertIn("corrupt/1/model.onnx", r.json["error"])
        self.assertNotIn(ARGS.work_dir, r.json["error"])
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


# How long a slow run takes depends on the machine (ONNX Runtime's intra-op threads grow with
# the cores), so the tests below do not sleep and hope a run is still going: they wait until the
# server's own gauges (docs/metrics.md) show the state they need, and check it still holds when
# it matters.

def scrape_metrics(metrics_port, names):
    """The samples of the families `names` in the server's /metrics, as
    {(name, frozenset of (label, value)): value}. Only their lines are parsed: the whole text
    (every model's histograms) takes Python longer to parse than a fast machine's slow run."""
    r = raw_request(metrics_port, http_request("GET", "/metrics"))
    assert r is not None and r.status == 200, "GET /metrics: %r" % r
    samples = {}
    prefixes = tuple(name.encode() + b"{" for name in names)
    for raw_line in r.body.splitlines():
        if not raw_line.startswith(prefixes):
            continue
        series, _, value = raw_line.decode("utf-8").rpartition(" ")
        name, _, labels = series.partition("{")
        pairs = [p.split("=", 1) for p in labels.rstrip("}").split(",") if p]
        samples[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return samples


def unlabelled_metrics(metrics_port):
    """The server's samples without labels, as {name: value}."""
    r = raw_request(metrics_port, http_request("GET", "/metrics"))
    assert r is not None and r.status == 200, "GET /metrics: %r" % r
    samples = {}
    for line in r.body.decode("utf-8").splitlines():
        name, _, value = line.partition(" ")
        if line.startswith("harrier_") and "{" not in name:
            samples[name] = float(value)
    return samples


def model_metric(samples, name, model, **labels):
    key = (name, frozenset(dict(labels, model=model, version="1").items()))
    assert key in samples, "no %s for model %s in /metrics" % (name, model)
    return samples[key]


def model_requests(metrics_port, model):
    """(requests in flight, requests queued) for `model`: in flight counts every admitted
    request not yet answered, queued or running, so with one instance in flight - queued is
    the one running (harrier_inflight_requests, harrier_queue_depth)."""
    samples = scrape_metrics(metrics_port, ("harrier_inflight_requests", "harrier_queue_depth"))
    return (int(model_metric(samples, "harrier_inflight_requests", model)),
            int(model_metric(samples, "harrier_queue_depth", model)))


def cancellations(metrics_port, model, stage):
    samples = scrape_metrics(metrics_port, ("harrier_cancellations_total",))
    return int(model_metric(samples, "harrier_cancellations_total", model, stage=stage))


def wait_for_requests(metrics_port, model, in_flight, queued, timeout=30.0):
    """Waits until `model` has `in_flight` requests admitted and not answered, `queued` of them
    waiting. (A request is counted in flight a few microseconds before it is queued, so
    "running" may be seen that early: an idle instance takes it at once.) A scrape takes ~6 ms
    here; the waits must stay well inside one run of a fast machine."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = model_requests(metrics_port, model)
        if last == (in_flight, queued):
            return
        time.sleep(0.005)
    raise AssertionError("%s: waited %.0f s for %d requests in flight, %d of them queued; "
                         "last seen (in flight, queued) = %s" % (model, timeout, in_flight,
                                                                 queued, last))


class SchedulingTests(HarrierTestCase):
    def test_disconnecting_client_frees_the_instance(self):
        def slow_stats():
            status, doc = client().model_stats("slow")
            self.assertEqual(status, 200)
            return doc["model_stats"][0]

        # One slow run, alone: a warm instance and the reference time T.
        _, t_run = timed_slow_infer(self)
        before = slow_stats()
        stopped_before = cancellations(SERVER.metrics_port, "slow", "running")
        # A client starts a slow run and goes away while it runs.
        s = connect(SERVER.port)
        s.sendall(slow_request_bytes())
        wait_for_requests(SERVER.metrics_port, "slow", 1, 0)
        s.close()
        start = time.monotonic()
        _, t_next = timed_slow_infer(self)
        after = slow_stats()
        # The abandoned run did not complete: only the next one counts as an inference, and
        # the server counts one execution stopped.
        self.assertEqual(after["inference_count"] - before["inference_count"], 1)
        self.assertEqual(cancellations(SERVER.metrics_port, "slow", "running") - stopped_before,
                         1, "the abandoned request was not stopped while running")
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

    def _queued_behind_a_slow_run(self, second_request, model="slow"):
        """Sends a slow request, then second_request(timeout_us) (the bytes of a second slow
        request given a timeout well inside one run) queued behind it while it runs. Returns
        (second response, seconds it took, one run's seconds)."""
        _, t_run = timed_slow_infer(self, model)
        timeout_us = int(min(50000, t_run * 1e6 / 5))
        first = connect(SERVER.port, timeout=30)
        try:
            first.sendall(slow_request_bytes(model=model))
            wait_for_requests(SERVER.metrics_port, model, 1, 0)
            start = time.monotonic()
            second = raw_request(SERVER.port, second_request(timeout_us), timeout=30)
            elapsed = time.monotonic() - start
            # The second was answered while the first still ran: it timed out in the queue.
            self.assertEqual(model_requests(SERVER.metrics_port, model), (1, 0),
                             "the first request was answered before the second's timeout "
                             "(%d us; the second took %.3f s, a run %.3f s)"
                             % (timeout_us, elapsed, t_run))
            r = read_response(first)
            self.assertIsNotNone(r)
            self.assertEqual(r.status, 200, r.body[:300])
        finally:
            first.close()
        self.assertIsNotNone(second)
        return second, elapsed, t_run

    def test_timeout_parameter_on_a_queued_request_gets_504(self):
        # As in Triton, `timeout` applies where the model's queue policy allows an override.
        r, elapsed, t_run = self._queued_behind_a_slow_run(
            lambda us: slow_request_bytes({"timeout": us}, model="slow_timeout_override"),
            model="slow_timeout_override")
        self.assertEqual(r.status, 504, r.body[:300])
        self.assertLess(elapsed, 1.5 * t_run, "the timed-out request reached the model")

    def test_request_timeout_header_on_a_queued_request_gets_504(self):
        r, elapsed, t_run = self._queued_behind_a_slow_run(
            lambda us: slow_request_bytes(headers={"X-Request-Timeout-Us": str(us)}))
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


# ---- Scheduling under concurrency: batching, priorities, queue policy, overload, shutdown ----
#
# These run on servers of their own, over small repositories built next to the main one
# (build_scheduling_repositories): copies of the test models with a config.pbtxt each.

# Overload protection lets a one-instance model without batching hold 2 requests (one running,
# one waiting) and refuses a third itself; the priority, queue-size and shutdown tests need more
# waiting, so their models turn it off and test the scheduler's own rules.
OVERLOAD_OFF = 'parameters { key: "harrier.overload.protection" value: { string_value: "off" } }\n'

SCHED_MODELS = {  # name: (the test model it copies, config.pbtxt after name/platform, or None)
    "batch_identity": ("identity_fp32",
                       "max_batch_size: 8\n"
                       "dynamic_batching { max_queue_delay_microseconds: 4000 }\n"),
    # Overload protection stays on: an urgent request must overtake the queue, not be refused.
    "slow_priority": ("slow", "dynamic_batching { priority_levels: 2 default_priority_level: 2 }\n"),
    "slow_queue1": ("slow", "dynamic_batching { default_queue_policy { max_queue_size: 1 } }\n"
                    + OVERLOAD_OFF),
    "slow_drain": ("slow", OVERLOAD_OFF),
    "busy": ("busy", None),
    # As the kit's tiny model is served: batching with no delay set.
    "short_identity": ("identity_fp32", "max_batch_size: 8\ndynamic_batching { }\n"),
    # No config: admission is what the server's flags say (AdmissionProcessTests).
    "slow": ("slow", None),
}
SCHED_REPOS = {
    "repo-sched": ("batch_identity", "slow_priority", "slow_queue1", "busy"),
    "repo-drain": ("slow_drain", "batch_identity"),
    "repo-limits": ("batch_identity",),
    "repo-inline": ("short_identity",),
    "repo-admission": ("slow", "batch_identity"),
}


def build_scheduling_repositories():
    for repo_name, models in SCHED_REPOS.items():
        repo = os.path.join(ARGS.work_dir, repo_name)
        if os.path.exists(repo):
            shutil.rmtree(repo)
        for name in models:
            source, config = SCHED_MODELS[name]
            shutil.copytree(os.path.join(REPO, source, "1"), os.path.join(repo, name, "1"))
            if config is not None:
                with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
                    f.write('name: "%s"\nplatform: "onnxruntime_onnx"\n%s' % (name, config))


class RawClient:
    """One keep-alive connection over a raw socket. Unlike harrier_client.Client it never
    retries, so a connection closed without an answer shows as None."""

    def __init__(self, port, timeout=30.0):
        self.port, self.timeout, self.sock = port, timeout, None

    def send(self, data):
        if self.sock is None:
            self.sock = connect(self.port, self.timeout)
        self.sock.sendall(data)

    def receive(self):
        r = read_response(self.sock)
        if r is None or r.headers.get("connection") == "close":
            self.close()
        return r

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def infer_bytes(model, inputs, **kwargs):
    import harrier_client
    body, headers = harrier_client.encode_infer_request(inputs, **kwargs)
    return http_request("POST", "/v2/models/%s/infer" % model, body, headers)


def decode(response):
    import harrier_client
    return harrier_client.InferResult(response.status, response.headers, response.body)


def mean_input(k):
    """An input of the slow and busy models whose output is k + 3 everywhere."""
    return slow_input() + np.float32(k)


def mean_request(model, k, parameters=None):
    return infer_bytes(model, {"INPUT0": mean_input(k)}, binary_input=True, binary_output=True,
                       parameters=parameters)


def mean_output_ok(response, k):
    if response is None or response.status != 200:
        return False
    out = decode(response).outputs.get("OUTPUT0")
    return (out is not None and out.shape == (1, SLOW_SIZE) and
            np.allclose(out, k + 3.0, rtol=1e-3))


def model_stats_on(port, model):
    status, doc = client(port).model_stats(model)
    assert status == 200, doc
    return doc["model_stats"][0]


def stat_delta(before, after, name, field="count"):
    return (int(after["inference_stats"][name][field]) -
            int(before["inference_stats"][name][field]))


def executions_by_batch_size(stats):
    return {int(b["batch_size"]): int(b["compute_infer"]["count"])
            for b in stats.get("batch_stats", [])}


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * p // 100)]


def run_concurrently(count, fn, timeout=60.0):
    """fn(0) ... fn(count - 1) on a thread each; their results in order. Raises the first
    failure (a broken barrier only when nothing else failed)."""
    results, errors = [None] * count, []

    def body(i):
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append((i, e))

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(count)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        raise AssertionError("client threads still running after %.0f s" % timeout)
    errors.sort(key=lambda e: isinstance(e[1], threading.BrokenBarrierError))
    if errors:
        i, e = errors[0]
        raise AssertionError("client %d: %r" % (i, e)) from e
    return results


class ConcurrencyTests(HarrierTestCase):
    """One server over repo-sched, shared by these tests (each uses models of its own)."""
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = HarrierProcess("harrier-sched", ["--http-threads", "2"],
                                    repo=os.path.join(ARGS.work_dir, "repo-sched"))
        try:
            cls.server.wait_live()
        except Exception:
            cls.server.terminate(signal.SIGKILL)
            raise

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.terminate()
        if rc != 0:
            raise RuntimeError("the scheduling server exited with %s on SIGTERM:\n%s"
                               % (rc, cls.server.log_tail()))

    def warm_up(self, model, width):
        # Overload protection holds a freshly loaded model to max(2 x requests per run, 16)
        # requests until its first completion; two requests give it a measurement.
        for _ in range(2):
            r = client(self.server.port).infer(model, {"INPUT0": np.ones((1, width), np.float32)})
            self.assertEqual(r.status, 200, r.raw[:300])

    def batched_clients(self, clients, shape_of, modes):
        """`clients` threads, each sending one request per mode (binary_input, binary_output)
        of shape shape_of(i, k) with values no other request has, all released together by a
        barrier; checks that every request gets exactly its own input back (and its id), and
        returns (requests, items, executions, executions by batch size before, after)."""
        model, port = "batch_identity", self.server.port
        before = model_stats_on(port, model)
        barrier = threading.Barrier(clients, timeout=30)

        def worker(i):
            conn, out = RawClient(port), []
            try:
                for k, (binary_input, binary_output) in enumerate(modes):
                    n, width = shape_of(i, k)
                    x = (np.arange(n * width, dtype=np.float32) + np.float32(
                        i * 10000 + k * 1000)).reshape(n, width)
                    data = infer_bytes(model, {"INPUT0": x}, binary_input=binary_input,
                                       binary_output=binary_output, request_id="c%d-%d" % (i, k))
                    barrier.wait()
                    conn.send(data)
                    out.append((x, conn.receive()))
            finally:
                conn.close()
            return out

        results = run_concurrently(clients, worker)
        items = 0
        for i, out in enumerate(results):
            for k, (x, r) in enumerate(out):
                what = "client %d request %d (shape %s)" % (i, k, list(x.shape))
                self.assertIsNotNone(r, what + ": no answer")
                self.assertEqual(r.status, 200, "%s: %r" % (what, r))
                result = decode(r)
                self.assertEqual(result.json["id"], "c%d-%d" % (i, k), what)
                np.testing.assert_array_equal(result.outputs["OUTPUT0"], x,
                                              what + " got something else than its own input")
                items += x.shape[0]
        after = model_stats_on(port, model)
        executions = int(after["execution_count"]) - int(before["execution_count"])
        self.assertEqual(int(after["inference_count"]) - int(before["inference_count"]), items)
        self.assertEqual(stat_delta(before, after, "success"), clients * len(modes))
        if ARGS.verbose:
            print("%d requests, %d items, %d executions" % (clients * len(modes), items,
                                                            executions))
        return (clients * len(modes), items, executions, executions_by_batch_size(before),
                executions_by_batch_size(after))

    def test_pipelining_clients_each_get_their_own_answers_in_order(self):
        """Clients that send their next requests before the answers come, on requests answered
        from the model's worker (batched, so never inline): every answer comes, in order, with
        its own id and its own input back. Pieces of a request sent apart (a header in two
        writes, a body after its header) make the server read the rest of a request that is
        already partly in its buffer while the last answer goes out."""
        model, port, depth, count = "batch_identity", self.server.port, 6, 36

        def worker(i):
            out = []
            with connect(port, 30) as s:
                sent, pending = 0, []
                while len(out) < count:
                    while sent < count and len(pending) < depth:
                        x = np.full((1, 4), i * 1000 + sent, np.float32)
                        data = infer_bytes(model, {"INPUT0": x}, binary_input=sent % 2 == 0,
                                           request_id="p%d-%d" % (i, sent))
                        cut = (7, data.index(b"\r\n\r\n") + 4)[sent % 2]
                        s.sendall(data[:cut])
                        time.sleep(0.001)
                        s.sendall(data[cut:])
                        pending.append(("p%d-%d" % (i, sent), x))
                        sent += 1
                    rid, x = pending.pop(0)
                    out.append((rid, x, read_response(s)))
            return out

        for i, out in enumerate(run_concurrently(8, worker)):
            for rid, x, r in out:
                self.assertIsNotNone(r, rid + ": no answer")
                self.assertEqual(r.status, 200, "%s: %r" % (rid, r))
                result = decode(r)
                self.assertEqual(result.json["id"], rid)
                np.testing.assert_array_equal(result.outputs["OUTPUT0"], x, rid)

    def test_concurrent_clients_get_their_own_outputs_from_batched_runs(self):
        self.warm_up("batch_identity", 16)
        modes = [(False, False), (True, True), (True, False), (False, True)]
        requests, items, executions, before, after = self.batched_clients(
            48, lambda i, k: (1 + (i + k) % 2, 16), modes)
        # Requests were merged: fewer executions than requests, and batches of 3 or more
        # items, which no single request (1 or 2 items) makes alone.
        self.assertLess(executions, requests, "no two requests shared an execution")
        merged = {size: count - before.get(size, 0) for size, count in after.items()
                  if size >= 3 and count > before.get(size, 0)}
        self.assertTrue(merged, "no execution of 3+ items: %s" % after)

    def test_requests_of_different_widths_are_batched_apart(self):
        # identity [N, -1]: only requests of one width may share a run.
        self.warm_up("batch_identity", 16)
        widths = [3, 5, 8, 13]
        requests, _, executions, _, _ = self.batched_clients(
            32, lambda i, k: (1 + (i // 4 + k) % 3, widths[i % 4]), [(False, False), (True, True)])
        self.assertLess(executions, requests, "no two requests shared an execution")

    def test_high_priority_request_overtakes_a_queued_low_priority_one(self):
        port, metrics, model = self.server.port, self.server.metrics_port, "slow_priority"
        first = RawClient(port)
        first.send(mean_request(model, 0))  # level 2 (the default): runs at once
        wait_for_requests(metrics, model, 1, 0)
        low = RawClient(port)
        low.send(mean_request(model, 1, {"priority": 2}))
        wait_for_requests(metrics, model, 2, 1)
        high = RawClient(port)
        high.send(mean_request(model, 2, {"priority": 1}))
        # Both wait behind the first, which still runs: the next execution picks between them.
        wait_for_requests(metrics, model, 3, 2)
        conns = [first, low, high]

        def receive(i):
            r = conns[i].receive()
            conns[i].close()
            return r, time.monotonic()

        (r0, t0), (r_low, t_low), (r_high, t_high) = run_concurrently(3, receive)
        for k, r in enumerate((r0, r_low, r_high)):
            self.assertTrue(mean_output_ok(r, k), "request %d: %r" % (k, r))
        self.assertLess(t_high, t_low, "the priority-1 request was answered %.3f s after the "
                        "priority-2 one queued before it" % (t_high - t_low))

    def test_full_queue_refuses_at_once_as_triton_does(self):
        port, metrics, model = self.server.port, self.server.metrics_port, "slow_queue1"
        running, queued = RawClient(port), RawClient(port)
        try:
            running.send(mean_request(model, 0))
            wait_for_requests(metrics, model, 1, 0)
            queued.send(mean_request(model, 1))   # the one queue slot
            wait_for_requests(metrics, model, 2, 1)
            start = time.monotonic()
            r = raw_request(port, mean_request(model, 2), timeout=30)
            elapsed = time.monotonic() - start
            # Triton's status and words (its clients match on them), Harrier's detail after.
            self.assert_error(r, 503, "Exceeds maximum queue size: the queue of priority level 1 "
                                      "is full (max_queue_size 1)")
            # At once: refused while the first still runs and the second still waits (queued,
            # it would have waited for both).
            self.assertEqual(model_requests(metrics, model), (2, 1),
                             "the refusal took %.3f s, past the end of a run" % elapsed)
            self.assertTrue(mean_output_ok(running.receive(), 0))
            self.assertTrue(mean_output_ok(queued.receive(), 1))
        finally:
            running.close()
            queued.close()
        # The slot is free again.
        self.assertTrue(mean_output_ok(raw_request(port, mean_request(model, 3), timeout=30), 3))

    def test_overload_is_refused_fast_while_admitted_requests_succeed(self):
        # Default flags: overload protection on. `busy` runs in a few ms on one instance;
        # 8 closed-loop clients offer it many times what it can serve.
        port, model = self.server.port, "busy"
        c = client(port)
        unloaded = []
        for k in range(10):  # warm-up, and the limiter's first measurements
            start = time.monotonic()
            r = raw_request(port, mean_request(model, k))
            unloaded.append(time.monotonic() - start)
            self.assertTrue(mean_output_ok(r, k), r)
        before = model_stats_on(port, model)
        threads, duration, most = 8, 4.0, 1500
        stop_at = time.monotonic() + duration

        def worker(i):
            conn, records, k = RawClient(port), [], 100000 * (i + 1)
            try:
                while time.monotonic() < stop_at and len(records) < most:
                    k += 1
                    data = mean_request(model, k % 1000)
                    start = time.monotonic()
                    conn.send(data)
                    r = conn.receive()
                    records.append((k % 1000, r, time.monotonic() - start))
            finally:
                conn.close()
            return records

        load_start = time.monotonic()
        records = [rec for recs in run_concurrently(threads, worker) for rec in recs]
        load_secs = time.monotonic() - load_start
        after = model_stats_on(port, model)
        admitted = [(k, r, t) for k, r, t in records if r is not None and r.status == 200]
        refused = [(k, r, t) for k, r, t in records if r is not None and r.status == 429]
        other = [(k, r) for k, r, _ in records if r is None or r.status not in (200, 429)]
        self.assertEqual(other, [], "answers other than 200 and 429 (None: no answer)")
        self.assertTrue(refused, "nothing refused at %d requests" % len(records))
        self.assertGreaterEqual(len(admitted), 10)
        for k, r, _ in admitted:
            self.assertTrue(mean_output_ok(r, k), "an admitted request's output is wrong: %r" % r)
        for _, r, _ in refused:
            self.assertGreaterEqual(int(r.headers.get("retry-after", "0")), 1, r.headers)
            message = r.json()["error"]
            self.assertTrue("overloaded" in message or "concurrency limit" in message, message)
        # Overloaded: at least twice what it served was offered. (The offered load is bounded by
        # eight Python threads on a shared 2-core machine: 4x held on a quiet one, 3.8x was seen
        # under load, with the server's behaviour unchanged.)
        self.assertGreaterEqual(len(records), 2 * len(admitted))
        # Refusals are fast (well under a millisecond of server time; the margin is the
        # Python client and a loaded machine).
        reject_ms = [t * 1000 for _, _, t in refused]
        self.assertLess(percentile(reject_ms, 50), 50.0)
        # The server saw what the clients saw, and kept admitted requests' queueing short:
        # with 8 clients and nothing refused they would queue ~7 runs each.
        self.assertEqual(stat_delta(before, after, "success"), len(admitted))
        queue_ms = stat_delta(before, after, "queue", "ns") / 1e6 / len(admitted)
        run_ms = stat_delta(before, after, "compute_infer", "ns") / 1e6 / len(admitted)
        admitted_ms = [t * 1000 for _, _, t in admitted]
        message = ("%d requests in %.1f s: %d admitted (mean queue %.2f ms, mean run %.2f ms, "
                   "instance busy %.0f%% of the time, p50 %.1f ms, p99 %.1f ms; unloaded p50 "
                   "%.1f ms), %d refused (p50 %.2f ms, p99 %.2f ms)" % (
                       len(records), load_secs, len(admitted), queue_ms, run_ms,
                       100 * run_ms * len(admitted) / 1000 / load_secs,
                       percentile(admitted_ms, 50), percentile(admitted_ms, 99),
                       percentile(unloaded, 50) * 1000, len(refused),
                       percentile(reject_ms, 50), percentile(reject_ms, 99)))
        if ARGS.verbose:
            print(message)
        self.assertLess(queue_ms, 3 * run_ms, message)
        # Healthy afterwards.
        self.assertTrue(c.live())
        self.assertTrue(mean_output_ok(raw_request(port, mean_request(model, 7)), 7))


def worker_context_switches(pid, thread_name):
    """Voluntary context switches of the server's thread named `thread_name` (one per sleep)."""
    task_dir = "/proc/%d/task" % pid
    for tid in os.listdir(task_dir):
        with open(os.path.join(task_dir, tid, "comm")) as f:
            if f.read().strip() != thread_name:
                continue
        with open(os.path.join(task_dir, tid, "status")) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    raise AssertionError("no thread %r in process %d" % (thread_name, pid))


class OneIoThreadTests(HarrierTestCase):
    """--http-threads 1: every request comes from one thread, so the default `auto` runs a short
    model's requests on it even when many connections are busy, and what queues behind one
    run is run by the same thread (docs/scheduling.md, "The only submitter")."""

    def test_many_connections_on_one_thread_get_their_own_outputs(self):
        p = HarrierProcess("one-io-thread", ["--http-threads", "1"],
                           repo=os.path.join(ARGS.work_dir, "repo-inline"))
        try:
            p.wait_live()
            model, port = "short_identity", p.port
            for _ in range(2):  # measured by a worker run first, then short: inline
                r = client(port).infer(model, {"INPUT0": np.ones((1, 8), np.float32)})
                self.assertEqual(r.status, 200, r.raw[:300])
            before = model_stats_on(port, model)
            worker_switches = worker_context_switches(p.proc.pid, "w0:short_identi")
            clients, per_client = 16, 40

            def worker(i):
                conn, out = RawClient(port), []
                try:
                    for k in range(per_client):
                        x = np.full((1 + k % 2, 8), i * 1000 + k, np.float32)
                        conn.send(infer_bytes(model, {"INPUT0": x}, binary_input=k % 3 == 0,
                                              request_id="c%d-%d" % (i, k)))
                        out.append((x, conn.receive()))
                finally:
                    conn.close()
                return out

            items = 0
            for i, out in enumerate(run_concurrently(clients, worker)):
                for k, (x, r) in enumerate(out):
                    what = "client %d request %d" % (i, k)
                    self.assertIsNotNone(r, what + ": no answer")
                    self.assertEqual(r.status, 200, "%s: %r" % (what, r))
                    result = decode(r)
                    self.assertEqual(result.json["id"], "c%d-%d" % (i, k), what)
                    np.testing.assert_array_equal(result.outputs["OUTPUT0"], x, what)
                    items += x.shape[0]
            after = model_stats_on(port, model)
            self.assertEqual(stat_delta(before, after, "success"), clients * per_client)
            self.assertEqual(int(after["inference_count"]) - int(before["inference_count"]),
                             items)
            # They ran on the I/O thread: the model's worker slept through them (handed off,
            # it wakes at least once per execution: hundreds of switches). Not under a
            # sanitizer (tools/sanitized_run.sh), whose slowdown moves the timing this rests on.
            switches = worker_context_switches(p.proc.pid, "w0:short_identi") - worker_switches
            if not os.environ.get("HARRIER_SANITIZER"):
                self.assertLess(switches, clients * per_client // 5,
                                "the worker ran the requests (%d context switches)" % switches)
        finally:
            self.assertEqual(p.terminate(), 0, p.log_tail())


class AdmissionProcessTests(HarrierTestCase):
    """Servers of their own: the server's in-flight limit, per-model and per-client rate limits,
    and SIGTERM under load."""

    def test_inflight_limit_refuses_the_next_request_with_429_and_retry_after(self):
        # docs/admission.md: --max-inflight bounds the requests admitted and not yet answered,
        # across all models; the next one gets 429, Retry-After 1 and "server in-flight limit N
        # reached". Overload protection is off, so that it cannot refuse first (while a run is
        # in progress it may refuse the next request to that model itself).
        p = HarrierProcess("max-inflight", ["--max-inflight", "1", "--overload-protection", "off"],
                           repo=os.path.join(ARGS.work_dir, "repo-admission"))
        x = np.arange(4, dtype=np.float32).reshape(1, 4)
        refusal = "server in-flight limit 1 reached; retry after 1 s"
        try:
            p.wait_live()
            running = RawClient(p.port, timeout=60)
            try:
                running.send(mean_request("slow", 0))
                wait_for_requests(p.metrics_port, "slow", 1, 0)  # the one slot, running
                for data in (mean_request("slow", 1), infer_bytes("batch_identity", {"INPUT0": x})):
                    r = raw_request(p.port, data, timeout=30)
                    self.assert_error(r, 429)
                    self.assertEqual(r.json()["error"], refusal)
                    self.assertEqual(r.headers.get("retry-after"), "1", r.headers)
                # Refused while the first still ran, not after it (which would have let them in).
                self.assertEqual(model_requests(p.metrics_port, "slow"), (1, 0))
                self.assertTrue(mean_output_ok(running.receive(), 0))
            finally:
                running.close()
            # Answered, it has given the slot back: a request sent the moment the answer
            # arrived is admitted (the slot is released before the answer goes out).
            r = raw_request(p.port, infer_bytes("batch_identity", {"INPUT0": x}), timeout=30)
            self.assertEqual(r.status if r else None, 200, r)
            np.testing.assert_array_equal(decode(r).outputs["OUTPUT0"], x)
            self.assertTrue(mean_output_ok(raw_request(p.port, mean_request("slow", 2),
                                                       timeout=60), 2))
        finally:
            self.assertEqual(p.terminate(), 0, p.log_tail())

    def test_bodies_still_arriving_past_the_server_wide_budget_get_503(self):
        # --max-incoming-body-bytes (docs/server.md, "Request bodies server-wide"): the bodies
        # still arriving on all connections together stay within it. One client holds 600 KB
        # of a body; another's 600 KB would pass the 1 MiB budget: 503, Retry-After 1, the
        # connection closed, counted and logged; the first completes and is answered, and the
        # metrics show the budget and the refusal.
        p = HarrierProcess("incoming-bodies", ["--max-incoming-body-bytes", "1048576",
                                               "--max-body-bytes", "1048576"],
                           repo=os.path.join(ARGS.work_dir, "repo-admission"))
        body = json.dumps({"inputs": [{"name": "INPUT0", "shape": [1, 4], "datatype": "FP32",
                                       "data": [0, 0, 0, 0]}],
                           "parameters": {"pad": "p" * 700_000}}).encode()
        head = ("POST /v2/models/batch_identity/infer HTTP/1.1\r\nHost: t\r\n"
                "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % len(body)).encode()
        try:
            p.wait_live()
            first = connect(p.port, timeout=30)
            second = None
            try:
                first.sendall(head + body[:600_000])
                deadline = time.monotonic() + 10
                while (unlabelled_metrics(p.metrics_port)["harrier_incoming_body_bytes"]
                       < 600_000 and time.monotonic() < deadline):
                    time.sleep(0.05)
                second = connect(p.port, timeout=30)
                second.sendall(head + body[:600_000])
                r = read_response(second)
                self.assert_error(r, 503)
                self.assertEqual(r.headers.get("retry-after"), "1", r.headers)
                self.assertIn("1048576 bytes of request bodies still arriving", r.json()["error"])
                self.assertTrue(wait_closed(second, 10))
                first.sendall(body[600_000:])
                r = read_response(first)
                self.assertEqual(r.status, 200, r.body[:300])
            finally:
                first.close()
                if second is not None:
                    second.close()
            m = unlabelled_metrics(p.metrics_port)
            self.assertEqual(m.get("harrier_incoming_body_limit_bytes"), 1048576, m)
            self.assertEqual(m.get("harrier_incoming_body_refusals_total"), 1, m)
            self.assertEqual(m.get("harrier_incoming_body_bytes"), 0, m)
        finally:
            self.assertEqual(p.terminate(), 0, p.log_tail())
        self.assertIn("request(s) refused (503, or a gRPC stream reset): request bodies still "
                      "arriving",
                      p.log_tail(200))

    def test_per_model_rate_limit(self):
        # --rate-limit-per-model RPS:BURST (docs/admission.md): a token bucket for each model
        # version. A token every 4 s, 3 at once: the burst passes and the requests right after
        # it, milliseconds later (a 4 s refill leaves timing nothing to decide), get 429 naming
        # the model, with a Retry-After that is the wait for the next token rounded up; after
        # that wait a request passes (a refused request took no token). Another model has a
        # bucket of its own.
        p = HarrierProcess("rate-limit-per-model", ["--rate-limit-per-model", "0.25:3"],
                           repo=os.path.join(ARGS.work_dir, "repo-admission"))
        try:
            p.wait_live()
            c, x = client(p.port), np.arange(4, dtype=np.float32).reshape(1, 4)
            for _ in range(3):
                r = c.infer("batch_identity", {"INPUT0": x})
                self.assertEqual(r.status, 200, r.raw[:300])
                np.testing.assert_array_equal(r.outputs["OUTPUT0"], x)
            for _ in range(3):
                r = c.infer("batch_identity", {"INPUT0": x})
                self.assertEqual(r.status, 429, r.raw[:300])
                retry_after = int(r.headers.get("retry-after", "0"))
                self.assertTrue(1 <= retry_after <= 4, r.headers)  # at most one refill away
                self.assertEqual(r.error, "rate limit for model 'batch_identity' exceeded "
                                 "(0.25 req/s, burst 3); retry after %d s" % retry_after)
            self.assertTrue(mean_output_ok(raw_request(p.port, mean_request("slow", 0),
                                                       timeout=60), 0))
            time.sleep(retry_after)
            r = c.infer("batch_identity", {"INPUT0": x})
            self.assertEqual(r.status, 200, r.raw[:300])
            np.testing.assert_array_equal(r.outputs["OUTPUT0"], x)
        finally:
            self.assertEqual(p.terminate(), 0, p.log_tail())

    def test_per_client_rate_limit(self):
        p = HarrierProcess("rate-limit", ["--rate-limit-per-client", "5:5"],
                           repo=os.path.join(ARGS.work_dir, "repo-limits"))
        try:
            p.wait_live()
            x = np.arange(4, dtype=np.float32).reshape(1, 4)

            def statuses(client_id, count):
                c, out = client(p.port), []
                for _ in range(count):
                    r = c.infer("batch_identity", {"INPUT0": x}, client_id=client_id)
                    if r.status == 200:
                        np.testing.assert_array_equal(r.outputs["OUTPUT0"], x)
                    elif r.status == 429:
                        self.assertGreaterEqual(int(r.headers.get("retry-after", "0")), 1)
                        self.assertIn("rate limit for client 'team-a'", r.error)
                    out.append(r.status)
                return out

            a = statuses("team-a", 12)
            # The burst of 5 passes; the next 7 come within a few ms, when at most one more
            # token (one per 200 ms) can have been freed.
            self.assertEqual(a[:5], [200] * 5, a)
            self.assertGreaterEqual(a[5:].count(429), 4, a)
            self.assertEqual(set(a), {200, 429}, a)
            self.assertEqual(statuses("team-b", 3), [200] * 3)  # another key: its own bucket
        finally:
            self.assertEqual(p.terminate(), 0, p.log_tail())

    def test_sigterm_under_load_answers_every_accepted_request(self):
        # docs/scheduling.md, "Shutdown": what is queued still runs, no accepted request is
        # lost. Four slow requests (one instance) are sent, the first seen running (the
        # server's gauges) before the others; when it is answered and the gauges show one of
        # the others running and two waiting, the signal comes: all three must be answered 200
        # with their own outputs. Meanwhile clients keep sending requests to a fast model until the server
        # is gone, so requests are being received, queued and answered when the signal comes:
        # one whose bytes were all sent before the signal must be answered 200 as well; after
        # it, a request may be refused only in the documented ways (docs/server.md,
        # "Shutdown": the connection closed without an answer; docs/scheduling.md: 503).
        p = HarrierProcess("sigterm-load", repo=os.path.join(ARGS.work_dir, "repo-drain"))
        try:
            p.wait_live()
            slow_conns = []
            for k in range(4):
                conn = RawClient(p.port, timeout=60)
                conn.send(mean_request("slow_drain", k))
                slow_conns.append(conn)
                if k == 0:  # the others queue behind it, in any order
                    wait_for_requests(p.metrics_port, "slow_drain", 1, 0)
            signalled = threading.Event()
            t_signal = [None]

            def hammer(i):
                conn, records, n = RawClient(p.port, timeout=60), [], 0
                stop_after = None
                while stop_after is None or time.monotonic() < stop_after:
                    if signalled.is_set() and stop_after is None:
                        stop_after = time.monotonic() + 0.5
                    n += 1
                    x = np.full((1, 8), i * 100000 + n, np.float32)
                    data = infer_bytes("batch_identity", {"INPUT0": x}, binary_input=True,
                                       binary_output=bool(n % 2))
                    try:
                        conn.send(data)
                    except OSError:  # refused or reset: the server has stopped taking work
                        conn.close()
                        if signalled.is_set():
                            break
                        raise
                    sent = time.monotonic()
                    records.append((sent, x, conn.receive()))
                return records

            def slow_receive(k):
                r = slow_conns[k].receive()
                slow_conns[k].close()
                return r

            results = []

            def run_hammers():
                try:
                    results.append(run_concurrently(4, hammer))
                except AssertionError as e:
                    results.append(e)

            runner = threading.Thread(target=run_hammers, daemon=True)
            runner.start()
            first = slow_receive(0)
            wait_for_requests(p.metrics_port, "slow_drain", 3, 2)  # one running, two queued
            t_signal[0] = time.monotonic()
            signalled.set()
            p.proc.send_signal(signal.SIGTERM)
            slow = [first] + run_concurrently(3, lambda k: slow_receive(k + 1))
            runner.join(60)
            self.assertEqual(p.proc.wait(timeout=60), 0, p.log_tail())
        finally:
            p.terminate(signal.SIGKILL)
        for k, r in enumerate(slow):
            self.assertIsNotNone(r, "slow request %d: no answer:\n%s" % (k, p.log_tail()))
            self.assertTrue(mean_output_ok(r, k), "slow request %d, %s at the signal: %r" % (
                k, "answered" if k == 0 else "running or queued", r))
            if k > 0:  # answered after the signal
                self.assertEqual(r.headers.get("connection"), "close")
        self.assertEqual(len(results), 1, "the load threads did not finish")
        self.assertNotIsInstance(results[0], AssertionError, results[0])
        records = [rec for recs in results[0] for rec in recs]
        lost, late_lost, answered = [], 0, 0
        for sent, x, r in records:
            if r is None:
                if sent < t_signal[0]:
                    lost.append(t_signal[0] - sent)
                else:
                    late_lost += 1
                continue
            answered += 1
            if r.status == 503 and sent >= t_signal[0]:
                self.assertIn("error", r.json())
                continue
            self.assertEqual(r.status, 200, "%s %.4f s %s the signal: %r" % (
                "sent", abs(t_signal[0] - sent), "before" if sent < t_signal[0] else "after", r))
            np.testing.assert_array_equal(decode(r).outputs["OUTPUT0"], x)
        if ARGS.verbose:
            print("load: %d requests, %d answered, %d sent before the signal and not answered "
                  "(%s s before it), %d sent after it and not answered"
                  % (len(records), answered, len(lost), ["%.4f" % t for t in lost], late_lost))
        self.assertGreater(answered, 0)
        self.assertEqual(lost, [], "requests sent before SIGTERM were not answered (seconds "
                         "between the send and the signal)")


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
    import harness  # noqa: E402 - beside this file; imported here, where it is used
    harness.generate_repository(ARGS.source_dir, repo,
                                ("make_test_models.py", "make_example_models.py"))
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
    # identity_fp32's model file under a config.pbtxt with a field Harrier does not know
    # (Triton's sequence batching) on line 3: only this model may fail to load.
    unknown_field = os.path.join(repo, "unknown_config_field")
    shutil.copytree(os.path.join(repo, "identity_fp32", "1"), os.path.join(unknown_field, "1"))
    with open(os.path.join(unknown_field, "config.pbtxt"), "w") as f:
        f.write('name: "unknown_config_field"\nplatform: "onnxruntime_onnx"\n'
                'sequence_batching { }\n')
    build_scheduling_repositories()


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
                 SchedulingTests, ConcurrencyTests, OneIoThreadTests, AdmissionProcessTests,
                 ProcessTests):
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
    # The smaller suites' rules: a skip outside harness.ALLOWED_SKIPS, or a run (-k) in which no
    # check ran, is a failure.
    import harness  # noqa: E402 - beside this file; imported here, where it is used
    passed, failed = harness.summarize(result, None)
    if rc != 0:
        print("shared server exited with %s on SIGTERM (expected 0):\n%s" % (rc, SERVER.log_tail()))
        failed += 1
    if failed:
        print("server log: %s" % SERVER.log_path)
    for test, _ in result.expectedFailures:
        print("expected failure (a feature not there yet): %s" % test.id())
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
