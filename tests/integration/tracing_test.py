#!/usr/bin/python3
"""Harrier's OpenTelemetry tracing end to end: the real binary exporting to an OTLP receiver.

usage: /usr/bin/python3 tests/integration/tracing_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Starts an OTLP/HTTP receiver (otlp_receiver.py) and the real binary with --trace-endpoint at it,
--trace-sample-ratio 1 and --trace-export-interval-ms 100, over a repository with `simple` and
`batch_identity` (identity_fp32 with dynamic batching), on ports it picks itself (0). Checks:
a request's traceparent / tracestate propagate to its server span, whose stage spans (receive,
decode, queue, batch, infer under batch, encode, send) nest in it in order, and whose id comes
back in the traceresponse header; an unsampled parent is not exported; an invalid traceparent
starts a new trace; a batch of traced requests links their server spans; a malformed request is
traced with its 400 and no queue/batch/infer spans; a receiver answering 503 leaves the server
answering and counts harrier_trace_spans_dropped_total{reason="export_failed"}; a second server
with --trace-sample-ratio 0 exports nothing for requests without a traceparent. Python stdlib
plus tools/make_test_models.py. A missing receiver or a binary without --trace-endpoint is a
failure, never a skip. The last line is "N passed, N failed".
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

from otlp_receiver import OtlpReceiver  # noqa: E402 - beside this file; missing is a failure

ARGS = None
SERVER = None
RECEIVER = None

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
STAGES = ["receive", "decode", "queue", "batch", "infer", "encode", "send"]
SIMPLE_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [3] * 16},
]}).encode()
IDENTITY_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]},
]}).encode()


def build_repository(repo):
    harness.generate_repository(ARGS.source_dir, repo)
    for name in os.listdir(repo):
        if name not in ("simple", "identity_fp32"):
            shutil.rmtree(os.path.join(repo, name))
    # A long delay: concurrent requests are sure to meet in one batch (8 fill it sooner).
    os.rename(os.path.join(repo, "identity_fp32"), os.path.join(repo, "batch_identity"))
    with open(os.path.join(repo, "batch_identity", "config.pbtxt"), "w") as f:
        f.write('name: "batch_identity"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
                'dynamic_batching { max_queue_delay_microseconds: 200000 }\n')


def check_tracing_flag():
    """Raises unless `harrier serve --help` names --trace-endpoint: a binary without it is not
    the Harrier under test (or lost its tracing), and the suite fails rather than skips."""
    out = subprocess.run([ARGS.harrier, "serve", "--help"], capture_output=True, text=True)
    if "--trace-endpoint" not in out.stdout + out.stderr:
        raise RuntimeError("%s serve --help (exit %s) names no --trace-endpoint:\n%s"
                           % (ARGS.harrier, out.returncode, (out.stdout + out.stderr)[-2000:]))


def post(model, body, headers=None, port=None):
    """POST /v2/models/{model}/infer: (status, {lower-case header: value}, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port or SERVER.port, timeout=30)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request("POST", "/v2/models/%s/infer" % model, body=body, headers=h)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def traceparent(trace_id, span_id, flags="01"):
    return "00-%s-%s-%s" % (trace_id, span_id, flags)


def new_trace_id(n):
    return "%032x" % (0x5eed0000000000000000000000000000 + n)


def is_server(span):
    return span["kind"] == 2  # SPAN_KIND_SERVER: OTLP JSON encodes enums as integers, only


def spans_of(trace_id):
    return [s for s in RECEIVER.spans() if s["trace_id"] == trace_id]


def wait_server_span(trace_id, timeout=15):
    """The server span of `trace_id` and every span of its trace, once its children are in."""
    def ready():
        spans = spans_of(trace_id)
        servers = [s for s in spans if is_server(s)]
        if not servers:
            return False
        # A record's spans are exported together; give the send span (the last) a chance.
        return any(s["parent_span_id"] == servers[0]["span_id"] and s["name"] == "send"
                   for s in spans) or len(spans) >= 2
    RECEIVER.wait_for(ready, timeout=timeout)
    spans = spans_of(trace_id)
    servers = [s for s in spans if is_server(s)]
    assert servers, "no server span for trace %s; got %d spans in all" % (
        trace_id, len(RECEIVER.spans()))
    return servers, spans


def batch_requests(span):
    """A batch span's harrier.batch.requests; every batch span carries it (a KeyError if not)."""
    return int(span["attributes"]["harrier.batch.requests"])


def scrape():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % SERVER.metrics_port,
                                timeout=10) as r:
        return r.read().decode("utf-8")


def dropped_export_failed():
    m = re.search(r'^harrier_trace_spans_dropped_total\{reason="export_failed"\} (\S+)$',
                  scrape(), re.M)
    return float(m.group(1)) if m else 0.0


class TracingTest(unittest.TestCase):
    def test_a_parent_tracestate_stages_and_traceresponse(self):
        status, headers, _ = post("simple", SIMPLE_BODY, {
            "traceparent": traceparent(TRACE_ID, PARENT_SPAN), "tracestate": "vendor=x"})
        self.assertEqual(status, 200)
        servers, spans = wait_server_span(TRACE_ID)
        self.assertEqual(len(servers), 1)
        server = servers[0]
        self.assertEqual(server["parent_span_id"], PARENT_SPAN)
        self.assertEqual(server["trace_state"], "vendor=x")
        self.assertEqual(server["name"], "POST /v2/models/simple/infer")
        self.assertEqual(headers.get("traceresponse"),
                         traceparent(TRACE_ID, server["span_id"]))
        # Every record's spans are exported in one go; wait for all seven stages.
        RECEIVER.wait_for(lambda: len(spans_of(TRACE_ID)) >= 8, timeout=10)
        spans = spans_of(TRACE_ID)
        by_name = {}
        for s in spans:
            if s is not server and not is_server(s):
                by_name.setdefault(s["name"], []).append(s)
        for name in STAGES:
            self.assertEqual(len(by_name.get(name, [])), 1, "stage %s: %s" % (name, by_name))
        stage = {name: by_name[name][0] for name in STAGES}
        for name in STAGES:
            expected_parent = stage["batch"]["span_id"] if name == "infer" else server["span_id"]
            self.assertEqual(stage[name]["parent_span_id"], expected_parent, name)
            self.assertGreaterEqual(stage[name]["start"], server["start"], name)
            self.assertLessEqual(stage[name]["end"], server["end"], name)
            self.assertLessEqual(stage[name]["start"], stage[name]["end"], name)
        # In order: each sequential stage starts where the previous one ended, or later.
        sequence = ["receive", "decode", "queue", "batch", "encode", "send"]
        for before, after in zip(sequence, sequence[1:]):
            self.assertLessEqual(stage[before]["end"], stage[after]["start"],
                                 "%s then %s" % (before, after))
        self.assertLessEqual(stage["batch"]["start"], stage["infer"]["start"])
        self.assertLessEqual(stage["infer"]["end"], stage["batch"]["end"])

    def test_b_unsampled_parent_is_not_exported(self):
        unsampled = new_trace_id(1)
        status, headers, _ = post("simple", SIMPLE_BODY,
                                  {"traceparent": traceparent(unsampled, PARENT_SPAN, "00")})
        self.assertEqual(status, 200)
        self.assertNotIn("traceresponse", headers)
        # Exported in submission order: once a later sampled request is in, so would it be.
        sampled = new_trace_id(2)
        post("simple", SIMPLE_BODY, {"traceparent": traceparent(sampled, PARENT_SPAN)})
        wait_server_span(sampled)
        self.assertEqual(spans_of(unsampled), [])

    def test_c_invalid_traceparent_starts_a_new_trace(self):
        status, headers, _ = post("simple", SIMPLE_BODY, {"traceparent": "00-zz-nope-01",
                                                          "tracestate": "vendor=x"})
        self.assertEqual(status, 200)
        m = re.fullmatch(r"00-([0-9a-f]{32})-([0-9a-f]{16})-01", headers.get("traceresponse", ""))
        self.assertIsNotNone(m, headers)
        servers, _ = wait_server_span(m.group(1))
        self.assertEqual(servers[0]["span_id"], m.group(2))
        self.assertEqual(servers[0]["parent_span_id"], "")
        self.assertEqual(servers[0]["trace_state"], "")

    def test_d_a_batch_links_its_requests(self):
        ids = [new_trace_id(100 + i) for i in range(6)]
        results = {}

        def send(trace_id):
            results[trace_id] = post("batch_identity", IDENTITY_BODY,
                                     {"traceparent": traceparent(trace_id, PARENT_SPAN)})

        threads = [threading.Thread(target=send, args=(t,)) for t in ids]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for trace_id in ids:
            self.assertEqual(results[trace_id][0], 200)
        server_spans = {}
        for trace_id in ids:
            servers, _ = wait_server_span(trace_id)
            server_spans[trace_id] = servers[0]["span_id"]

        def linked_batches():
            found = []
            for trace_id in ids:
                for s in spans_of(trace_id):
                    if s["name"] == "batch" and batch_requests(s) >= 2:
                        found.append((trace_id, s))
            return found
        RECEIVER.wait_for(lambda: any(s["links"] for _, s in linked_batches()), timeout=10)
        batches = linked_batches()
        self.assertTrue(batches, "no batch span with batch.requests >= 2")
        linked = [(t, s) for t, s in batches if s["links"]]
        self.assertTrue(linked, "no batch span has links: %s" % batches)
        others = {(t, span) for t, span in server_spans.items()}
        for trace_id, s in linked:
            links = {tuple(l) for l in s["links"]}
            self.assertNotIn((trace_id, server_spans[trace_id]), links)  # not to itself
            self.assertTrue(links <= others, "links %s not to the batch's requests" % links)

    def test_e_malformed_request_is_traced_without_queue_or_batch(self):
        trace_id = new_trace_id(3)
        status, headers, _ = post("simple", b"{not json",
                                  {"traceparent": traceparent(trace_id, PARENT_SPAN)})
        self.assertEqual(status, 400)
        self.assertIn("traceresponse", headers)
        servers, _ = wait_server_span(trace_id)
        time.sleep(0.3)  # the record's spans come together; let any straggler in
        attributes = servers[0]["attributes"]
        self.assertIn("http.response.status_code", attributes)  # missing is no pass
        self.assertEqual(attributes["http.response.status_code"], 400)
        names = {s["name"] for s in spans_of(trace_id) if not is_server(s)}
        self.assertFalse(names & {"queue", "batch", "infer"}, names)

    def test_f_failing_receiver_counts_drops_and_the_server_keeps_answering(self):
        before = dropped_export_failed()
        RECEIVER.fail_with(503)
        try:
            deadline = time.monotonic() + 60
            grew = False
            while time.monotonic() < deadline and not grew:
                status, _, _ = post("simple", SIMPLE_BODY)
                self.assertEqual(status, 200)
                time.sleep(0.2)
                grew = dropped_export_failed() > before
            self.assertTrue(grew, "harrier_trace_spans_dropped_total{reason=\"export_failed\"} "
                                  "stayed at %s" % before)
        finally:
            RECEIVER.fail_with(None)
        # Exports resume.
        trace_id = new_trace_id(4)
        post("simple", SIMPLE_BODY, {"traceparent": traceparent(trace_id, PARENT_SPAN)})
        wait_server_span(trace_id, timeout=60)


class UnsampledServerTest(unittest.TestCase):
    """(g) --trace-sample-ratio 0: requests without a traceparent export nothing."""

    def test_g_ratio_zero_exports_nothing_without_a_traceparent(self):
        with OtlpReceiver() as receiver:
            second = harness.Harrier(
                ARGS.harrier, REPO, os.path.join(ARGS.work_dir, "tracing-ratio0-harrier.log"),
                ["--trace-endpoint", receiver.url, "--trace-sample-ratio", "0",
                 "--trace-export-interval-ms", "100"])
            try:
                for _ in range(5):
                    status, headers, _ = post("simple", SIMPLE_BODY, port=second.port)
                    self.assertEqual(status, 200)
                    self.assertNotIn("traceresponse", headers)
                # The pipeline works: a sampled parent is still followed.
                trace_id = new_trace_id(5)
                post("simple", SIMPLE_BODY, {"traceparent": traceparent(trace_id, PARENT_SPAN)},
                     port=second.port)
                receiver.wait_for(lambda: any(s["trace_id"] == trace_id
                                              for s in receiver.spans()), timeout=15)
            finally:
                self.assertEqual(second.terminate(), 0)  # flushes what was queued
            self.assertEqual({s["trace_id"] for s in receiver.spans()}, {trace_id})


REPO = None


def main():
    global ARGS, SERVER, RECEIVER, REPO
    ARGS = harness.parse_args(__doc__)
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    suite.addTests(loader.loadTestsFromTestCase(TracingTest))
    suite.addTests(loader.loadTestsFromTestCase(UnsampledServerTest))

    def start():
        global SERVER, RECEIVER, REPO
        check_tracing_flag()
        REPO = os.path.join(ARGS.work_dir, "repo-tracing")
        build_repository(REPO)
        RECEIVER = OtlpReceiver().__enter__()
        try:
            SERVER = harness.Harrier(
                ARGS.harrier, REPO, os.path.join(ARGS.work_dir, "tracing-harrier.log"),
                ["--trace-endpoint", RECEIVER.url, "--trace-sample-ratio", "1",
                 "--trace-export-interval-ms", "100"])
        except Exception:
            RECEIVER.__exit__(None, None, None)
            raise
        server = SERVER

        class Both:
            log_path = server.log_path

            def terminate(self):
                rc = server.terminate()
                RECEIVER.__exit__(None, None, None)
                return rc
        return Both()

    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
