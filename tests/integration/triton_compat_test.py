#!/usr/bin/python3
"""Triton drop-in: models Triton serves load and answer here, the way Triton's clients expect.

usage: /usr/bin/python3 tests/integration/triton_compat_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Serves the models of tools/make_triton_models.py (graphs a zero-filled warm-up cannot run, ...)
with the real binary and checks, over KServe v2 REST, that each is READY and answers real
requests. Python stdlib only. The last line is "N passed, N failed".
"""
import json
import os
import shutil
import subprocess
import sys
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None


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


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo")
        shutil.rmtree(repo, ignore_errors=True)
        subprocess.run(["/usr/bin/python3", os.path.join(ARGS.source_dir, "tools",
                                                         "make_triton_models.py"), repo],
                       check=True, stdout=subprocess.DEVNULL)
        SERVER = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "harrier.log"))
        return SERVER

    suite = unittest.TestLoader().loadTestsFromTestCase(WarmupTest)
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
