#!/usr/bin/python3
"""The gRPC port under abuse and at the edges of its wire format, against the real binary.

Frames are written by hand (tools/h2_attacks.py), so nothing in a client library keeps a bad
request from being sent: floods (rapid reset, CONTINUATION, a huge header literal, SETTINGS and
PING floods, 1,000 streams, pipelining without reads) must each leave the server's RSS within
256 MiB of where it started and the next call must succeed; malformed calls get the status a
gRPC server gives them, with short messages.
"""
import gzip
import os
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks

ARGS = None
SERVER = None


def attacks():
    import h2_attacks  # from SRC/tools (harness.parse_args puts it on sys.path)
    return h2_attacks


class GrpcFloodTest(unittest.TestCase):
    """Each attack bounded to a few seconds; tools/h2_attacks.py --seconds 10 is the bench run."""

    def run_attack(self, name):
        h2 = attacks()
        result = h2.run(SERVER.grpc_port, SERVER.proc.pid, [name], 3.0, 256.0)[0]
        self.assertEqual(result["next_call_grpc_status"], 0, result)
        self.assertLessEqual(result["rss_peak_mib"] - result["rss_before_mib"], 256.0, result)
        return result

    def test_rapid_reset_ends_in_goaway(self):
        result = self.run_attack("rapid_reset")
        self.assertIsNotNone(result["goaway"], result)

    def test_continuation_flood_ends_in_goaway(self):
        result = self.run_attack("continuation_flood")
        self.assertIsNotNone(result["goaway"], result)
        self.assertLess(result["bytes_sent"], 64 << 20, result)

    def test_huge_header_literal_is_cut_off(self):
        result = self.run_attack("huge_header_literal")
        self.assertTrue(result["closed_by_server"], result)
        self.assertLess(result["bytes_sent"], 64 << 20, result)

    def test_settings_flood_is_not_all_acknowledged(self):
        result = self.run_attack("settings_flood")
        self.assertIsNotNone(result["goaway"], result)
        self.assertLess(result["acks"], result["settings_sent"], result)

    def test_ping_flood(self):
        self.run_attack("ping_flood")

    def test_a_thousand_streams_are_refused_past_the_limit(self):
        result = self.run_attack("concurrent_streams")
        self.assertTrue(result["goaway"] is not None or result["refused_streams"] > 0, result)

    def test_pipelined_calls_without_reads(self):
        self.run_attack("pipelined_calls")


class GrpcWireTest(unittest.TestCase):
    def call(self, method, message=b"", **kwargs):
        return attacks().unary_call(SERVER.grpc_port, method, message, **kwargs)

    def test_server_live(self):
        r = self.call("ServerLive")
        self.assertEqual(r["http_status"], 200)
        self.assertEqual(r["status"], 0)
        self.assertEqual(r["data"][:1], b"\x00")  # one uncompressed message: live = true
        self.assertIn(("content-type", "application/grpc"), r["headers"])

    def test_model_infer_answers_the_sum(self):
        h2 = attacks()
        r = self.call("ModelInfer", h2.model_infer_request("simple"))
        self.assertEqual(r["status"], 0, r)
        self.assertGreater(len(r["data"]), 5 + 16 * 4 * 2)

    def test_an_unparseable_message_is_internal(self):
        r = self.call("ModelInfer", b"\xff\xff\xff\xff")
        self.assertEqual(r["status"], 13, r)  # INTERNAL, as grpc-go and grpc-java say
        self.assertIn("cannot parse", r["message"])

    def test_a_huge_model_name_gets_a_short_message(self):
        h2 = attacks()
        name = "m" * 100_000
        r = self.call("ModelInfer", h2.model_infer_request(name))
        self.assertEqual(r["status"], 5, r["status"])  # NOT_FOUND
        self.assertLessEqual(len(r["message"]), 1100)
        self.assertIn("truncated", r["message"])
        self.assertEqual(self.call("ServerLive")["status"], 0)  # the port still serves

    def test_an_unknown_method_is_unimplemented(self):
        r = self.call("NoSuchMethod")
        self.assertEqual(r["status"], 12, r)

    def test_a_compressed_message_is_decompressed_with_the_calls_encoding(self):
        live = gzip.compress(b"")  # ServerLiveRequest has no fields: an empty message
        framed = b"\x01" + struct.pack(">I", len(live)) + live
        r = self.call("ServerLive", framed=framed, extra_headers=[("grpc-encoding", "gzip")])
        self.assertEqual(r["status"], 0, r)
        # A compressed flag on a call that named no encoding is INTERNAL, an unknown encoding
        # UNIMPLEMENTED with what the server accepts, as gRPC's compression spec says.
        self.assertEqual(self.call("ServerLive", framed=framed)["status"], 13)
        r = self.call("ServerLive", framed=framed, extra_headers=[("grpc-encoding", "snappy")])
        self.assertEqual(r["status"], 12, r)
        self.assertIn(("grpc-accept-encoding", "identity,deflate,gzip"), r["headers"])

    def test_a_message_cut_short_is_internal(self):
        r = self.call("ServerLive", framed=b"\x00" + struct.pack(">I", 10) + b"abc")
        self.assertEqual(r["status"], 13, r)

    def test_a_bad_grpc_timeout_is_internal(self):
        h2 = attacks()
        r = self.call("ModelInfer", h2.model_infer_request("simple"),
                      extra_headers=[("grpc-timeout", "soon")])
        self.assertEqual(r["status"], 13, r)

    def test_metadata_over_the_limit_is_resource_exhausted(self):
        r = self.call("ServerLive", extra_headers=[("x-big", "b" * 20000)])
        self.assertEqual(r["status"], 8, r)

    def test_not_grpc_content_type_is_415(self):
        h2 = attacks()
        c = h2.Conn(SERVER.grpc_port)
        try:
            headers = [(k, v) for k, v in h2.call_headers("ServerLive", c.authority)
                       if k != "content-type"] + [("content-type", "application/json")]
            c.send(h2.frame(h2.HEADERS, h2.END_HEADERS | h2.END_STREAM, 1, c.encoder.encode(headers)))
            import time
            deadline = time.time() + 10
            while time.time() < deadline and 1 not in c.responses:
                time.sleep(0.01)
            self.assertIn((":status", "415"), c.responses.get(1, [[]])[0])
        finally:
            c.close()


def incoming_body_bytes(metrics_port):
    """harrier_incoming_body_bytes and harrier_incoming_body_refusals_total."""
    status, body = harness.http_call(metrics_port, "GET", "/metrics")
    assert status == 200, status
    values = {}
    for line in body.decode().splitlines():
        name, _, value = line.partition(" ")
        if name in ("harrier_incoming_body_bytes", "harrier_incoming_body_refusals_total"):
            values[name] = float(value)
    return values["harrier_incoming_body_bytes"], values["harrier_incoming_body_refusals_total"]


class GrpcIncomingBodiesTest(unittest.TestCase):
    """--max-incoming-body-bytes on the gRPC port (docs/server.md, "Request bodies server-wide"):
    a ModelStreamInfer stream's unfinished message counts against the server-wide budget; the
    stream whose message would pass it is reset with ENHANCE_YOUR_CALM (RESOURCE_EXHAUSTED to a
    gRPC client), the other is held, and the port serves on."""

    def test_unfinished_stream_messages_past_the_budget_reset_their_stream(self):
        h2 = attacks()
        repo = os.path.join(os.path.abspath(ARGS.source_dir), "examples", "models")
        server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "budget.log"),
                                 extra_args=["--max-incoming-body-bytes", "1048576",
                                             "--max-body-bytes", "1048576"])
        c = None
        try:
            c = h2.Conn(server.grpc_port)
            c.settle()

            def open_stream(stream_id, payload_bytes):
                # A message claiming 1 MB, of which only `payload_bytes` are sent.
                block = c.encoder.encode(h2.call_headers("ModelStreamInfer", c.authority))
                frames = h2.frame(h2.HEADERS, h2.END_HEADERS, stream_id, block)
                body = b"\x00" + struct.pack(">I", 1_000_000) + b"x" * payload_bytes
                for at in range(0, len(body), 16384):
                    frames += h2.frame(h2.DATA, 0, stream_id, body[at:at + 16384])
                c.send(frames)

            def wait_for(condition):
                deadline = time.monotonic() + 10
                while not condition() and time.monotonic() < deadline:
                    time.sleep(0.02)
                return condition()

            open_stream(1, 600_000)
            self.assertTrue(wait_for(lambda: incoming_body_bytes(server.metrics_port)[0]
                                     == 600_005))
            open_stream(3, 600_000)
            self.assertTrue(wait_for(lambda: c.rst.get(0xb, 0) == 1), c.rst)
            self.assertEqual(incoming_body_bytes(server.metrics_port), (600_005, 1))
            self.assertEqual(h2.good_call(server.grpc_port), 0)  # the port serves on
        finally:
            if c is not None:
                c.close()
            self.assertEqual(server.terminate(), 0)
        self.assertIn("request bodies still arriving hold the server's limit of 1048576 bytes",
                      server.log_text())


def main():
    global ARGS, SERVER
    ARGS = harness.parse_args(__doc__)
    repo = os.path.join(os.path.abspath(ARGS.source_dir), "examples", "models")
    suite = unittest.TestSuite()
    loader = unittest.defaultTestLoader
    suite.addTests(loader.loadTestsFromTestCase(GrpcWireTest))
    suite.addTests(loader.loadTestsFromTestCase(GrpcFloodTest))
    suite.addTests(loader.loadTestsFromTestCase(GrpcIncomingBodiesTest))

    def start():
        global SERVER
        SERVER = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "harrier.log"))
        if SERVER.grpc_port is None:
            raise RuntimeError("no gRPC port in the log")
        return SERVER

    sys.exit(harness.run_suite(suite, start, ARGS.verbose))


if __name__ == "__main__":
    main()
