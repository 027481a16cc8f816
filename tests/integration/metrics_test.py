#!/usr/bin/python3
"""Harrier's metrics endpoint, end to end: the real binary, real traffic, promtool.

usage: /usr/bin/python3 tests/integration/metrics_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Starts harrier with --metrics-port 0 (and --http-port 0; both ports are read from the log) over
a small repository (simple, slow, a slow copy whose queue policy lets a request's timeout
apply, and a simple copy rate-limited to one request), sends a known mix of traffic:
successes, 400s (a body that does not parse, a wrong input name), 404s (unknown model), a 504
(a short `timeout` while queued), two cancellations (a client that goes away while its request
runs, one that goes away while it is queued) and 429s (the rate limit), then scrapes /metrics
and checks that `promtool check metrics` accepts it and that every count matches the traffic:
histogram counts, failures by reason, cancellations by stage, and Triton's counters.
Python stdlib + numpy only. The last line is "N passed, N failed".
"""
import gzip
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
import unittest
import urllib.request

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks
import run  # noqa: E402 - the socket and request helpers of the main integration suite

ARGS = None
SERVER = None
PROMTOOL = "/usr/bin/promtool"
# What promtool's linter says about Triton's names (no _total suffix, "us" for microseconds,
# nv_inference_count's "_count"). Triton's dashboards need the names as they are, so these are
# accepted, for nv_* only.
TRITON_LINTS = ('counter metrics should have "_total" suffix',
                "metric names should not contain abbreviated units",
                'non-histogram and non-summary metrics should not have "_count" suffix')


def Server(repo, extra_args=()):
    return harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "metrics-harrier.log"),
                           ["--log-verbose", "1"] + list(extra_args))


def build_repository(repo):
    harness.generate_repository(ARGS.source_dir, repo)
    keep = {"simple", "slow"}
    for name in os.listdir(repo):
        if name not in keep:
            shutil.rmtree(os.path.join(repo, name))
    copies = {
        "slow_timeout": ("slow", 'dynamic_batching { default_queue_policy { '
                                 'allow_timeout_override: true } }\n'),
        "simple_limited": ("simple", 'parameters { key: "harrier.rate_limit.rps" '
                                     'value: { string_value: "0.001" } }\n'
                                     'parameters { key: "harrier.rate_limit.burst" '
                                     'value: { string_value: "1" } }\n'),
    }
    for name, (source, config) in copies.items():
        shutil.copytree(os.path.join(repo, source), os.path.join(repo, name))
        with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
            f.write('name: "%s"\nplatform: "onnxruntime_onnx"\n%s' % (name, config))


def scrape():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % SERVER.metrics_port,
                                timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode("utf-8")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """{(name, frozenset(labels)): value} of every sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "unparsable sample line: %r" % line
        labels = frozenset(LABEL.findall(m.group(3) or ""))
        samples[(m.group(1), labels)] = float(m.group(4))
    return samples


def value(samples, name, **labels):
    return samples.get((name, frozenset(labels.items())))


def simple_inputs():
    return {"INPUT0": run.SIMPLE_A, "INPUT1": run.SIMPLE_B}


def post(model, body):
    return run.raw_request(SERVER.port, run.http_request(
        "POST", "/v2/models/%s/infer" % model, body, {"Content-Type": "application/json"}))


class MetricsTest(unittest.TestCase):
    # The traffic, sent once (setUpClass); each test checks one part of the scrape.
    SIMPLE_OK = 7
    SIMPLE_BAD_BODY = 3
    SIMPLE_BAD_INPUT = 1
    UNKNOWN = 2
    LIMITED_REFUSED = 2

    @classmethod
    def setUpClass(cls):
        c = run.client(SERVER.port)
        for _ in range(cls.SIMPLE_OK):
            r = c.infer("simple", simple_inputs())
            assert r.status == 200, r.raw[:300]
        for _ in range(cls.SIMPLE_BAD_BODY):
            r = post("simple", b'{"inputs": [')
            assert r.status == 400, r
        for _ in range(cls.SIMPLE_BAD_INPUT):
            r = c.infer("simple", {"NOPE": run.SIMPLE_A, "INPUT1": run.SIMPLE_B})
            assert r.status == 400, r.raw[:300]
        for i in range(cls.UNKNOWN):
            # Client-chosen names must never become label values.
            r = post("no_such_model_%d" % i, b"{}")
            assert r.status == 404, r

        # Rate limit: a burst of one, then 429s.
        r = c.infer("simple_limited", simple_inputs())
        assert r.status == 200, r.raw[:300]
        for _ in range(cls.LIMITED_REFUSED):
            r = c.infer("simple_limited", simple_inputs())
            assert r.status == 429, r.raw[:300]

        # slow: one undisturbed run (the reference time), then a client that goes away while its
        # request runs, then one that goes away while its request is queued behind another.
        start = time.monotonic()
        r = c.infer("slow", {"INPUT0": run.slow_input()})
        assert r.status == 200, r.raw[:300]
        t_run = time.monotonic() - start
        s = run.connect(SERVER.port)
        s.sendall(run.slow_request_bytes())
        time.sleep(max(0.05, t_run / 10))
        s.close()
        first = run.connect(SERVER.port, timeout=30)
        first.sendall(run.slow_request_bytes())
        time.sleep(min(0.1, t_run / 5))
        second = run.connect(SERVER.port, timeout=30)
        second.sendall(run.slow_request_bytes())
        time.sleep(min(0.1, t_run / 5))
        second.close()
        r = run.read_response(first)
        first.close()
        assert r is not None and r.status == 200, r

        # slow_timeout: a request with a 50 ms timeout queued behind a run of about a second.
        first = run.connect(SERVER.port, timeout=30)
        first.sendall(run.slow_request_bytes(model="slow_timeout"))
        time.sleep(min(0.1, t_run / 5))
        r = run.raw_request(SERVER.port, run.slow_request_bytes({"timeout": 50000},
                                                                model="slow_timeout"), timeout=30)
        assert r is not None and r.status == 504, r
        r = run.read_response(first)
        first.close()
        assert r is not None and r.status == 200, r

        # A success is counted before its answer leaves, but its end-to-end histogram only
        # after (it includes handing the answer back), so wait for the last ones to settle.
        deadline = time.monotonic() + 10
        while True:
            status, content_type, text = scrape()
            samples = parse(text)
            settled = all(
                value(samples, "harrier_request_duration_seconds_count", model=m, version="1")
                == value(samples, "harrier_request_success_total", model=m, version="1")
                for m in ("simple", "slow", "slow_timeout", "simple_limited"))
            if settled or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        cls.status, cls.content_type, cls.text, cls.samples = status, content_type, text, samples
        if ARGS.verbose:
            print(text)

    def v(self, name, **labels):
        got = value(self.samples, name, **labels)
        self.assertIsNotNone(got, "no sample %s%s" % (name, labels))
        return got

    def test_content_type(self):
        self.assertEqual(self.status, 200)
        self.assertEqual(self.content_type, "text/plain; version=0.0.4; charset=utf-8")

    def test_a_scrape_is_gzipped_when_the_scraper_asks_as_prometheus_does(self):
        request = urllib.request.Request("http://127.0.0.1:%d/metrics" % SERVER.metrics_port,
                                         headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(request, timeout=10) as r:
            self.assertEqual(r.headers.get("Content-Encoding"), "gzip")
            body = r.read()
        text = gzip.decompress(body).decode("utf-8")
        self.assertLess(len(body) * 3, len(text))  # repetitive text: it shrinks several times
        self.assertIn("harrier_request_success_total{", text)
        self.assertIsNotNone(parse(text))

    def test_promtool_accepts_the_scrape(self):
        # tools/deps.sh installs promtool (Debian package prometheus): without it the set-up is
        # broken and this fails, it does not skip.
        self.assertTrue(os.access(PROMTOOL, os.X_OK),
                        "%s is missing: run tools/deps.sh (Debian package prometheus)" % PROMTOOL)
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=self.text.encode(),
                           capture_output=True)
        problems = [line for line in (p.stdout + p.stderr).decode().splitlines() if line.strip()]
        # Exit 1 is a parse error; 3 is lint problems, accepted only for Triton's names.
        self.assertIn(p.returncode, (0, 3), problems)
        for line in problems:
            self.assertTrue(line.startswith("nv_inference_") and line.endswith(TRITON_LINTS),
                            line)
        # Without Triton's families, no problem at all.
        harrier_only = "\n".join(line for line in self.text.splitlines()
                                 if "nv_inference_" not in line) + "\n"
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=harrier_only.encode(),
                           capture_output=True)
        self.assertEqual(p.returncode, 0, (p.stdout + p.stderr).decode())

    def test_successes_match_the_histograms(self):
        expected = {"simple": self.SIMPLE_OK, "slow": 2, "slow_timeout": 1, "simple_limited": 1}
        for model, n in expected.items():
            labels = {"model": model, "version": "1"}
            self.assertEqual(self.v("harrier_request_success_total", **labels), n, model)
            self.assertEqual(self.v("nv_inference_request_success", **labels), n, model)
            for h in ("request", "queue", "compute_input", "compute_infer", "compute_output"):
                name = "harrier_%s_duration_seconds" % h
                self.assertEqual(self.v(name + "_count", **labels), n, (model, name))
                self.assertEqual(self.v(name + "_bucket", le="+Inf", **labels), n, (model, name))
            # One request per execution here: executions, batch sizes and inferences agree.
            self.assertEqual(self.v("harrier_batch_size_count", **labels), n, model)
            self.assertEqual(self.v("harrier_execution_total", **labels), n, model)
            self.assertEqual(self.v("nv_inference_exec_count", **labels), n, model)
            self.assertEqual(self.v("nv_inference_count", **labels), n, model)

    def test_request_duration_is_plausible(self):
        labels = {"model": "slow", "version": "1"}
        total = self.v("harrier_request_duration_seconds_sum", **labels)
        infer = self.v("harrier_compute_infer_duration_seconds_sum", **labels)
        self.assertGreater(infer, 0.01)
        self.assertGreaterEqual(total, infer)
        # Buckets are cumulative.
        buckets = sorted((float(dict(k[1])["le"]), v) for k, v in self.samples.items()
                         if k[0] == "harrier_request_duration_seconds_bucket"
                         and dict(k[1])["model"] == "slow")
        counts = [v for _, v in buckets]
        self.assertEqual(counts, sorted(counts))
        # Triton's cumulative microseconds agree with the histogram's sum.
        us = self.v("nv_inference_request_duration_us", **labels)
        self.assertAlmostEqual(us / 1e6, total, delta=0.001 + total * 0.001)

    def test_failures_by_reason(self):
        def failures(model, reason, version="1"):
            return self.v("harrier_request_failure_total", model=model, version=version,
                          reason=reason)
        self.assertEqual(failures("simple", "bad_request"),
                         self.SIMPLE_BAD_BODY + self.SIMPLE_BAD_INPUT)
        self.assertEqual(failures("simple", "not_found"), 0)
        self.assertEqual(failures("simple_limited", "rejected"), self.LIMITED_REFUSED)
        self.assertEqual(failures("slow_timeout", "timeout"), 1)
        self.assertEqual(failures("slow", "cancelled"), 2)
        self.assertEqual(failures("", "not_found", version=""), self.UNKNOWN)
        self.assertEqual(self.v("nv_inference_request_failure", model="simple", version="1"),
                         self.SIMPLE_BAD_BODY + self.SIMPLE_BAD_INPUT)
        self.assertEqual(self.v("nv_inference_request_failure", model="slow", version="1"), 2)
        # The names the clients made up are not labels anywhere.
        self.assertNotIn("no_such_model", self.text)

    def test_cancellations_by_stage(self):
        self.assertEqual(self.v("harrier_cancellations_total", model="slow", version="1",
                                stage="running"), 1)
        self.assertEqual(self.v("harrier_cancellations_total", model="slow", version="1",
                                stage="queued"), 1)

    def test_gauges(self):
        for model in ("simple", "slow", "slow_timeout", "simple_limited"):
            labels = {"model": model, "version": "1"}
            self.assertEqual(self.v("harrier_queue_depth", **labels), 0)
            self.assertEqual(self.v("nv_inference_pending_request_count", **labels), 0)
            self.assertEqual(self.v("harrier_inflight_requests", **labels), 0)
            self.assertEqual(self.v("harrier_model_state", state="READY", **labels), 1)
            self.assertEqual(self.v("harrier_model_state", state="UNAVAILABLE", **labels), 0)
            self.assertGreater(self.v("harrier_model_load_duration_seconds", **labels), 0)
        # This server runs with --overload-protection off: no prediction, so no sample
        # (integration_drain reads the gauge from a server with it on).
        self.assertNotIn("harrier_predicted_queue_wait_seconds{", self.text)

    def test_process_metrics(self):
        self.assertGreater(self.v("process_cpu_seconds_total"), 0)
        self.assertGreater(self.v("process_resident_memory_bytes"), 1 << 20)
        self.assertGreater(self.v("process_open_fds"), 3)
        start = self.v("process_start_time_seconds")
        self.assertLess(abs(time.time() - start), 600)

    def test_connection_metrics(self):
        # The default limit: the soft RLIMIT_NOFILE (inherited from this process) less an
        # eighth, at least 64 (docs/server.md, "Connection limit").
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if soft == resource.RLIM_INFINITY:
            soft = 1 << 20
        self.assertEqual(self.v("harrier_http_max_connections"), max(1, soft - max(64, soft // 8)))
        self.assertGreaterEqual(self.v("harrier_http_connections"), 0)
        self.assertEqual(self.v("harrier_http_refused_connections_total"), 0)
        self.assertEqual(self.v("harrier_http_failed_accepts_total"), 0)

    def test_other_paths_are_404(self):
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/v2/health/live" % SERVER.metrics_port,
                                   timeout=10)
            self.fail("expected 404")
        except urllib.error.HTTPError as e:
            self.assertEqual(e.code, 404)


def main():
    global ARGS, SERVER
    ARGS = harness.parse_args(__doc__)
    run.ARGS = ARGS

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo-metrics")
        build_repository(repo)
        SERVER = Server(repo, ["--overload-protection", "off"])
        return SERVER

    suite = unittest.TestLoader().loadTestsFromTestCase(MetricsTest)
    return harness.run_suite(suite, start, ARGS.verbose)

if __name__ == "__main__":
    sys.exit(main())
