#!/usr/bin/python3
"""Harrier under the process limits a container or systemd sets: it fails what the limit stops
and serves on.

usage: /usr/bin/python3 tests/integration/limits_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

- The thread limit (RLIMIT_NPROC, as `ulimit -u` or a pids cgroup sets it; probe 53): a load
  whose instances or ONNX Runtime thread pool need more threads than the limit leaves fails
  with a reason that names it, within seconds; the other model answers throughout, an unload
  answers, and SIGTERM stops the server with status 0. Before, the first aborted the whole
  process and the second hung the load, and every later load or unload of the model, for good.
  The limit does not bind root, so the server runs as `nobody` (setpriv), its binary and
  libraries copied where that user can read them: this test needs root, the one skip
  (harness.NOT_ROOT) it may take.
- The file-size limit (RLIMIT_FSIZE, `ulimit -f`, systemd's LimitFSIZE=; probe 52): an access
  log that reaches it is dropped and counted, and the server lives; before, SIGXFSZ ended it.

Python stdlib only. The last line is "N passed, N failed".
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
DENSE = None  # examples/models/dense_fp32/1/model.onnx
DENSE_BODY = json.dumps({"inputs": [{"name": "features", "datatype": "FP32", "shape": [1, 8],
                                     "data": [0.5] * 8}]}).encode()


def post(port, path, body=b"", timeout=60):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=body,
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def repository(root, names):
    repo = os.path.join(root, "repo")
    for name in names:
        os.makedirs(os.path.join(repo, name, "1"))
        shutil.copy(DENSE, os.path.join(repo, name, "1", "model.onnx"))
    return repo


class ThreadLimitTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest(harness.NOT_ROOT)
        # Readable and executable by nobody: /tmp, not the build tree under a home directory.
        self.root = tempfile.mkdtemp(prefix="harrier-limits-", dir="/tmp")
        os.chmod(self.root, 0o755)
        binary = os.path.join(self.root, "harrier")
        shutil.copy(ARGS.harrier, binary)
        libs = os.path.join(self.root, "lib")
        os.makedirs(libs)
        ldd = subprocess.run(["ldd", ARGS.harrier], stdout=subprocess.PIPE, text=True, check=True)
        for m in re.finditer(r"=> (/\S+)", ldd.stdout):
            path = m.group(1)
            if not path.startswith(("/lib", "/usr/")):  # the dependency cache under HOME
                shutil.copy(path, libs)
        repo = repository(self.root, ("other", "big"))
        subprocess.run(["chmod", "-R", "a+rX", self.root], check=True)
        env = dict(os.environ, LD_LIBRARY_PATH=libs)
        self.server = harness.Harrier(
            binary, repo, os.path.join(ARGS.work_dir, "thread-limit.log"),
            extra_args=("--model-control-mode", "explicit", "--load-model", "other"),
            prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "prlimit", "--nproc=100"), env=env)

    def tearDown(self):
        if hasattr(self, "server"):
            self.assertEqual(self.server.terminate(), 0, self.server.log_text()[-3000:])
        if hasattr(self, "root"):
            shutil.rmtree(self.root, ignore_errors=True)

    def other_answers(self):
        status, body = post(self.server.port, "/v2/models/other/infer", DENSE_BODY, timeout=10)
        self.assertEqual(status, 200, body)

    def load_big(self, config):
        started = time.monotonic()
        status, body = post(self.server.port, "/v2/repository/models/big/load",
                            json.dumps({"parameters": {"config": json.dumps(config)}}).encode())
        return status, body, time.monotonic() - started

    def test_instances_past_the_limit_fail_the_load_and_the_server_serves_on(self):
        self.other_answers()
        status, body, _ = self.load_big({"instance_group": [{"count": 128, "kind": "KIND_CPU"}]})
        self.assertEqual(status, 400, body)
        self.assertIn("cannot start a thread", body)
        self.assertIn("thread limit", body)
        self.other_answers()
        # The threads it did start are gone again: a small load fits.
        status, body, _ = self.load_big({"instance_group": [{"count": 2, "kind": "KIND_CPU"}]})
        self.assertEqual(status, 200, body)
        status, body = post(self.server.port, "/v2/models/big/infer", DENSE_BODY)
        self.assertEqual(status, 200, body)

    def test_a_thread_pool_past_the_limit_fails_the_load_at_once_and_unload_answers(self):
        status, body, took = self.load_big(
            {"parameters": {"intra_op_thread_count": {"string_value": "120"}}})
        self.assertEqual(status, 400, body)
        self.assertIn("its thread pool: cannot start a thread", body)
        self.assertLess(took, 30)
        self.other_answers()
        status, body = post(self.server.port, "/v2/repository/models/big/unload", timeout=10)
        self.assertEqual(status, 200, body)
        status, body = post(self.server.port, "/v2/repository/index")
        self.assertEqual(status, 200, body)
        big = [row for row in json.loads(body) if row["name"] == "big"]
        self.assertTrue(big and all(row["state"] == "UNAVAILABLE" for row in big), body)
        # Its reserve was let go: a pool that fits loads.
        status, body, _ = self.load_big(
            {"parameters": {"intra_op_thread_count": {"string_value": "4"}}})
        self.assertEqual(status, 200, body)


class FileSizeLimitTest(unittest.TestCase):
    def test_an_access_log_at_the_file_size_limit_is_dropped_and_counted(self):
        root = tempfile.mkdtemp(prefix="harrier-fsize-", dir=ARGS.work_dir)
        try:
            repo = repository(root, ("dense",))
            log = os.path.join(root, "access.log")
            limit = 40 << 10
            server = harness.Harrier(
                ARGS.harrier, repo, os.path.join(ARGS.work_dir, "fsize.log"),
                extra_args=("--access-log", "on", "--access-log-file", log),
                prefix=("prlimit", "--fsize=%d" % limit))
            try:
                for _ in range(400):
                    status, body = post(server.port, "/v2/models/dense/infer", DENSE_BODY)
                    self.assertEqual(status, 200, body)
                deadline = time.monotonic() + 10
                dropped = 0
                while time.monotonic() < deadline and dropped == 0:
                    time.sleep(0.2)
                    self.assertIsNone(server.proc.poll(), "the server died: %s"
                                      % server.log_text()[-2000:])
                    with urllib.request.urlopen("http://127.0.0.1:%d/metrics"
                                                % server.metrics_port, timeout=10) as r:
                        scrape = r.read().decode()
                    m = re.search(r"(?m)^harrier_access_log_dropped_lines_total (\d+)$", scrape)
                    dropped = int(m.group(1)) if m else 0
                self.assertGreater(dropped, 0)
                self.assertLessEqual(os.path.getsize(log), limit)
                self.assertIn("File too large", server.log_text())
            finally:
                self.assertEqual(server.terminate(), 0, server.log_text()[-2000:])
        finally:
            shutil.rmtree(root, ignore_errors=True)


def main():
    global ARGS, DENSE
    ARGS = harness.parse_args(__doc__)
    DENSE = os.path.join(os.path.abspath(ARGS.source_dir), "examples", "models", "dense_fp32",
                         "1", "model.onnx")
    suite = unittest.TestSuite()
    for case in (ThreadLimitTest, FileSizeLimitTest):
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(case))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if ARGS.verbose else 1).run(
        suite)
    passed, failed = harness.summarize(result, None)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
