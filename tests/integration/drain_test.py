#!/usr/bin/python3
"""The drain made for load balancers, end to end: the real binary and --shutdown-delay-secs.

usage: /usr/bin/python3 tests/integration/drain_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

On SIGTERM with a shutdown delay, readiness (GET /v2/health/ready, gRPC ServerReady) turns
503/false at once while liveness and inference still answer 200, on new connections and on a
kept-alive one, for the whole delay; then the listeners close, a request in flight when they do
is still answered, and the process exits 0, no sooner than the delay. A second SIGTERM during the
delay skips the rest of it, still exiting 0; one more, while a request is still running, exits 1
at once (docs/deployment.md, "The drain"). A SIGTERM while a model's configured warm-up runs at
start stops the start: exit 0, no port opened; so does one while the start is blocked opening a
file (a FIFO no one opens), after 5 s. A fault (SIGSEGV) ends the process by that signal after
a backtrace on stderr (core/fatal_signal.h), which the harness symbolizes.
Python stdlib only (gRPC by hand-written HTTP/2 frames, tools/h2_attacks.py). The last line is
"N passed, N failed".
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks

ARGS = None
REPO = None

SIMPLE_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [3] * 16},
]})
SIMPLE_SUM = [i + 3 for i in range(16)]
SLOW_BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 1024], "datatype": "FP32", "data": [2.0] * 1024}]})


def request(conn, method, path, body=None):
    """(status, body) on `conn`, an http.client connection that stays open."""
    headers = {"Content-Type": "application/json"} if body else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def fresh(port, method, path, body=None, timeout=10):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        return request(conn, method, path, body)
    finally:
        conn.close()


def infer_ok(status_body):
    status, body = status_body
    if status != 200:
        return False
    return json.loads(body)["outputs"][0]["data"] == SIMPLE_SUM


def grpc_ready(port):
    """gRPC ServerReady's `ready` (True/False), or None without an answer."""
    import h2_attacks  # tools/ (parse_args put it on sys.path); needs python3-hpack
    result = h2_attacks.unary_call(port, "ServerReady")
    if result["status"] != 0:
        return None
    # A 5-byte gRPC prefix, then ServerReadyResponse: field 1 (bool) is 08 01 when true and
    # absent when false (proto3 leaves defaults out).
    return result["data"][5:] == b"\x08\x01"


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return False
    except OSError:
        return True


class DrainTest(unittest.TestCase):
    def start(self, name, extra):
        return harness.Harrier(ARGS.harrier, REPO, os.path.join(ARGS.work_dir, name + ".log"),
                               ["--exit-timeout-secs", "20"] + extra)

    def test_readiness_turns_503_while_inference_is_served_then_exit_0(self):
        delay = 3.0
        p = self.start("drain", ["--shutdown-delay-secs", str(delay)])
        try:
            self.assertEqual(fresh(p.port, "GET", "/v2/health/ready")[0], 200)
            self.assertIs(grpc_ready(p.grpc_port), True)
            # The autoscaling gauges (docs/metrics.md): overload protection is on by default,
            # so each version has a predicted queue wait beside its queue depth; idle, both 0.
            metrics = fresh(p.metrics_port, "GET", "/metrics")[1].decode()
            for model in ("simple", "slow"):
                labels = '{model="%s",version="1"}' % model
                for family in ("harrier_queue_depth", "harrier_inflight_requests",
                               "harrier_predicted_queue_wait_seconds"):
                    self.assertIn("%s%s 0\n" % (family, labels), metrics)
            kept = http.client.HTTPConnection("127.0.0.1", p.port, timeout=10)
            self.assertTrue(infer_ok(request(kept, "POST", "/v2/models/simple/infer",
                                             SIMPLE_BODY)))

            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            # Readiness turns at once (the first probe after the signal, well within 0.5 s).
            deadline = t0 + 0.5
            while fresh(p.port, "GET", "/v2/health/ready")[0] != 503:
                self.assertLess(time.monotonic(), deadline, "readiness still 200 after 0.5 s")
                time.sleep(0.01)
            status, body = fresh(p.port, "GET", "/v2/health/ready")
            self.assertEqual(status, 503)
            self.assertIn("shutting down", json.loads(body)["error"])
            self.assertIs(grpc_ready(p.grpc_port), False)

            # For the rest of the delay, requests are served as before: liveness, inference on
            # new connections and on the kept-alive one (gRPC's port stays open too).
            served = 0
            while time.monotonic() < t0 + delay - 0.6:
                self.assertIsNone(p.proc.poll(), "exited during the shutdown delay")
                self.assertEqual(fresh(p.port, "GET", "/v2/health/live")[0], 200)
                self.assertTrue(infer_ok(fresh(p.port, "POST", "/v2/models/simple/infer",
                                               SIMPLE_BODY)))
                self.assertTrue(infer_ok(request(kept, "POST", "/v2/models/simple/infer",
                                                 SIMPLE_BODY)))
                self.assertEqual(fresh(p.port, "GET", "/v2/health/ready")[0], 503)
                served += 1
                time.sleep(0.05)
            self.assertGreater(served, 5)
            self.assertIs(grpc_ready(p.grpc_port), False)

            # A slow request (about a second) sent just before the delay ends is in flight when
            # the listeners close: it is still answered.
            slow = {}

            def send_slow():
                slow["answer"] = fresh(p.port, "POST", "/v2/models/slow/infer", SLOW_BODY, 30)
            sender = threading.Thread(target=send_slow)
            sender.start()
            time.sleep(max(0.0, t0 + delay + 0.3 - time.monotonic()))
            rc = p.proc.wait(timeout=30)
            elapsed = time.monotonic() - t0
            sender.join(30)
            self.assertEqual(rc, 0, p.log_text()[-3000:])
            self.assertGreaterEqual(elapsed, delay, "exited before the shutdown delay was over")
            self.assertEqual(slow.get("answer", (None,))[0], 200, slow)
            self.assertEqual(json.loads(slow["answer"][1])["outputs"][0]["data"][:2], [2.0, 2.0])
            self.assertTrue(refused(p.port), "the HTTP port still accepts after the exit")
            kept.close()
            log = p.log_text()
            self.assertIn("readiness off, still serving for 3", log)
            self.assertIn("shutdown delay over", log)
            if ARGS.verbose:
                print("drain: %d rounds served during the delay; exit %.2f s after SIGTERM"
                      % (served, elapsed))
        finally:
            p.terminate()

    def test_second_sigterm_skips_the_rest_of_the_delay(self):
        p = self.start("drain-skip", ["--shutdown-delay-secs", "60"])
        try:
            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            deadline = t0 + 5
            while fresh(p.port, "GET", "/v2/health/ready")[0] != 503:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.01)
            self.assertTrue(infer_ok(fresh(p.port, "POST", "/v2/models/simple/infer",
                                           SIMPLE_BODY)))
            p.proc.send_signal(signal.SIGTERM)
            rc = p.proc.wait(timeout=20)
            self.assertEqual(rc, 0, "a second SIGTERM during the delay is a graceful stop, not "
                             "an abort:\n" + p.log_text()[-3000:])
            self.assertLess(time.monotonic() - t0, 15, "the rest of the 60 s delay was not skipped")
            self.assertIn("skipping the rest of the shutdown delay", p.log_text())
        finally:
            p.terminate()

    def test_a_signal_once_stopping_exits_at_once_with_1(self):
        p = self.start("drain-abort", ["--shutdown-delay-secs", "30"])
        try:
            slow = {}

            def send_slow():
                try:
                    slow["answer"] = fresh(p.port, "POST", "/v2/models/slow/infer", SLOW_BODY, 30)
                except (OSError, http.client.HTTPException) as e:
                    slow["error"] = e
            sender = threading.Thread(target=send_slow)
            sender.start()
            deadline = time.monotonic() + 10
            inflight = '\nharrier_inflight_requests{model="slow",version="1"} 1\n'
            while inflight not in fresh(p.metrics_port, "GET", "/metrics")[1].decode():
                self.assertLess(time.monotonic(), deadline, "the slow request never ran")
                time.sleep(0.02)

            def signal_and_wait_for(line):
                p.proc.send_signal(signal.SIGTERM)
                until = time.monotonic() + 5
                while line not in p.log_text():
                    self.assertLess(time.monotonic(), until, line)
                    time.sleep(0.01)
            signal_and_wait_for("readiness off")  # draining
            signal_and_wait_for("skipping the rest of the shutdown delay")  # stopping
            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)  # while the slow request still runs
            self.assertEqual(p.proc.wait(timeout=10), 1, p.log_text()[-2000:])
            self.assertLess(time.monotonic() - t0, 2)
            sender.join(30)
            self.assertNotIn("answer", slow, "the request was answered: the third signal waited")
        finally:
            p.terminate()

    def test_queued_loads_are_answered_503_at_once_when_the_stop_begins(self):
        """Loads queued behind one in progress, then SIGTERM: the queued ones are answered 503
        "shutting down" at once, while their clients are still connected, and the stop waits
        only for the load in progress. They used to run one after the other after the front
        ends had stopped, each lengthening the stop by its load time (probe 28)."""
        p = self.start("queued-loads", ["--model-control-mode", "explicit",
                                        "--load-model", "simple"])
        answers = {}

        def load(i):
            answers[i] = (fresh(p.port, "POST", "/v2/repository/models/slow/load", timeout=60),
                          time.monotonic())

        threads = [threading.Thread(target=load, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
            time.sleep(0.05)  # in this order: the first runs, the others queue behind it
        time.sleep(0.3)
        sent = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(60)
        self.assertEqual(p.proc.wait(timeout=60), 0)
        exited = time.monotonic() - sent
        refused = [(status, body, at - sent) for (status, body), at in answers.values()
                   if status == 503]
        self.assertGreaterEqual(len(refused), 2, answers)
        for status, body, after in refused:
            self.assertIn(b"shutting down", body)
            self.assertLess(after, 3, "a queued load was answered %.1f s after SIGTERM" % after)
        if ARGS.verbose:
            print("queued loads refused: %d of 4; exit %.1f s after SIGTERM"
                  % (len(refused), exited))

    def test_without_a_delay_the_listeners_close_at_once(self):
        p = self.start("drain-none", [])
        try:
            self.assertEqual(fresh(p.port, "GET", "/v2/health/ready")[0], 200)
            t0 = time.monotonic()
            p.proc.send_signal(signal.SIGTERM)
            self.assertEqual(p.proc.wait(timeout=20), 0, p.log_text()[-3000:])
            self.assertLess(time.monotonic() - t0, 10)
        finally:
            p.terminate()

    def test_both_ports_stop_accepting_together_while_rest_drains(self):
        """The REST and gRPC front ends stop together: while a slow REST request is answered
        after the signal, the gRPC port already refuses new connections (one after the other,
        it went on accepting calls while REST drained)."""
        p = self.start("drain-both", [])
        try:
            slow = {}
            t = threading.Thread(target=lambda: slow.update(
                r=fresh(p.port, "POST", "/v2/models/slow/infer", SLOW_BODY, timeout=60)))
            t.start()
            time.sleep(0.3)  # the slow request is running
            p.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 5
            while not refused(p.grpc_port):
                self.assertLess(time.monotonic(), deadline, "the gRPC port still accepts")
                time.sleep(0.05)
            self.assertTrue(t.is_alive(), "refused only after the slow REST request ended")
            t.join(60)
            self.assertEqual(slow["r"][0], 200, slow)
            self.assertEqual(p.proc.wait(timeout=30), 0, p.log_text()[-3000:])
        finally:
            p.terminate()

    def start_warming_up(self, name):
        """A server whose only model runs a long configured warm-up (slow, 10,000 runs), with
        its log; returns while the warm-up runs."""
        repo = os.path.join(ARGS.work_dir, "repo-" + name)
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(os.path.join(REPO, "slow"), os.path.join(repo, "slow"))
        with open(os.path.join(repo, "slow", "config.pbtxt"), "a") as f:
            f.write('\nmodel_warmup { name: "long" batch_size: 1 count: 10000 inputs { key: '
                    '"INPUT0" value { data_type: TYPE_FP32 dims: [1, 1024] zero_data: true } } }\n')
        log_path = os.path.join(ARGS.work_dir, name + ".log")
        log = open(log_path, "wb")
        port = harness.free_port()
        proc = subprocess.Popen([ARGS.harrier, "serve", "--model-repository", repo,
                                 "--http-port", str(port), "--grpc-port", "0",
                                 "--metrics-port", "0", "--log-verbose", "1"],
                                stdout=log, stderr=subprocess.STDOUT)
        time.sleep(2)  # the model loads in well under that; its warm-up takes minutes
        self.assertIsNone(proc.poll(), open(log_path, "rb").read()[-3000:])
        return proc, port, log, log_path

    def test_a_signal_while_the_models_load_stops_the_start(self):
        # The signals waited, blocked, until every model had loaded and every port had opened:
        # a pod deleted during a long start was killed at its grace period (probe 39).
        proc, port, log, log_path = self.start_warming_up("start-stop")
        try:
            started = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=30), 0, open(log_path, "rb").read()[-3000:])
            self.assertLess(time.monotonic() - started, 10)
            text = open(log_path, "rb").read().decode("utf-8", "replace")
            self.assertIn("received SIGTERM while the models load", text)
            self.assertIn("stopped before serving", text)
            self.assertRegex(text, r"warm-up sample 'long' stopped after \d+ of 10000 runs")
            self.assertNotIn("listening on HTTP", text)
            self.assertTrue(refused(port))
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            log.close()

    class FifoStart:
        """A server on `simple` whose flag `flag` names a FIFO no one has opened, started and
        waited for until its models are ready (the start then blocks opening the FIFO); a
        context manager that kills it and removes the FIFO."""

        def __init__(self, name, flag):
            repo = os.path.join(ARGS.work_dir, "repo-" + name)
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(os.path.join(REPO, "simple"), os.path.join(repo, "simple"))
            self.fifo = os.path.join(ARGS.work_dir, name + ".fifo")
            if os.path.exists(self.fifo):
                os.unlink(self.fifo)
            os.mkfifo(self.fifo)
            self.log_path = os.path.join(ARGS.work_dir, name + ".log")
            self.log = open(self.log_path, "wb")
            self.port = harness.free_port()
            extra = [flag, self.fifo] + (["--access-log", "on"] if "access" in flag else [])
            self.proc = subprocess.Popen([ARGS.harrier, "serve", "--model-repository", repo,
                                          "--http-port", str(self.port), "--grpc-port", "0",
                                          "--metrics-port", "0"] + extra,
                                         stdout=self.log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 30
            while ("model version(s) ready" not in self.text() and self.proc.poll() is None
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            time.sleep(0.3)  # into the open that blocks

        def text(self):
            return open(self.log_path, "rb").read().decode("utf-8", "replace")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.log.close()
            os.unlink(self.fifo)

    def test_a_signal_while_the_start_is_blocked_on_a_file_ends_it(self):
        # A start blocked opening a file (a FIFO whose reader, a sidecar, has not started)
        # ignored SIGTERM for good: the pod waited out its grace period (probe 44). A step that
        # has not ended 5 s after the signal is given up on; nothing serves yet.
        with self.FifoStart("fifo__access_log_file", "--access-log-file") as s:
            self.assertIsNone(s.proc.poll(), s.text()[-3000:])
            started = time.monotonic()
            s.proc.send_signal(signal.SIGTERM)
            self.assertEqual(s.proc.wait(timeout=20), 0, s.text()[-3000:])
            self.assertLess(time.monotonic() - started, 8)
            text = s.text()
            self.assertIn("received SIGTERM while opening the access log and the key file", text)
            self.assertIn("blocked (on a file that does not open", text)
            self.assertNotIn("listening on HTTP", text)
            self.assertTrue(refused(s.port))
        # The key file must be a regular file: a FIFO is refused at once, before any model
        # loads, naming what it is (probe 74), instead of blocking the start.
        with self.FifoStart("fifo__api_key_file", "--api-key-file") as s:
            self.assertEqual(s.proc.wait(timeout=20), 1, s.text()[-3000:])
            text = s.text()
            self.assertIn("is not a file (it is a FIFO)", text)
            self.assertNotIn("READY", text)
            self.assertTrue(refused(s.port))

    def test_a_signal_while_a_file_opens_slowly_stops_the_start_once_it_has(self):
        # The step ends by itself: a reader opens the FIFO soon after the signal, and the start
        # then stops before any port opens, instead of serving on.
        with self.FifoStart("fifo-late", "--access-log-file") as s:
            s.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            with open(s.fifo, "rb"):  # the step ends: the log opens
                self.assertEqual(s.proc.wait(timeout=20), 0, s.text()[-3000:])
            text = s.text()
            self.assertIn("received SIGTERM while opening the access log", text)
            self.assertNotIn("blocked (on a file that does not open", text)
            self.assertIn("stopped before serving", text)
            self.assertNotIn("listening on HTTP", text)
            self.assertTrue(refused(s.port))

    @unittest.skipIf(harness.SANITIZER == "address", harness.ASAN_FAULT_HANDLER)
    def test_a_fault_is_reported_with_a_backtrace_and_still_ends_the_process(self):
        # core/fatal_signal.h: the process ends by the signal as before, after a report on
        # stderr whose own frames the harness symbolizes (what CI prints for a crash).
        p = self.start("crash", [])
        try:
            self.assertEqual(fresh(p.port, "GET", "/v2/health/live")[0], 200)
            p.proc.send_signal(signal.SIGSEGV)
            self.assertEqual(p.proc.wait(timeout=20), -signal.SIGSEGV, p.log_text()[-3000:])
            report = harness.crash_report(p.log_text(), ARGS.harrier)
            self.assertIsNotNone(report, p.log_text()[-3000:])
            self.assertRegex(report, r"^harrier: fatal signal 11 \(SIGSEGV\), code 0, address "
                                     r"0x[0-9a-f]+, thread \d+ \(")
            # At least one of the binary's frames named with its function, file and line.
            self.assertRegex(report, r"\(\+0x[0-9a-f]+\)\[0x[0-9a-f]+\]  \S.* at \S+\.\w+:\d+")
        finally:
            p.terminate()


def main():
    global ARGS, REPO
    ARGS = harness.parse_args(__doc__)
    REPO = os.path.join(ARGS.work_dir, "repo")
    harness.generate_repository(ARGS.source_dir, REPO)
    for name in os.listdir(REPO):
        if name not in ("simple", "slow"):
            shutil.rmtree(os.path.join(REPO, name))
    return harness.run_cases(DrainTest, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
