#!/usr/bin/python3
"""Triton's gRPC QA tests and gRPC client examples, ported: what each sends and checks, against Harrier.

usage: /usr/bin/python3 tests/integration/triton_qa_grpc_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Triton's `tritonclient.grpc` is grpcio with Triton's generated stubs; so is this test: the stubs
are generated at test time from Harrier's own .proto files (protoc and grpc_python_plugin, into
the work directory) and every call goes through Debian's python3-grpcio, sync, futures and
grpc.aio. Each test names the Triton file and case it ports (triton-inference-server/server
qa/L0_grpc/..., triton-inference-server/client src/python/examples/...); where Harrier answers
otherwise on purpose the test checks Harrier's documented answer and says so
(docs/triton-compatibility.md, "Triton's QA tests and client examples").

Models: tools/make_triton_models.py (simple, simple_int8, simple_string, simple_identity with
Triton's configs). Servers: one in the default mode with --allow-client-shm, one in explicit
mode (model control), one with Triton's restricted protocols, and nginx with basic auth in front
of the first (grpc_basic_auth_test.py). The last line is "N passed, N failed".
"""
import asyncio
import base64
import os
import struct
import subprocess
import sys
import time
import unittest

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
pb = None  # grpc_service_pb2, generated in setUpModule
pb_grpc = None
grpc = None
REPO = None
MAIN = None  # the default-mode server, shared by the classes that only read


def generate_stubs():
    """Python stubs of Harrier's .proto files, generated into the work directory."""
    global pb, pb_grpc, grpc
    out = os.path.join(ARGS.work_dir, "stubs")
    os.makedirs(out, exist_ok=True)
    src = os.path.abspath(ARGS.source_dir)
    subprocess.run(["protoc", "-I", os.path.join(src, "src", "protocol", "grpc"),
                    "-I", os.path.join(src, "src", "repository"),
                    "--python_out=" + out, "--grpc_python_out=" + out,
                    "--plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin",
                    "grpc_service.proto", "model_config.proto"], check=True)
    sys.path.insert(0, out)
    import grpc as grpc_module
    import grpc_service_pb2
    import grpc_service_pb2_grpc
    grpc, pb, pb_grpc = grpc_module, grpc_service_pb2, grpc_service_pb2_grpc


def start(name, extra_args=()):
    return harness.Harrier(ARGS.harrier, REPO, os.path.join(ARGS.work_dir, name + ".log"),
                           list(extra_args))


def stop(server):
    """SIGTERM; an exit status other than 0 fails the class (an error in tearDownClass)."""
    rc = server.terminate()
    if rc != 0:
        raise AssertionError("harrier exited with %s on SIGTERM: %s" % (rc, server.log_path))


def channel(server, options=None):
    return grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port, options=options or [])


def stub(server, options=None):
    return pb_grpc.GRPCInferenceServiceStub(channel(server, options))


# ---- tensors as tritonclient sends and reads them -------------------------------------------

def serialize_bytes(values):
    """BYTES raw form (tritonclient.utils.serialize_byte_tensor): 4-byte LE length + bytes."""
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def deserialize_bytes(raw):
    out, at = [], 0
    while at < len(raw):
        (n,) = struct.unpack_from("<I", raw, at)
        out.append(raw[at + 4:at + 4 + n])
        at += 4 + n
    return out


def infer_input(name, datatype, shape, raw=None, shm=None):
    """An InferInputTensor; its bytes go to raw_input_contents (returned) as tritonclient's
    set_data_from_numpy does, or to shared memory parameters (`shm` = (region, size, offset))."""
    t = pb.ModelInferRequest.InferInputTensor(name=name, datatype=datatype, shape=shape)
    if shm is not None:
        set_shm(t.parameters, *shm)
    return t


def set_shm(parameters, region, byte_size, offset=0):
    """tritonclient's set_shared_memory: the offset only when it is not 0."""
    parameters["shared_memory_region"].string_param = region
    parameters["shared_memory_byte_size"].int64_param = byte_size
    if offset:
        parameters["shared_memory_offset"].int64_param = offset


def simple_request(model="simple", a=None, b=None, outputs=("OUTPUT0", "OUTPUT1")):
    """simple_grpc_infer_client.py's request: INPUT0 = 0..15, INPUT1 = ones, [1, 16] INT32."""
    a = np.arange(16, dtype=np.int32).reshape(1, 16) if a is None else a
    b = np.ones((1, 16), dtype=np.int32) if b is None else b
    r = pb.ModelInferRequest(model_name=model)
    r.inputs.extend([infer_input("INPUT0", "INT32", [1, 16]), infer_input("INPUT1", "INT32", [1, 16])])
    r.raw_input_contents.extend([a.tobytes(), b.tobytes()])
    for o in outputs or ():
        r.outputs.add(name=o)
    return r, a, b


def as_numpy(response, name, dtype):
    """tritonclient's InferResult.as_numpy: the output's raw_output_contents entry by index."""
    for i, o in enumerate(response.outputs):
        if o.name == name:
            if dtype is object:
                return np.array(deserialize_bytes(response.raw_output_contents[i]),
                                dtype=object).reshape(list(o.shape))
            return np.frombuffer(response.raw_output_contents[i], dtype=dtype).reshape(
                list(o.shape))
    raise AssertionError("no output %s in %s" % (name, [o.name for o in response.outputs]))


def check_sum_diff(test, response, a, b, dtype=np.int32):
    np.testing.assert_array_equal(as_numpy(response, "OUTPUT0", dtype), a + b)
    np.testing.assert_array_equal(as_numpy(response, "OUTPUT1", dtype), a - b)


Shm = harness.ShmRegion  # a region's object, as tritonclient.utils.shared_memory makes one


def raises(test, code, fragment, call, *args, **kwargs):
    """Asserts that `call` raises grpc.RpcError with `code` (None: any code) and `fragment` in
    its details."""
    with test.assertRaises(grpc.RpcError) as cm:
        call(*args, **kwargs)
    if code is not None:
        test.assertEqual(cm.exception.code(), code, cm.exception.details())
    test.assertIn(fragment, cm.exception.details())
    return cm.exception


def model_count():
    return len([d for d in os.listdir(REPO) if os.path.isdir(os.path.join(REPO, d))])


# ---- the default-mode server ----------------------------------------------------------------

class ClientExamplesTest(unittest.TestCase):
    """triton-inference-server/client src/python/examples/simple_grpc_*.py and grpc_*.py, as
    qa/L0_grpc/test.sh runs them against a default-mode server."""

    def setUp(self):
        self.stub = stub(MAIN)

    def test_simple_grpc_health_metadata(self):
        """simple_grpc_health_metadata.py: health with custom headers, metadata, an unknown
        model's "Request for unknown model", the config's name. Differs on purpose: the server
        name is 'harrier', not 'triton' (docs/triton-compatibility.md)."""
        md = [("test", "1"), ("dummy", "2")]
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), metadata=md).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="simple")).ready)
        self.assertEqual(self.stub.ServerMetadata(pb.ServerMetadataRequest()).name, "harrier")
        meta = self.stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"), metadata=md)
        self.assertEqual(meta.name, "simple")
        self.assertEqual([(t.name, t.datatype, list(t.shape)) for t in meta.inputs],
                         [("INPUT0", "INT32", [-1, 16]), ("INPUT1", "INT32", [-1, 16])])
        e = raises(self, grpc.StatusCode.NOT_FOUND, "Request for unknown model",
                   self.stub.ModelMetadata, pb.ModelMetadataRequest(name="wrong_model_name"))
        self.assertTrue(e.details().startswith("Request for unknown model"), e.details())
        self.assertEqual(self.stub.ModelConfig(pb.ModelConfigRequest(name="simple")).config.name,
                         "simple")

    def test_simple_grpc_infer_client(self):
        """simple_grpc_infer_client.py: with outputs and a 'test: 1' header, the statistics of
        one model, then without outputs (every output comes back)."""
        request, a, b = simple_request()
        check_sum_diff(self, self.stub.ModelInfer(request, metadata=[("test", "1")]), a, b)
        stats = self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="simple"))
        self.assertEqual(len(stats.model_stats), 1)
        self.assertGreaterEqual(stats.model_stats[0].inference_stats.success.count, 1)
        request, a, b = simple_request(outputs=None)
        response = self.stub.ModelInfer(request)
        self.assertEqual(sorted(o.name for o in response.outputs), ["OUTPUT0", "OUTPUT1"])
        check_sum_diff(self, response, a, b)

    def test_simple_grpc_infer_client_compressed(self):
        """qa/L0_grpc/test.sh, the compression case: simple_grpc_infer_client.py -C deflate
        (and gzip). Differs: Harrier answers uncompressed (no
        --grpc-infer-response-compression-level), which every gRPC client reads."""
        for algorithm in (grpc.Compression.Deflate, grpc.Compression.Gzip):
            request, a, b = simple_request()
            check_sum_diff(self, self.stub.ModelInfer(request, compression=algorithm), a, b)

    def test_simple_grpc_async_infer_client(self):
        """simple_grpc_async_infer_client.py: async_infer with a callback, the answer within
        10 s."""
        request, a, b = simple_request()
        done = []
        future = self.stub.ModelInfer.future(request)
        future.add_done_callback(lambda f: done.append(f))
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(len(done), 1)
        check_sum_diff(self, done[0].result(), a, b)

    def test_simple_grpc_string_infer_client(self):
        """simple_grpc_string_infer_client.py: simple_string's decimal strings summed and
        subtracted; simple_identity returns strings with an embedded NUL and 4-byte binary
        blobs unchanged."""
        a = np.arange(16, dtype=np.int32).reshape(1, 16)
        b = np.ones((1, 16), dtype=np.int32)
        r = pb.ModelInferRequest(model_name="simple_string")
        r.inputs.extend([infer_input("INPUT0", "BYTES", [1, 16]),
                         infer_input("INPUT1", "BYTES", [1, 16])])
        r.raw_input_contents.extend([serialize_bytes([str(x).encode() for x in a.flat]),
                                     serialize_bytes([str(x).encode() for x in b.flat])])
        r.outputs.add(name="OUTPUT0")
        r.outputs.add(name="OUTPUT1")
        response = self.stub.ModelInfer(r)
        out0 = as_numpy(response, "OUTPUT0", object)
        out1 = as_numpy(response, "OUTPUT1", object)
        self.assertEqual([int(x) for x in out0.flat], list((a + b).flat))
        self.assertEqual([int(x) for x in out1.flat], list((a - b).flat))
        for values in ([b"he\x00llo"] * 16, [b"\x00\x01\x02\x03"] * 16):
            r = pb.ModelInferRequest(model_name="simple_identity")
            r.inputs.append(infer_input("INPUT0", "BYTES", [1, 16]))
            r.raw_input_contents.append(serialize_bytes(values))
            r.outputs.add(name="OUTPUT0")
            self.assertEqual(list(as_numpy(self.stub.ModelInfer(r), "OUTPUT0", object).flat),
                             values)

    def test_simple_grpc_shm_client(self):
        """simple_grpc_shm_client.py: both inputs in one region (the second at an offset), both
        outputs in another; the sum and difference read from shared memory; status, then
        unregister all."""
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        self.stub.CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest())
        a = np.arange(16, dtype=np.int32)
        b = np.ones(16, dtype=np.int32)
        size = a.nbytes
        out = Shm("/output_simple_qagrpc", size * 2)
        inp = Shm("/input_simple_qagrpc", size * 2)
        try:
            self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                name="output_data", key=out.key, byte_size=size * 2))
            inp.write(a.tobytes())
            inp.write(b.tobytes(), size)
            self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                name="input_data", key=inp.key, byte_size=size * 2))
            r = pb.ModelInferRequest(model_name="simple")
            r.inputs.extend([infer_input("INPUT0", "INT32", [1, 16], shm=("input_data", size)),
                             infer_input("INPUT1", "INT32", [1, 16],
                                         shm=("input_data", size, size))])
            o0, o1 = r.outputs.add(name="OUTPUT0"), r.outputs.add(name="OUTPUT1")
            set_shm(o0.parameters, "output_data", size)
            set_shm(o1.parameters, "output_data", size, size)
            response = self.stub.ModelInfer(r)
            self.assertEqual([list(o.shape) for o in response.outputs], [[1, 16], [1, 16]])
            np.testing.assert_array_equal(np.frombuffer(out.read(size), np.int32), a + b)
            np.testing.assert_array_equal(np.frombuffer(out.read(size, size), np.int32), a - b)
            status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
            self.assertEqual(sorted(status.regions), ["input_data", "output_data"])
            self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
            status = self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
            self.assertEqual(len(status.regions), 0)
        finally:
            inp.destroy()
            out.destroy()

    def test_simple_grpc_shm_string_client(self):
        """simple_grpc_shm_string_client.py: simple_string's BYTES inputs and outputs each in a
        region of their own, serialized (4-byte lengths); the outputs' bytes are exactly the
        serialized expected strings."""
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        a, b = np.arange(16, dtype=np.int32), np.ones(16, dtype=np.int32)
        in0 = serialize_bytes([str(x).encode() for x in a])
        in1 = serialize_bytes([str(x).encode() for x in b])
        sum_ = serialize_bytes([str(x).encode() for x in a + b])
        diff = serialize_bytes([str(x).encode() for x in a - b])
        regions = {"output0_data": Shm("/output0_simple_qagrpc", len(sum_)),
                   "output1_data": Shm("/output1_simple_qagrpc", len(diff)),
                   "input0_data": Shm("/input0_simple_qagrpc", len(in0)),
                   "input1_data": Shm("/input1_simple_qagrpc", len(in1))}
        try:
            regions["input0_data"].write(in0)
            regions["input1_data"].write(in1)
            for name, shm in regions.items():
                self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name=name, key=shm.key, byte_size=len(shm.map)))
            r = pb.ModelInferRequest(model_name="simple_string")
            r.inputs.extend([infer_input("INPUT0", "BYTES", [1, 16], shm=("input0_data", len(in0))),
                             infer_input("INPUT1", "BYTES", [1, 16], shm=("input1_data", len(in1)))])
            set_shm(r.outputs.add(name="OUTPUT0").parameters, "output0_data", len(sum_))
            set_shm(r.outputs.add(name="OUTPUT1").parameters, "output1_data", len(diff))
            response = self.stub.ModelInfer(r)
            self.assertEqual([o.datatype for o in response.outputs], ["BYTES", "BYTES"])
            self.assertEqual(regions["output0_data"].read(len(sum_)), sum_)
            self.assertEqual(regions["output1_data"].read(len(diff)), diff)
            self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        finally:
            for shm in regions.values():
                shm.destroy()

    def test_reuse_infer_objects_client(self):
        """reuse_infer_objects_client.py -i grpc: the same inputs and outputs used with shared
        memory, then without (INPUT1 doubled, the shm parameters dropped), then with again."""
        self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        a, b = np.arange(16, dtype=np.int32), np.ones(16, dtype=np.int32)
        size = a.nbytes
        regions = {n: Shm("/%s_qagrpc" % n, size)
                   for n in ("output0_data", "output1_data", "input0_data", "input1_data")}
        try:
            regions["input0_data"].write(a.tobytes())
            regions["input1_data"].write(b.tobytes())
            for name, shm in regions.items():
                self.stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name=name, key=shm.key, byte_size=size))
            for use_shm in (True, False, True):
                if use_shm:
                    r = pb.ModelInferRequest(model_name="simple")
                    r.inputs.extend(
                        [infer_input("INPUT0", "INT32", [1, 16], shm=("input0_data", size)),
                         infer_input("INPUT1", "INT32", [1, 16], shm=("input1_data", size))])
                    set_shm(r.outputs.add(name="OUTPUT0").parameters, "output0_data", size)
                    set_shm(r.outputs.add(name="OUTPUT1").parameters, "output1_data", size)
                    self.stub.ModelInfer(r)
                    got0 = np.frombuffer(regions["output0_data"].read(size), np.int32)
                    got1 = np.frombuffer(regions["output1_data"].read(size), np.int32)
                    np.testing.assert_array_equal(got0, a + b)
                    np.testing.assert_array_equal(got1, a - b)
                else:
                    r, x, y = simple_request(a=a.reshape(1, 16), b=(b * 2).reshape(1, 16))
                    check_sum_diff(self, self.stub.ModelInfer(r), x, y)
            self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())
        finally:
            for shm in regions.values():
                shm.destroy()

    def test_simple_grpc_keepalive_client(self):
        """simple_grpc_keepalive_client.py: the client's keepalive options (a ping every 2^31-1
        ms, 20 s timeout, none without calls, 2 pings without data) and a 'test: 1' header."""
        s = stub(MAIN, [("grpc.keepalive_time_ms", 2 ** 31 - 1),
                        ("grpc.keepalive_timeout_ms", 20000),
                        ("grpc.keepalive_permit_without_calls", 0),
                        ("grpc.http2.max_pings_without_data", 2)])
        request, a, b = simple_request()
        check_sum_diff(self, s.ModelInfer(request, metadata=[("test", "1")]), a, b)

    def test_simple_grpc_custom_args_client(self):
        """simple_grpc_custom_args_client.py: custom channel arguments (1 MiB message limits,
        keepalive, SRV queries)."""
        s = stub(MAIN, [("grpc.max_send_message_length", 1024 * 1024),
                        ("grpc.max_receive_message_length", 1024 * 1024),
                        ("grpc.keepalive_time_ms", 2 ** 31 - 1),
                        ("grpc.keepalive_timeout_ms", 20000),
                        ("grpc.keepalive_permit_without_calls", 0),
                        ("grpc.http2.max_pings_without_data", 2),
                        ("grpc.dns_enable_srv_queries", 1)])
        request, a, b = simple_request()
        check_sum_diff(self, s.ModelInfer(request, metadata=[("test", "1")]), a, b)

    def test_grpc_explicit_byte_content_client(self):
        """grpc_explicit_byte_content_client.py: simple_string with typed bytes_contents; the
        outputs read from raw_output_contents in response order."""
        r = pb.ModelInferRequest(model_name="simple_string", model_version="")
        i0, i1 = r.inputs.add(name="INPUT0", datatype="BYTES"), r.inputs.add(name="INPUT1",
                                                                           datatype="BYTES")
        i0.shape.extend([1, 16])
        i1.shape.extend([1, 16])
        i0.contents.bytes_contents.extend([str(i).encode() for i in range(16)])
        i1.contents.bytes_contents.extend([b"1"] * 16)
        r.outputs.add(name="OUTPUT0")
        r.outputs.add(name="OUTPUT1")
        response = self.stub.ModelInfer(r)
        self.assertEqual(len(response.raw_output_contents), 2)
        results = [deserialize_bytes(raw) for raw in response.raw_output_contents]
        self.assertEqual([int(x) for x in results[0]], [i + 1 for i in range(16)])
        self.assertEqual([int(x) for x in results[1]], [i - 1 for i in range(16)])

    def explicit_int(self, model, datatype, dtype):
        r = pb.ModelInferRequest(model_name=model, model_version="")
        for name, values in (("INPUT0", list(range(16))), ("INPUT1", [1] * 16)):
            t = r.inputs.add(name=name, datatype=datatype)
            t.shape.extend([1, 16])
            t.contents.int_contents[:] = values
        r.outputs.add(name="OUTPUT0")
        r.outputs.add(name="OUTPUT1")
        response = self.stub.ModelInfer(r)
        results = [np.frombuffer(raw, dtype=dtype) for raw in response.raw_output_contents]
        self.assertEqual(len(results), 2)
        self.assertEqual(list(results[0]), [i + 1 for i in range(16)])
        self.assertEqual(list(results[1]), [i - 1 for i in range(16)])
        return r

    def test_grpc_explicit_int_content_client(self):
        """grpc_explicit_int_content_client.py: simple with int_contents; then a raw entry for
        INPUT0 next to its typed contents is refused in Triton's words."""
        r = self.explicit_int("simple", "INT32", np.int32)
        r.raw_input_contents.extend([np.arange(8).tobytes()])
        r.inputs[0].contents.int_contents[:] = list(range(8, 16))
        raises(self, grpc.StatusCode.INVALID_ARGUMENT,
               "contents field must not be specified when using raw_input_contents for "
               "'INPUT0' for model 'simple'", self.stub.ModelInfer, r)

    def test_grpc_explicit_int8_content_client(self):
        """grpc_explicit_int8_content_client.py: simple_int8 with int_contents; then a model
        version that is not a number, refused in Triton's words."""
        r = self.explicit_int("simple_int8", "INT8", np.int8)
        r.model_version = "wrong_specification"
        raises(self, grpc.StatusCode.INVALID_ARGUMENT,
               "failed to get model version from specified version string "
               "'wrong_specification'", self.stub.ModelInfer, r)

    def test_grpc_client(self):
        """grpc_client.py: the raw stub's health, metadata, config and an infer with an id (on
        'simple': the example's densenet_onnx is an image model). The id comes back."""
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest()).live)
        self.assertTrue(self.stub.ServerReady(pb.ServerReadyRequest()).ready)
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="simple", version="")).ready)
        self.assertTrue(self.stub.ServerMetadata(pb.ServerMetadataRequest()).version)
        self.assertEqual(self.stub.ModelMetadata(pb.ModelMetadataRequest(name="simple")).platform,
                         "onnxruntime_onnx")
        config = self.stub.ModelConfig(pb.ModelConfigRequest(name="simple", version="")).config
        self.assertEqual(config.max_batch_size, 8)
        request, a, b = simple_request(outputs=("OUTPUT0",))
        request.id = "my request id"
        response = self.stub.ModelInfer(request)
        self.assertEqual(response.id, "my request id")
        self.assertEqual([o.name for o in response.outputs], ["OUTPUT0"])
        np.testing.assert_array_equal(as_numpy(response, "OUTPUT0", np.int32), a + b)

    def test_stream_infer_non_decoupled(self):
        """The streaming path of image_client.py --streaming and simple_grpc_sequence_stream_
        infer_client.py without sequences: ModelStreamInfer on a one-response model, one
        response per request, matched by id; a failed request is an in-band error_message and
        the stream goes on."""
        requests = []
        for i in range(4):
            r, _, _ = simple_request(a=np.full((1, 16), i, np.int32))
            r.id = str(i)
            requests.append(r)
        bad, _, _ = simple_request(model="wrong_model_name")
        bad.id = "bad"
        requests.insert(2, bad)
        responses = list(self.stub.ModelStreamInfer(iter(requests), timeout=30))
        self.assertEqual(len(responses), 5)
        by_id = {}
        for resp in responses:
            if resp.error_message:
                by_id["error"] = resp.error_message
            else:
                by_id[resp.infer_response.id] = resp.infer_response
        self.assertIn("Request for unknown model", by_id["error"])
        for i in range(4):
            np.testing.assert_array_equal(as_numpy(by_id[str(i)], "OUTPUT0", np.int32),
                                          np.full((1, 16), i + 1, np.int32))

    def test_grpc_health_probe(self):
        """qa/L0_grpc/test.sh, "Test GRPC health check implemented": grpc-health-probe's
        grpc.health.v1.Health/Check answers SERVING (status 1) on a ready server."""
        check = channel(MAIN).unary_unary("/grpc.health.v1.Health/Check",
                                          request_serializer=lambda b: b,
                                          response_deserializer=lambda b: b)
        self.assertEqual(check(b""), b"\x08\x01")
        self.assertEqual(check(b"\x0a\x06simple"), b"\x08\x01")  # service is ignored, as Triton


class GrpcAioTest(unittest.IsolatedAsyncioTestCase):
    """qa/L0_grpc/python_grpc_aio_test.py (TestGrpcAioClient) and simple_grpc_aio_infer_client.py,
    through grpc.aio as tritonclient.grpc.aio."""

    async def asyncSetUp(self):
        self.channel = grpc.aio.insecure_channel("127.0.0.1:%d" % MAIN.grpc_port)
        self.stub = pb_grpc.GRPCInferenceServiceStub(self.channel)

    async def asyncTearDown(self):
        await self.channel.close()

    async def aio_raises(self, code, fragment, call):
        with self.assertRaises(grpc.aio.AioRpcError) as cm:
            await call
        self.assertEqual(cm.exception.code(), code, cm.exception.details())
        self.assertIn(fragment, cm.exception.details())

    async def test_is_server_live_ready_model_ready(self):
        """test_is_server_live, test_is_server_ready, test_is_model_ready."""
        self.assertTrue((await self.stub.ServerLive(pb.ServerLiveRequest())).live)
        self.assertTrue((await self.stub.ServerReady(pb.ServerReadyRequest())).ready)
        self.assertTrue((await self.stub.ModelReady(pb.ModelReadyRequest(name="simple"))).ready)

    async def test_get_server_model_metadata_and_config(self):
        """test_get_server_metadata (name 'harrier', not 'triton': documented),
        test_get_model_metadata, test_get_model_config."""
        self.assertEqual((await self.stub.ServerMetadata(pb.ServerMetadataRequest())).name,
                         "harrier")
        self.assertEqual((await self.stub.ModelMetadata(pb.ModelMetadataRequest(name="simple"))).name,
                         "simple")
        config = await self.stub.ModelConfig(pb.ModelConfigRequest(name="simple"))
        self.assertEqual(config.config.name, "simple")

    async def test_get_model_repository_index(self):
        """test_get_model_repository_index: one entry per model of the repository (Triton's
        has 8 models; this one has its own count)."""
        index = await self.stub.RepositoryIndex(pb.RepositoryIndexRequest())
        self.assertEqual(len(index.models), model_count())

    async def test_load_and_unload_model(self):
        """test_load_model, test_unload_model: UNAVAILABLE, "explicit model load / unload is not
        allowed if polling is enabled", outside explicit mode."""
        words = "explicit model load / unload is not allowed if polling is enabled"
        await self.aio_raises(grpc.StatusCode.UNAVAILABLE, words, self.stub.RepositoryModelLoad(
            pb.RepositoryModelLoadRequest(model_name="simple")))
        await self.aio_raises(grpc.StatusCode.UNAVAILABLE, words, self.stub.RepositoryModelUnload(
            pb.RepositoryModelUnloadRequest(model_name="simple")))

    async def test_get_inference_statistics(self):
        """test_get_inference_statistics: every model's statistics."""
        stats = await self.stub.ModelStatistics(pb.ModelStatisticsRequest())
        self.assertEqual(len(stats.model_stats), model_count())

    async def test_trace_settings_are_unimplemented(self):
        """test_update_trace_settings, test_get_trace_settings: not supported (tracing is
        OpenTelemetry, by flags): UNIMPLEMENTED, documented."""
        call = self.channel.unary_unary("/inference.GRPCInferenceService/TraceSetting",
                                        request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)
        await self.aio_raises(grpc.StatusCode.UNIMPLEMENTED, "TraceSetting", call(b""))

    async def test_system_shared_memory(self):
        """test_get_system_shared_memory_status, test_register_system_shared_memory ("Unable to
        open shared memory region: ''"; INVALID_ARGUMENT where Triton says INTERNAL:
        documented), test_unregister_system_shared_memory."""
        await self.stub.SystemSharedMemoryStatus(pb.SystemSharedMemoryStatusRequest())
        await self.aio_raises(grpc.StatusCode.INVALID_ARGUMENT,
                              "Unable to open shared memory region: ''",
                              self.stub.SystemSharedMemoryRegister(
                                  pb.SystemSharedMemoryRegisterRequest(name="", key="",
                                                                       byte_size=0)))
        await self.stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest())

    async def test_cuda_shared_memory(self):
        """test_get_cuda_shared_memory_status, test_register_cuda_shared_memory (INVALID_ARGUMENT,
        as Triton; the words are Harrier's: no GPU), test_unregister_cuda_shared_memory."""
        status = await self.stub.CudaSharedMemoryStatus(pb.CudaSharedMemoryStatusRequest())
        self.assertEqual(len(status.regions), 0)
        await self.aio_raises(grpc.StatusCode.INVALID_ARGUMENT,
                              "CUDA shared memory is not supported",
                              self.stub.CudaSharedMemoryRegister(
                                  pb.CudaSharedMemoryRegisterRequest(name="", raw_handle=b"",
                                                                     device_id=0, byte_size=0)))
        await self.stub.CudaSharedMemoryUnregister(pb.CudaSharedMemoryUnregisterRequest())

    async def test_simple_grpc_aio_infer_client(self):
        """simple_grpc_aio_infer_client.py: infer with outputs and a header, statistics of one
        model, then two requests without outputs at once (asyncio.gather)."""
        request, a, b = simple_request()
        check_sum_diff(self, await self.stub.ModelInfer(request, metadata=[("test", "1")]), a, b)
        stats = await self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="simple"))
        self.assertEqual(len(stats.model_stats), 1)
        request, a, b = simple_request(outputs=None)
        r1, r2 = await asyncio.gather(self.stub.ModelInfer(request), self.stub.ModelInfer(request))
        check_sum_diff(self, r1, a, b)
        check_sum_diff(self, r2, a, b)


# ---- servers of their own -------------------------------------------------------------------

class ModelControlTest(unittest.TestCase):
    """simple_grpc_model_control.py against --model-control-mode explicit (qa/L0_grpc/test.sh's
    model control case)."""

    @classmethod
    def setUpClass(cls):
        # --id triton: Triton's name, which simple_grpc_health_metadata.py checks.
        cls.server = start("explicit", ["--model-control-mode", "explicit", "--id", "triton"])

    @classmethod
    def tearDownClass(cls):
        stop(cls.server)

    def test_simple_grpc_model_control(self):
        s = stub(self.server)
        self.assertEqual(s.ServerMetadata(pb.ServerMetadataRequest()).name, "triton")  # --id
        self.assertEqual(len(s.RepositoryIndex(pb.RepositoryIndexRequest()).models), model_count())
        s.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="simple"))
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="simple")).ready)
        self.assertEqual(s.ModelConfig(pb.ModelConfigRequest(name="simple")).config.max_batch_size,
                         8)

        def load(name, config=None, files=None):
            r = pb.RepositoryModelLoadRequest(model_name=name)
            if config is not None:
                r.parameters["config"].string_param = config
            for path, data in (files or {}).items():
                r.parameters[path].bytes_param = data
            return s.RepositoryModelLoad(r)

        # A config override that is not JSON: "failed to load"; the old version keeps serving.
        e = raises(self, e_code(), "failed to load", load, "simple",
                   '"parameters": {"config": {{"max_batch_size": "16"}}}')
        self.assertTrue(s.ModelReady(pb.ModelReadyRequest(name="simple")).ready, e.details())
        load("simple", '{"max_batch_size":"16"}')
        self.assertEqual(s.ModelConfig(pb.ModelConfigRequest(name="simple")).config.max_batch_size,
                         16)
        s.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="simple"))
        self.assertFalse(s.ModelReady(pb.ModelReadyRequest(name="simple")).ready)
        # A path component longer than NAME_MAX is refused and the server lives on.
        raises(self, grpc.StatusCode.INVALID_ARGUMENT, "Invalid file path", load, "simple", "{}",
               {"file:" + "A" * 256: b"a"})
        self.assertTrue(s.ServerLive(pb.ServerLiveRequest()).live)
        raises(self, e_code(), "failed to load", load, "wrong_model_name")


def e_code():
    """What a failed load answers: the example matches only the message, so any code."""
    return None


class RestrictedProtocolTest(unittest.TestCase):
    """qa/L0_grpc/python_unit_test.py RestrictedProtocolTest, with test.sh's flags:
    model-repository:admin-key=admin-value and inference,health:infer-key=infer-value; clients
    send 'triton-grpc-protocol-<key>'. Differs on purpose: a refusal is PERMISSION_DENIED, not
    UNAVAILABLE (documented), with Triton's words."""

    PREFIX = "triton-grpc-protocol-"

    @classmethod
    def setUpClass(cls):
        cls.server = start("restricted", [
            "--grpc-restricted-protocol", "model-repository:admin-key=admin-value",
            "--grpc-restricted-protocol", "inference,health:infer-key=infer-value"])

    @classmethod
    def tearDownClass(cls):
        stop(cls.server)

    def setUp(self):
        self.stub = stub(self.server)
        self.infer_key = [(self.PREFIX + "infer-key", "infer-value")]
        self.admin_key = [(self.PREFIX + "admin-key", "admin-value")]

    def refused(self, call, *args, **kwargs):
        return raises(self, grpc.StatusCode.PERMISSION_DENIED, "This protocol is restricted",
                      call, *args, **kwargs)

    def test_sanity(self):
        """Protocols not listed are not restricted."""
        self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="simple"))
        self.stub.ModelStatistics(pb.ModelStatisticsRequest(name="simple"), metadata=self.infer_key)

    def test_model_repository(self):
        e = self.refused(self.stub.RepositoryModelUnload,
                         pb.RepositoryModelUnloadRequest(model_name="simple"),
                         metadata=self.infer_key)
        self.assertIn("expecting header 'triton-grpc-protocol-admin-key'", e.details())
        raises(self, grpc.StatusCode.UNAVAILABLE, "explicit model load / unload is not allowed",
               self.stub.RepositoryModelUnload, pb.RepositoryModelUnloadRequest(model_name="simple"),
               metadata=self.admin_key)

    def test_health(self):
        """is_server_live without and with the header; ModelReady and gRPC's Health/Check are in
        the health protocol too (Triton's grouping); the key alone without the prefix is not
        enough."""
        self.refused(self.stub.ServerLive, pb.ServerLiveRequest())
        self.refused(self.stub.ServerLive, pb.ServerLiveRequest(),
                     metadata=[("infer-key", "infer-value")])
        self.assertTrue(self.stub.ServerLive(pb.ServerLiveRequest(), metadata=self.infer_key).live)
        self.refused(self.stub.ModelReady, pb.ModelReadyRequest(name="simple"))
        self.assertTrue(self.stub.ModelReady(pb.ModelReadyRequest(name="simple"),
                                             metadata=self.infer_key).ready)
        check = channel(self.server).unary_unary("/grpc.health.v1.Health/Check",
                                                 request_serializer=lambda b: b,
                                                 response_deserializer=lambda b: b)
        self.refused(check, b"")
        self.assertEqual(check(b"", metadata=self.infer_key), b"\x08\x01")

    def test_infer(self):
        request, a, b = simple_request()
        self.refused(self.stub.ModelInfer, request, metadata=[("test", "1")])
        check_sum_diff(self, self.stub.ModelInfer(request, metadata=self.infer_key), a, b)

    def test_stream_infer(self):
        """A stream opened without the header ends with the refusal before any response; with
        it, the request is answered."""
        request, a, b = simple_request()
        responses = self.stub.ModelStreamInfer(iter([request]), metadata=[("test", "1")],
                                               timeout=30)
        e = self.refused(list, responses)
        self.assertIn("expecting header 'triton-grpc-protocol-infer-key'", e.details())
        responses = list(self.stub.ModelStreamInfer(iter([request]), metadata=self.infer_key,
                                                    timeout=30))
        self.assertEqual(len(responses), 1)
        self.assertEqual(responses[0].error_message, "")
        check_sum_diff(self, responses[0].infer_response, a, b)


class RestrictedProtocolStartupTest(unittest.TestCase):
    """qa/L0_grpc/test.sh: "Repeated protocol, not allowed" and "Unknown protocol, not allowed":
    the server does not start and says why in Triton's words."""

    def run_harrier(self, *flags):
        args = [ARGS.harrier, "serve", "--model-repository", REPO, "--http-port", "0",
                "--grpc-port", "0", "--metrics-port", "0"]
        for f in flags:
            args += ["--grpc-restricted-protocol", f]
        return subprocess.run(args, capture_output=True, text=True, timeout=120)

    def test_repeated_protocol(self):
        r = self.run_harrier("model-repository,health:k1=v1", "metadata,health:k2=v2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("protocol 'health' can not be specified in multiple config groups",
                      r.stderr)

    def test_unknown_protocol(self):
        r = self.run_harrier("model-reposit,health:k1=v1", "metadata,health:k2=v2")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("unknown restricted protocol 'model-reposit'", r.stderr)


class BasicAuthTest(unittest.TestCase):
    """qa/L0_grpc/grpc_basic_auth_test.py with its nginx.conf: nginx with HTTP basic auth and
    grpc_pass in front of the gRPC port; the client's BasicAuth plugin sends
    'authorization: Basic base64(username:password)'. Sync and grpc.aio clients; without the
    header nginx refuses (UNAUTHENTICATED)."""

    @classmethod
    def setUpClass(cls):
        d = os.path.join(ARGS.work_dir, "nginx")
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        os.chmod(os.path.join(d, "tmp"), 0o777)
        hashed = subprocess.run(["openssl", "passwd", "-apr1", "password"], check=True,
                                capture_output=True, text=True).stdout.strip()
        with open(os.path.join(d, "pswd"), "w") as f:
            f.write("username:%s\n" % hashed)
        cls.port = harness.free_port()
        conf = os.path.join(d, "nginx.conf")
        with open(conf, "w") as f:
            f.write("""worker_processes 1;
daemon off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path %(d)s/tmp/body;
  proxy_temp_path %(d)s/tmp/proxy;
  fastcgi_temp_path %(d)s/tmp/fastcgi;
  uwsgi_temp_path %(d)s/tmp/uwsgi;
  scgi_temp_path %(d)s/tmp/scgi;
  auth_basic "Restricted Content";
  auth_basic_user_file %(d)s/pswd;
  server {
    listen 127.0.0.1:%(port)d http2;
    location / { grpc_pass grpc://127.0.0.1:%(grpc)d; }
  }
}
""" % {"d": d, "port": cls.port, "grpc": MAIN.grpc_port})
        cls.nginx = subprocess.Popen(["nginx", "-c", conf, "-p", d],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not os.path.exists(os.path.join(d, "nginx.pid")):
            time.sleep(0.05)
        cls.auth = [("authorization",
                     "Basic " + base64.b64encode(b"username:password").decode())]

    @classmethod
    def tearDownClass(cls):
        cls.nginx.terminate()
        cls.nginx.wait(30)

    def proxied(self):
        return pb_grpc.GRPCInferenceServiceStub(
            grpc.insecure_channel("127.0.0.1:%d" % self.port))

    def test_client_call(self):
        """GRPCBasicAuthTest.test_client_call."""
        self.assertTrue(self.proxied().ServerLive(pb.ServerLiveRequest(), metadata=self.auth,
                                                  timeout=10).live)
        request, a, b = simple_request()
        check_sum_diff(self, self.proxied().ModelInfer(request, metadata=self.auth, timeout=10),
                       a, b)
        raises(self, grpc.StatusCode.UNAUTHENTICATED, "", self.proxied().ServerLive,
               pb.ServerLiveRequest(), timeout=10)

    def test_async_client_call(self):
        """GRPCBasicAuthAsyncTest.test_client_call."""
        async def call():
            async with grpc.aio.insecure_channel("127.0.0.1:%d" % self.port) as ch:
                s = pb_grpc.GRPCInferenceServiceStub(ch)
                return (await s.ServerLive(pb.ServerLiveRequest(), metadata=self.auth,
                                           timeout=10)).live
        self.assertTrue(asyncio.run(call()))


def main():
    global ARGS, REPO, MAIN
    ARGS = harness.parse_args(__doc__)
    generate_stubs()
    REPO = os.path.join(ARGS.work_dir, "repo")
    harness.generate_repository(ARGS.source_dir, REPO, ["make_triton_models.py"])
    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(c) for c in (
        ClientExamplesTest, GrpcAioTest, BasicAuthTest, ModelControlTest, RestrictedProtocolTest,
        RestrictedProtocolStartupTest)])

    def start_main():
        global MAIN
        MAIN = start("main", ["--allow-client-shm", "true"])
        if MAIN.grpc_port is None:
            raise RuntimeError("no gRPC port in the log")
        return MAIN

    return harness.run_suite(suite, start_main, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
