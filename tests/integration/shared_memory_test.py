#!/usr/bin/python3
"""Triton's system shared memory over REST, end to end with a real model.

usage: /usr/bin/python3 tests/integration/shared_memory_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Serves tools/make_test_models.py's `simple` (INT32 INPUT0, INPUT1 [N,16] -> OUTPUT0 sum,
OUTPUT1 difference) with --allow-client-shm and checks, as Triton's simple_http_shm_client
does it: regions registered, listed and unregistered; inputs read from regions, outputs
written to them (the response carries their metadata and no data), mixed with JSON and binary
tensors; and the bad-input list: a key that does not exist, a region outside its object, a
zero size, a name registered twice, a size that does not match the shape, an unknown region,
an output region too small — each a clear 400 that changes nothing. The POSIX shared-memory
objects are files under /dev/shm, made and removed by the test. Python stdlib only. The last
line is "N passed, N failed".
"""
import json
import os
import struct
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None
A = list(range(16))
B = [3] * 16


def request(method, path, body=None, headers=None):
    """(status, body bytes, response headers)."""
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (SERVER.port, path), data=data,
                                 method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def register(name, key, byte_size, offset=0):
    return request("POST", "/v2/systemsharedmemory/region/%s/register" % name,
                   {"key": key, "offset": offset, "byte_size": byte_size})[:2]


def status(name=None):
    path = "/v2/systemsharedmemory%s/status" % ("/region/" + name if name else "")
    code, body, _ = request("GET", path)
    return code, json.loads(body)


def infer(body, headers=None):
    code, answer, response_headers = request("POST", "/v2/models/simple/infer", body, headers)
    return code, answer, response_headers


def int32s(values):
    return struct.pack("<%di" % len(values), *values)


def shm(region, byte_size, offset=0):
    p = {"shared_memory_region": region, "shared_memory_byte_size": byte_size}
    if offset:
        p["shared_memory_offset"] = offset
    return p


def int32s_at(region, offset, n):
    """`n` little-endian int32s of a harness.ShmRegion, from byte `offset`."""
    return list(struct.unpack("<%di" % n, region.read(4 * n, offset)))


class SharedMemoryTest(unittest.TestCase):
    def setUp(self):
        self.objects = []
        self.assertEqual(request("POST", "/v2/systemsharedmemory/unregister")[0], 200)

    def tearDown(self):
        request("POST", "/v2/systemsharedmemory/unregister")
        for o in self.objects:
            o.destroy()

    def object(self, size):
        """A region under a name of this run's own, removed after the test."""
        o = harness.ShmRegion("/harrier_it_%d_%d" % (os.getpid(), len(self.objects)), size)
        self.objects.append(o)
        return o

    def assert_400(self, answer, fragment):
        code, body = answer[0], answer[1]
        self.assertEqual(code, 400, body)
        self.assertIn(fragment, json.loads(body)["error"])

    def test_extension_is_listed(self):
        code, body, _ = request("GET", "/v2")
        self.assertEqual(code, 200)
        self.assertIn("system_shared_memory", json.loads(body)["extensions"])

    def test_register_status_unregister(self):
        o = self.object(256)
        self.assertEqual(register("a", o.key, 128, offset=64), (200, b""))
        self.assertEqual(register("b", o.key, 16), (200, b""))
        want_a = {"name": "a", "key": o.key, "offset": 64, "byte_size": 128}
        self.assertEqual(status(), (200, [want_a, {"name": "b", "key": o.key, "offset": 0,
                                                   "byte_size": 16}]))
        self.assertEqual(status("a"), (200, [want_a]))
        self.assertEqual(request("POST", "/v2/systemsharedmemory/region/a/unregister")[0], 200)
        self.assertEqual([r["name"] for r in status()[1]], ["b"])
        self.assertEqual(request("POST", "/v2/systemsharedmemory/unregister")[0], 200)
        self.assertEqual(status(), (200, []))

    def test_bad_registrations_are_400_and_change_nothing(self):
        o = self.object(100)
        self.assertEqual(register("r", o.key, 100)[0], 200)
        before = status()
        self.assert_400(register("r", o.key, 10), "shared memory region 'r' already in manager")
        self.assert_400(register("x", "/harrier_it_no_such_key", 10),
                        "Unable to open shared memory region: '/harrier_it_no_such_key'")
        self.assert_400(register("x", o.key, 51, offset=50),
                        "failed to register shared memory region 'x': invalid args")
        self.assert_400(register("x", o.key, 0), "byte_size is 0")
        self.assert_400(register("x", "/../etc/passwd", 8), "not a shared-memory object name")
        self.assert_400(request("POST", "/v2/systemsharedmemory/region/x/register", b"{")[:2],
                        "failed to parse the request JSON buffer")
        self.assert_400(request("GET", "/v2/systemsharedmemory/region/x/status")[:2],
                        "Unable to find system shared memory region: 'x'")
        self.assertEqual(status(), before)
        # Unregistering twice (or a region never registered) has nothing to do, as in Triton.
        for _ in range(2):
            self.assertEqual(request("POST", "/v2/systemsharedmemory/region/r/unregister")[0],
                             200)
        self.assertEqual(status(), (200, []))

    def test_cuda_shared_memory_is_not_supported(self):
        self.assert_400(request("POST", "/v2/cudasharedmemory/region/g/register",
                                {"raw_handle": {"b64": ""}, "device_id": 0, "byte_size": 8})[:2],
                        "CUDA shared memory is not supported on this server (no GPU)")
        code, body, _ = request("GET", "/v2/cudasharedmemory/status")
        self.assertEqual((code, json.loads(body)), (200, []))
        # Triton's system shared-memory examples unregister CUDA regions before they start.
        self.assertEqual(request("POST", "/v2/cudasharedmemory/unregister")[0], 200)

    def simple_in_shm(self):
        """Triton's simple_http_shm_client: both inputs in one region, both outputs in another."""
        i, o = self.object(128), self.object(128)
        i.write(int32s(A) + int32s(B))
        self.assertEqual(register("input_data", i.key, 128)[0], 200)
        self.assertEqual(register("output_data", o.key, 128)[0], 200)
        body = {"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
             "parameters": shm("input_data", 64)},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
             "parameters": shm("input_data", 64, 64)}],
            "outputs": [
                {"name": "OUTPUT0", "parameters": dict(shm("output_data", 64), binary_data=True)},
                {"name": "OUTPUT1", "parameters": shm("output_data", 64, 64)}]}
        return i, o, body

    def test_inputs_and_outputs_in_shared_memory(self):
        _, o, body = self.simple_in_shm()
        code, answer, headers = infer(body)
        self.assertEqual(code, 200, answer)
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(json.loads(answer)["outputs"], [
            {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]},
            {"name": "OUTPUT1", "datatype": "INT32", "shape": [1, 16]}])
        self.assertEqual(int32s_at(o, 0, 16), [a + b for a, b in zip(A, B)])
        self.assertEqual(int32s_at(o, 64, 16), [a - b for a, b in zip(A, B)])

    def test_mixed_with_json_and_binary_tensors(self):
        i, o, _ = self.simple_in_shm()
        # INPUT0 from the region, INPUT1 as JSON; OUTPUT0 to the region, OUTPUT1 as JSON.
        code, answer, _ = infer({"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
             "parameters": shm("input_data", 64)},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [10] * 16}],
            "outputs": [{"name": "OUTPUT0", "parameters": shm("output_data", 64, 64)},
                        {"name": "OUTPUT1"}]})
        self.assertEqual(code, 200, answer)
        outputs = json.loads(answer)["outputs"]
        self.assertNotIn("data", outputs[0])
        self.assertEqual(outputs[1]["data"], [a - 10 for a in A])
        self.assertEqual(int32s_at(o, 64, 16), [a + 10 for a in A])
        # INPUT1 from the region, INPUT0 binary; OUTPUT1 binary, OUTPUT0 to the region.
        header = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16],
             "parameters": {"binary_data_size": 64}},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16],
             "parameters": shm("input_data", 64, 64)}],
            "outputs": [{"name": "OUTPUT0", "parameters": shm("output_data", 64)},
                        {"name": "OUTPUT1", "parameters": {"binary_data": True}}]}).encode()
        code, answer, headers = infer(header + int32s([7] * 16), {
            "Inference-Header-Content-Length": str(len(header))})
        self.assertEqual(code, 200, answer)
        n = int(headers["Inference-Header-Content-Length"])
        outputs = json.loads(answer[:n])["outputs"]
        self.assertEqual(outputs[0], {"name": "OUTPUT0", "datatype": "INT32", "shape": [1, 16]})
        self.assertEqual(outputs[1]["parameters"], {"binary_data_size": 64})
        self.assertEqual(list(struct.unpack("<16i", answer[n:])), [7 - b for b in B])
        self.assertEqual(int32s_at(o, 0, 16), [7 + b for b in B])

    def test_bad_inference_requests_are_400(self):
        _, o, body = self.simple_in_shm()
        regions = status()

        def changed(where, index, parameters):
            b = json.loads(json.dumps(body))
            b[where][index]["parameters"] = parameters
            return b

        cases = [
            ("inputs", 0, shm("input_data", 32),
             "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, "
             "got 32"),
            ("inputs", 1, shm("nope", 64), "Unable to find shared memory region: 'nope'"),
            ("inputs", 1, shm("input_data", 64, 100),
             "Invalid offset + byte size for shared memory region: 'input_data'"),
            ("inputs", 0, {"shared_memory_region": "input_data"},
             "must specify both 'shared_memory_region' and 'shared_memory_byte_size'"),
            ("outputs", 1, shm("output_data", 16, 64),
             "shared memory size specified with the request for output 'OUTPUT1' (16 bytes) "
             "should be at least 64 bytes to hold the results"),
            ("outputs", 1, shm("gone", 64), "Unable to find shared memory region: 'gone'"),
        ]
        for where, index, params, fragment in cases:
            o.write(bytes(128))
            self.assert_400(infer(changed(where, index, params))[:2], fragment)
            self.assertEqual(int32s_at(o, 0, 32), [0] * 32, "a refused request wrote a region")
        b = json.loads(json.dumps(body))
        b["inputs"][0]["data"] = A
        self.assert_400(infer(b)[:2], "has shared memory parameters and also 'data'")
        self.assertEqual(status(), regions)
        # The server still serves the good request.
        self.assertEqual(infer(body)[0], 200)
        self.assertEqual(int32s_at(o, 64, 16), [a - b for a, b in zip(A, B)])

    def test_unregistered_region_is_refused_and_reregistration_works(self):
        _, _, body = self.simple_in_shm()
        self.assertEqual(request("POST", "/v2/systemsharedmemory/region/input_data/unregister")[0],
                         200)
        self.assert_400(infer(body)[:2], "Unable to find shared memory region: 'input_data'")
        i2 = self.object(128)
        i2.write(int32s([1] * 16) + int32s([1] * 16))
        self.assertEqual(register("input_data", i2.key, 128)[0], 200)
        code, answer, _ = infer(body)
        self.assertEqual(code, 200, answer)


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo")
        harness.generate_repository(ARGS.source_dir, repo)
        SERVER = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "harrier.log"),
                                 ["--allow-client-shm", "true"])
        return SERVER

    suite = unittest.TestLoader().loadTestsFromTestCase(SharedMemoryTest)
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
