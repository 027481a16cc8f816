#!/usr/bin/python3
"""Harrier's OpenTelemetry tracing end to end: the real binary exporting to an OTLP receiver.

usage: /usr/bin/python3 tests/integration/tracing_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Starts an OTLP/HTTP receiver (otlp_receiver.py) and the real binary with --trace-endpoint at it,
--trace-sample-ratio 1 and --trace-export-interval-ms 100, over a repository with `simple`,
`batch_identity` (identity_fp32 with dynamic batching) and `tiny-llama`
(../shared/models/llama-2-tiny-random.gguf, a llama.cpp model), on ports it picks itself (0).
Checks:
a request's traceparent / tracestate propagate to its server span, whose stage spans (receive,
decode, queue, batch, infer under batch, encode, send) nest in it in order, and whose id comes
back in the traceresponse header; an unsampled parent is not exported; an invalid traceparent
starts a new trace; a batch of traced requests links their server spans; a malformed request is
traced with its 400 and no queue/batch/infer spans; a receiver answering 503 leaves the server
answering and counts harrier_trace_spans_dropped_total{reason="export_failed"}; a completion
(POST /v1/completions) with a sampled traceparent is exported through the real exporter as its
server span with receive, decode, queue, prompt, generate, encode and send in order (no batch or
infer) and the gen_ai.usage.input_tokens / output_tokens and
harrier.generation.reused_prompt_tokens of its answer's usage; a second server with
--trace-sample-ratio 0 exports nothing for requests without a traceparent. Servers started
without --trace-endpoint follow the OTEL_EXPORTER_OTLP_* environment: OTEL_EXPORTER_OTLP_ENDPOINT
is a base URL that gets /v1/traces (a base that already ends in /v1/traces posts to
/v1/traces/v1/traces, which the receiver refuses), OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as
is and wins over it, and --trace-endpoint wins over both. Python stdlib plus
tools/make_test_models.py and the GGUF file. A missing receiver, GGUF file or a binary without
--trace-endpoint is a failure, never a skip. The last line is "N passed, N failed".
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


def gguf_path():
    return os.path.join(os.path.abspath(ARGS.source_dir), "..", "shared", "models",
                        "llama-2-tiny-random.gguf")


def build_repository(repo):
    harness.generate_repository(ARGS.source_dir, repo)
    for name in os.listdir(repo):
        if name not in ("simple", "identity_fp32"):
            shutil.rmtree(os.path.join(repo, name))
    # A GGUF file alone makes a llama.cpp model (docs/generation.md); missing, setup fails.
    os.makedirs(os.path.join(repo, "tiny-llama", "1"))
    shutil.copy(gguf_path(), os.path.join(repo, "tiny-llama", "1", "model.gguf"))
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


def post(model, body, headers=None, port=None, path=None):
    """POST /v2/models/{model}/infer (or `path`): (status, {lower-case header: value}, body
    bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port or SERVER.port, timeout=30)
    try:
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        conn.request("POST", path or "/v2/models/%s/infer" % model, body=body, headers=h)
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
        self.assertEqual(server["name"], "POST /v2/models/{model}/infer")
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

    def test_h_a_generation_has_prompt_and_generate_spans_and_its_token_counts(self):
        # The same prompt twice: the second finds all of it but its last token in the KV cache
        # (generation_test.py), so its reused_prompt_tokens is not the 0 of an absent count.
        body = json.dumps({"model": "tiny-llama", "prompt": "Traced through the exporter",
                           "max_tokens": 8, "temperature": 0}).encode()
        for n, trace_id in enumerate((new_trace_id(6), new_trace_id(7))):
            status, headers, data = post(None, body, {"traceparent": traceparent(
                trace_id, PARENT_SPAN)}, path="/v1/completions")
            self.assertEqual(status, 200, data)
            usage = json.loads(data)["usage"]
            servers, _ = wait_server_span(trace_id)
            self.assertEqual(len(servers), 1)
            server = servers[0]
            self.assertEqual(server["parent_span_id"], PARENT_SPAN)
            self.assertEqual(server["name"], "POST /v1/completions")
            self.assertEqual(headers.get("traceresponse"),
                             traceparent(trace_id, server["span_id"]))
            attributes = server["attributes"]
            self.assertEqual(attributes.get("url.path"), "/v1/completions")
            self.assertEqual(attributes.get("http.response.status_code"), 200)
            self.assertEqual(attributes.get("harrier.model"), "tiny-llama")
            self.assertEqual(attributes.get("harrier.request_id"), headers.get("x-request-id"))
            self.assertEqual(usage["completion_tokens"], 8)
            self.assertGreater(usage["prompt_tokens"], 1)
            self.assertEqual(attributes.get("gen_ai.usage.input_tokens"), usage["prompt_tokens"])
            self.assertEqual(attributes.get("gen_ai.usage.output_tokens"),
                             usage["completion_tokens"])
            reused = attributes.get("harrier.generation.reused_prompt_tokens")
            self.assertEqual(reused, usage.get("prompt_tokens_details", {}).get("cached_tokens", 0))
            if n == 1:
                self.assertEqual(reused, usage["prompt_tokens"] - 1)
            # Seven stages, exported with the server span: prompt and generate in place of
            # batch and infer.
            stages = ["receive", "decode", "queue", "prompt", "generate", "encode", "send"]
            RECEIVER.wait_for(lambda: len(spans_of(trace_id)) >= 1 + len(stages), timeout=10)
            time.sleep(0.3)  # the record's spans come together; let any straggler in
            children = [s for s in spans_of(trace_id) if not is_server(s)]
            self.assertEqual(sorted(s["name"] for s in children), sorted(stages), children)
            stage = {s["name"]: s for s in children}
            for name in stages:
                self.assertEqual(stage[name]["parent_span_id"], server["span_id"], name)
                self.assertGreaterEqual(stage[name]["start"], server["start"], name)
                self.assertLessEqual(stage[name]["end"], server["end"], name)
                self.assertLessEqual(stage[name]["start"], stage[name]["end"], name)
            for before, after in zip(stages, stages[1:]):
                self.assertLessEqual(stage[before]["end"], stage[after]["start"],
                                     "%s then %s" % (before, after))
            # Eight tokens: the first ends the prompt, the last seven take time to decode.
            self.assertLess(stage["generate"]["start"], stage["generate"]["end"])


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


class EnvironmentEndpointTest(unittest.TestCase):
    """Servers with OTEL_EXPORTER_OTLP_* in their environment (docs/tracing.md, --trace-endpoint):
    empty flag, then $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, then
    $OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces."""

    def serve(self, log_name, variables, args=()):
        """A server on the suite's repository, --trace-sample-ratio 1, this process's environment
        without any OTEL_ variable but `variables`."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(variables)
        return harness.Harrier(ARGS.harrier, REPO, os.path.join(ARGS.work_dir, log_name),
                               list(args) + ["--trace-sample-ratio", "1",
                                             "--trace-export-interval-ms", "100"], env=env)

    def traced_request(self, server, trace_id):
        """A sampled request to `server`, which must say it traced it (tracing is on)."""
        status, headers, _ = post("simple", SIMPLE_BODY,
                                  {"traceparent": traceparent(trace_id, PARENT_SPAN)},
                                  port=server.port)
        self.assertEqual(status, 200)
        self.assertIn("traceresponse", headers)

    def assert_exported(self, receiver, trace_id):
        receiver.wait_for(lambda spans: any(s["trace_id"] == trace_id and is_server(s)
                                            for s in spans), timeout=15)

    def test_i_otel_exporter_otlp_endpoint_is_a_base_url_that_gets_v1_traces(self):
        with OtlpReceiver() as receiver:
            server = self.serve("tracing-env-base.log",
                                {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d"
                                                               % receiver.port})
            try:
                trace_id = new_trace_id(20)
                self.traced_request(server, trace_id)
                self.assert_exported(receiver, trace_id)
            finally:
                self.assertEqual(server.terminate(), 0)
        # The path is appended whatever the base holds: a base that is already the traces URL
        # posts to /v1/traces/v1/traces, which the receiver answers 404 (the batch is dropped).
        with OtlpReceiver() as receiver:
            server = self.serve("tracing-env-base-with-path.log",
                                {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
            try:
                self.traced_request(server, new_trace_id(21))
                receiver.wait_for(lambda: receiver.requests >= 1, timeout=15)
                self.assertEqual(receiver.spans(), [])
            finally:
                self.assertEqual(server.terminate(), 0)
            self.assertEqual(receiver.spans(), [])

    def test_j_otel_exporter_otlp_traces_endpoint_is_used_as_is_and_wins(self):
        with OtlpReceiver() as traces, OtlpReceiver() as base:
            for n, variables in enumerate((
                    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces.url},
                    {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": traces.url,
                     "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % base.port})):
                with self.subTest(variables=sorted(variables)):
                    server = self.serve("tracing-env-traces-%d.log" % n, variables)
                    try:
                        trace_id = new_trace_id(30 + n)
                        self.traced_request(server, trace_id)
                        self.assert_exported(traces, trace_id)
                    finally:
                        self.assertEqual(server.terminate(), 0)
            self.assertEqual(base.requests, 0)

    def test_k_trace_endpoint_wins_over_the_environment(self):
        with OtlpReceiver() as flag, OtlpReceiver() as environment:
            server = self.serve("tracing-env-flag.log", {
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": environment.url,
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % environment.port},
                ["--trace-endpoint", flag.url])
            try:
                trace_id = new_trace_id(40)
                self.traced_request(server, trace_id)
                self.assert_exported(flag, trace_id)
            finally:
                self.assertEqual(server.terminate(), 0)  # flushes what was queued
            self.assertEqual(environment.requests, 0)


REPO = None


def main():
    global ARGS, SERVER, RECEIVER, REPO
    ARGS = harness.parse_args(__doc__)
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    suite.addTests(loader.loadTestsFromTestCase(TracingTest))
    suite.addTests(loader.loadTestsFromTestCase(UnsampledServerTest))
    suite.addTests(loader.loadTestsFromTestCase(EnvironmentEndpointTest))

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
