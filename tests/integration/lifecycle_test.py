#!/usr/bin/python3
"""Live models: load, unload and reload while traffic flows, in explicit and in poll mode.

usage: /usr/bin/python3 tests/integration/lifecycle_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Serves tools/make_example_models.py's dense_fp32 (as model "dense") and simple with the real
binary. Explicit mode (--model-control-mode explicit --load-model dense): the other model is
listed "unloaded"; the REST load and unload API; 20 reloads of dense under continuous load from
two clients with zero failed requests; a failed reload (a corrupt model file) changes nothing
for clients. Poll mode (--repository-poll-secs 1): 20 swaps made by rewriting the model file
under continuous load, zero failed requests; a corrupt new version is listed UNAVAILABLE while
the serving one goes on answering; a model removed from the repository leaves the index.
Traffic between versions (tools/make_lifecycle_models.py's ranker: 1 fast, 2 slow on purpose,
3 with other scores): a bad policy is a 400 that changes nothing; a 90/10 split measured from
the answers' model_version; X-Harrier-Model-Version; sticky clients stay on their version;
shadow copies are compared and dropped; a slow candidate is rolled back by the guard within one
window while the client sees no error; a version that fails every run (flaky 2) is taken out of
rotation by its breaker, and with no version left the split routes regardless (a panic,
counted), so that no breaker takes the model out of service, while a request that names an open
version still gets a fast 503 with Retry-After; a
staged rollout of flaky 2 under a guard with max_error_rate is rolled back on its error rate (its
500s; clients' 400s do not count), harrier_traffic_rollbacks_total counts it, and the split's
requests are answered by version 1 afterwards.
File overrides (Triton's "file:1/model.onnx" load parameters, base64): dense loaded under another
name from its own file answers as dense does; bad paths, a missing config and bad base64 are 400s
that write nothing; a plain load goes back to the repository; the private directory under
$TMPDIR is gone after an unload, a later load and SIGTERM.
Parallel loads (--model-load-thread-count 2): five models all READY at start; two load requests
at once; a count that is not a positive integer stops the start.
Memory (tools/make_memory_models.py's wide, 64 MiB of weights, explicit mode): what reloads free
stays resident for the next load, within --model-load-retain-mb, and goes back once no load has
run for 30 s; an unload gives the model's memory back at once. With two instances,
share_session_between_instances holds the weights once and answers as separate sessions do.
Python stdlib only. The last line is "N passed, N failed".
"""
import base64
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
FEATURES = [0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4]
BODY = json.dumps({"inputs": [{"name": "features", "shape": [1, 8], "datatype": "FP32",
                               "data": FEATURES}]}).encode()


def make_repository(name):
    """A repository of its own: dense (dense_fp32, version 1) and simple."""
    source = os.path.join(ARGS.work_dir, "generated")
    if not os.path.exists(os.path.join(source, "dense_fp32", "1", "model.onnx")):
        harness.generate_repository(ARGS.source_dir, source, ("make_example_models.py",))
    repo = os.path.join(ARGS.work_dir, name)
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(repo)
    shutil.copytree(os.path.join(source, "dense_fp32"), os.path.join(repo, "dense"))
    shutil.copytree(os.path.join(source, "simple"), os.path.join(repo, "simple"))
    return repo


class Client:
    """One keep-alive HTTP/1.1 connection."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method, path, body=None):
        """(status, parsed JSON or None)."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        self.conn.request(method, path, body=body, headers=headers)
        r = self.conn.getresponse()
        data = r.read()
        try:
            return r.status, json.loads(data) if data else None
        except ValueError:
            return r.status, None

    def close(self):
        self.conn.close()


class Traffic:
    """Clients sending dense inference requests back to back until stop(); every answer that is
    not a 200 with five scores is kept in `failures`."""

    def __init__(self, port, clients=2):
        self.port = port
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.failures = []
        self.versions = set()
        self.threads = [threading.Thread(target=self.run) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def run(self):
        c = Client(self.port)
        try:
            while not self.stopping.is_set():
                try:
                    status, body = c.call("POST", "/v2/models/dense/infer", BODY)
                except (OSError, http.client.HTTPException) as e:
                    with self.lock:
                        self.failures.append("connection: %r" % e)
                    c.close()
                    c = Client(self.port)
                    continue
                good = status == 200 and body and len(body["outputs"][0]["data"]) == 5
                with self.lock:
                    if good:
                        self.ok += 1
                        self.versions.add(body["model_version"])
                    else:
                        self.failures.append("%s %s" % (status, body))
        finally:
            c.close()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(60)
        return self.ok, self.failures


def index_rows(port):
    status, rows = Client(port).call("POST", "/v2/repository/index", b"{}")
    assert status == 200, status
    return {(r["name"], r.get("version", "")): r for r in rows}


MIB = 1 << 20


def rss(pid):
    """The process's resident set in bytes (VmRSS)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


def wait_for(predicate, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class ExplicitModeTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.repo = make_repository("explicit-repo")
        cls.server = harness.Harrier(ARGS.harrier, cls.repo,
                                     os.path.join(ARGS.work_dir, "explicit.log"),
                                     ["--model-control-mode", "explicit", "--load-model", "dense"])

    @classmethod
    def tearDownClass(cls):
        cls.rc = cls.server.terminate()

    def test_1_only_the_named_model_loads_and_the_rest_is_listed_unloaded(self):
        rows = index_rows(self.server.port)
        self.assertEqual(rows[("dense", "1")]["state"], "READY")
        self.assertEqual(rows[("simple", "")]["state"], "UNAVAILABLE")
        self.assertEqual(rows[("simple", "")]["reason"], "unloaded")
        c = Client(self.server.port)
        self.assertEqual(c.call("GET", "/v2/health/ready")[0], 200)  # unloaded is not unready
        self.assertNotEqual(c.call("GET", "/v2/models/simple/ready")[0], 200)
        status, body = c.call("POST", "/v2/repository/models/simple/load")
        self.assertEqual(status, 200, body)
        self.assertEqual(c.call("GET", "/v2/models/simple/ready")[0], 200)
        status, body = c.call("POST", "/v2/repository/models/simple/unload")
        self.assertEqual(status, 200, body)
        status, body = c.call("POST", "/v2/models/simple/infer", b"{}")
        self.assertEqual(status, 503, body)
        self.assertIn("has no available versions", body["error"])
        self.assertTrue(wait_for(lambda: index_rows(self.server.port)[("simple", "1")]["reason"]
                                 == "unloaded"))
        status, body = c.call("POST", "/v2/repository/models/nope/load")
        self.assertEqual(status, 404, body)
        status, body = c.call("POST", "/v2/repository/models/dense/load", b'{"parameters":1}')
        self.assertEqual(status, 400, body)

    def test_2_twenty_reloads_under_load_fail_no_request(self):
        traffic = Traffic(self.server.port)
        c = Client(self.server.port)
        try:
            for i in range(20):
                status, body = c.call("POST", "/v2/repository/models/dense/load")
                self.assertEqual(status, 200, "reload %d: %s" % (i, body))
        finally:
            ok, failures = traffic.stop()
        self.assertEqual(failures, [], "%d answered" % ok)
        self.assertGreater(ok, 100)
        self.assertEqual(self.server.log_text().count("retiring the replaced instance"), 20)

    def test_3_a_failed_reload_changes_nothing_for_clients(self):
        model = os.path.join(self.repo, "dense", "1", "model.onnx")
        good = open(model, "rb").read()
        traffic = Traffic(self.server.port)
        try:
            with open(model, "wb") as f:
                f.write(b"not an onnx model")
            status, body = Client(self.server.port).call("POST",
                                                         "/v2/repository/models/dense/load")
            self.assertNotEqual(status, 200, body)
            self.assertIn("failed to load 'dense'", body["error"])
            time.sleep(0.3)
        finally:
            ok, failures = traffic.stop()
            with open(model, "wb") as f:
                f.write(good)
        self.assertEqual(failures, [], "%d answered" % ok)
        self.assertEqual(index_rows(self.server.port)[("dense", "1")]["state"], "READY")


    def test_4_unload_under_load_drains_then_refuses_with_triton_words(self):
        traffic = Traffic(self.server.port)
        try:
            self.assertTrue(wait_for(lambda: traffic.ok > 50))
            status, body = Client(self.server.port).call("POST",
                                                         "/v2/repository/models/dense/unload")
            self.assertEqual(status, 200, body)
            self.assertTrue(wait_for(lambda: index_rows(self.server.port)[("dense", "1")]
                                     ["reason"] == "unloaded"))
            time.sleep(0.2)
        finally:
            ok, failures = traffic.stop()
        self.assertGreater(ok, 50)
        self.assertGreater(len(failures), 0)  # the requests after the unload
        unexpected = [f for f in failures
                      if not f.startswith("503") or "has no available versions" not in f]
        self.assertEqual(unexpected, [])
        self.assertIn("model 'dense' unloaded", self.server.log_text())
        status, body = Client(self.server.port).call("POST", "/v2/repository/models/dense/load")
        self.assertEqual(status, 200, body)

    def test_5_a_directory_added_after_the_start_is_listed_and_unloads(self):
        # Triton's index lists every model a load could load, and its unload of a model that
        # is not loaded succeeds (probe 35: a 404 "no such model in the repository").
        shutil.copytree(os.path.join(self.repo, "simple"), os.path.join(self.repo, "added"))
        try:
            rows = index_rows(self.server.port)
            self.assertEqual(rows[("added", "")]["state"], "UNAVAILABLE", rows)
            self.assertEqual(rows[("added", "")]["reason"], "unloaded", rows)
            c = Client(self.server.port)
            status, body = c.call("POST", "/v2/repository/models/added/unload")
            self.assertEqual(status, 200, body)
            status, body = c.call("POST", "/v2/repository/models/nope/unload")
            self.assertEqual(status, 404, body)
        finally:
            shutil.rmtree(os.path.join(self.repo, "added"))

    def test_6_loads_asked_together_run_once(self):
        # 30 plain loads at once: the one running, one queued that the other 29 join (before,
        # 30 reloads one after another, and the unload behind them; probe 35).
        before = self.server.log_text().count("retiring the replaced instance")
        answers = []

        def load():
            answers.append(Client(self.server.port).call(
                "POST", "/v2/repository/models/dense/load")[0])

        threads = [threading.Thread(target=load) for _ in range(30)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(answers, [200] * 30)
        reloads = self.server.log_text().count("retiring the replaced instance") - before
        self.assertGreaterEqual(reloads, 1)
        self.assertLessEqual(reloads, 15)


class PollModeTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.repo = make_repository("poll-repo")
        cls.server = harness.Harrier(ARGS.harrier, cls.repo, os.path.join(ARGS.work_dir, "poll.log"),
                                     ["--model-control-mode", "poll",
                                      "--repository-poll-secs", "1"])

    @classmethod
    def tearDownClass(cls):
        cls.rc = cls.server.terminate()

    def reloads(self):
        return self.server.log_text().count("retiring the replaced instance")

    def test_1_twenty_swaps_by_rewriting_the_model_fail_no_request(self):
        model = os.path.join(self.repo, "dense", "1", "model.onnx")
        traffic = Traffic(self.server.port)
        try:
            for i in range(20):
                before = self.reloads()
                stamp = time.time() + i + 1  # a new modification time each round
                os.utime(model, (stamp, stamp))
                self.assertTrue(wait_for(lambda: self.reloads() > before, 10),
                                "swap %d was not applied" % i)
        finally:
            ok, failures = traffic.stop()
        self.assertEqual(failures, [], "%d answered" % ok)
        self.assertGreater(ok, 100)

    def test_2_a_corrupt_new_version_changes_nothing_for_clients(self):
        os.makedirs(os.path.join(self.repo, "dense", "2"))
        traffic = Traffic(self.server.port)
        try:
            with open(os.path.join(self.repo, "dense", "2", "model.onnx"), "wb") as f:
                f.write(b"half a model")
            self.assertTrue(wait_for(lambda: index_rows(self.server.port).get(("dense", "2"), {})
                                     .get("state") == "UNAVAILABLE"))
            time.sleep(1.5)  # another poll: it is not retried while its files stay the same
        finally:
            ok, failures = traffic.stop()
        self.assertEqual(failures, [], "%d answered" % ok)
        self.assertEqual(traffic.versions, {"1"})
        self.assertEqual(index_rows(self.server.port)[("dense", "1")]["state"], "READY")
        self.assertEqual(self.server.log_text().count("version 2 is UNAVAILABLE"), 1)
        shutil.rmtree(os.path.join(self.repo, "dense", "2"))

    def test_3_a_removed_model_leaves_the_index(self):
        shutil.rmtree(os.path.join(self.repo, "simple"))
        self.assertTrue(wait_for(lambda: all(k[0] != "simple"
                                             for k in index_rows(self.server.port))))
        status, body = Client(self.server.port).call("POST", "/v2/models/simple/infer", b"{}")
        self.assertEqual(status, 404, body)


RANKER_BODY = json.dumps({"inputs": [{"name": "features", "shape": [1, 8], "datatype": "FP32",
                                      "data": FEATURES}]}).encode()


class TrafficTest(unittest.TestCase):
    """Traffic between versions: tools/make_lifecycle_models.py's ranker, versions 1 (fast),
    2 (slow on purpose) and 3 (other scores), all served."""
    server = None

    @classmethod
    def setUpClass(cls):
        repo = os.path.join(ARGS.work_dir, "traffic-repo")
        harness.generate_repository(ARGS.source_dir, repo, ("make_lifecycle_models.py",))
        cls.server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "traffic.log"))

    @classmethod
    def tearDownClass(cls):
        cls.rc = cls.server.terminate()

    def put(self, policy):
        return Client(self.server.port).call("PUT", "/v2/models/ranker/traffic",
                                             json.dumps(policy).encode())

    def state(self):
        status, body = Client(self.server.port).call("GET", "/v2/models/ranker/traffic")
        self.assertEqual(status, 200, body)
        return body

    def versions(self, n, headers=None):
        """The model_version of n answers (all must be 200)."""
        c = Client(self.server.port)
        seen = []
        for _ in range(n):
            c.conn.request("POST", "/v2/models/ranker/infer", body=RANKER_BODY,
                           headers=dict({"Content-Type": "application/json"}, **(headers or {})))
            r = c.conn.getresponse()
            body = json.loads(r.read())
            self.assertEqual(r.status, 200, body)
            seen.append(body["model_version"])
        c.close()
        return seen

    def metric(self, name, labels):
        text = Client(self.server.metrics_port).conn
        text.request("GET", "/metrics")
        lines = text.getresponse().read().decode().splitlines()
        for line in lines:
            if line.startswith(name + "{") and all('%s="%s"' % kv in line for kv in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return None

    def test_1_a_bad_policy_is_a_400_that_changes_nothing(self):
        status, body = self.put({"weights": {"1": 90, "9": 10}})
        self.assertEqual(status, 400, body)
        self.assertIn("9", body["error"])
        status, body = self.put({"weights": {"1": 90}, "colour": "blue"})
        self.assertEqual(status, 400, body)
        self.assertIsNone(self.state()["policy"])
        self.assertEqual(set(self.versions(20)), {"3"})  # no policy: the latest version

    def test_2_a_90_10_split_measured_from_the_answers(self):
        status, body = self.put({"weights": {"1": 90, "3": 10}})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["state"]["weights"], {"1": 90, "3": 10})
        seen = self.versions(2000)
        share = seen.count("3") / len(seen)
        self.assertGreater(share, 0.07, share)
        self.assertLess(share, 0.13, share)
        self.assertEqual(set(seen), {"1", "3"})
        self.assertEqual(self.metric("harrier_traffic_weight", {"model": "ranker", "version": "3"}), 10)
        # The header overrides the split for testers; a version in the URL always wins.
        self.assertEqual(set(self.versions(20, {"X-Harrier-Model-Version": "3"})), {"3"})

    def test_3_a_sticky_client_stays_on_its_version(self):
        status, body = self.put({"weights": {"1": 50, "3": 50}, "sticky_header": "x-user"})
        self.assertEqual(status, 200, body)
        per_user = {u: set(self.versions(30, {"X-User": u})) for u in ("alice", "bob", "carol",
                                                                         "dave", "erin", "frank")}
        for user, versions in per_user.items():
            self.assertEqual(len(versions), 1, "%s saw %s" % (user, versions))
        self.assertEqual(set().union(*per_user.values()), {"1", "3"})

    def test_4_shadow_copies_are_compared_and_dropped(self):
        status, body = self.put({"weights": {"1": 100}, "shadow": {"version": "3", "percent": 50}})
        self.assertEqual(status, 200, body)
        self.assertEqual(set(self.versions(400)), {"1"})  # the shadow never answers
        self.assertTrue(wait_for(lambda: self.state()["shadow"].get("3", {}).get("compared", 0) > 100))
        shadow = self.state()["shadow"]["3"]
        self.assertGreater(shadow["last_max_abs_difference"], 0.1)  # version 3's scores differ
        self.assertIsNotNone(shadow["top1_agreement"])
        self.assertGreater(self.metric("harrier_shadow_requests_total",
                                       {"model": "ranker", "version": "3", "outcome": "compared"}),
                           100)

    def test_5_a_slow_candidate_is_rolled_back_within_one_window(self):
        status, body = self.put({"weights": {"1": 100},
                                 "rollout": {"candidate": "2", "steps": [50, 100],
                                             "dwell_seconds": 60},
                                 "guard": {"window_seconds": 2, "max_p99_ratio": 1.5,
                                           "min_requests": 20}})
        self.assertEqual(status, 200, body)
        started = time.monotonic()
        failures = []
        rolled_back = None
        c = Client(self.server.port)
        while time.monotonic() - started < 10:
            status, body = c.call("POST", "/v2/models/ranker/infer", RANKER_BODY)
            if status != 200:
                failures.append((status, body))
            if rolled_back is None and self.state()["state"]["rollout"]["state"] == "rolled back":
                rolled_back = time.monotonic() - started
                break
        self.assertEqual(failures, [])
        self.assertIsNotNone(rolled_back, self.state())
        # One 2 s window, and 1 s for this loop's requests to fill it (3 s under a sanitizer,
        # whose instrumented requests the loop waits for several times longer).
        slack = 3.0 if harness.SANITIZER else 1.0
        self.assertLess(rolled_back, 2 + slack, "rolled back after %.1f s" % rolled_back)
        state = self.state()
        self.assertEqual(state["state"]["weights"].get("2", 0), 0)
        self.assertIn("p99", state["last_rollback"]["reason"])
        self.assertEqual(set(self.versions(100)), {"1"})
        self.assertEqual(self.metric("harrier_traffic_rollbacks_total", {"model": "ranker"}), 1)
        self.assertIn("rolled back", self.server.log_text())

    # tools/make_lifecycle_models.py's flaky: version 1 answers, version 2 fails every run in
    # ONNX Runtime (an engine failure, which the breaker counts).
    def call_flaky(self, c):
        c.conn.request("POST", "/v2/models/flaky/infer", body=RANKER_BODY,
                       headers={"Content-Type": "application/json"})
        r = c.conn.getresponse()
        body = json.loads(r.read())
        return r.status, body, r.getheader("Retry-After")

    @staticmethod
    def put_flaky_rollout(c, min_requests):
        """flaky's version 2 as a staged rollout's candidate, guarded by its error rate alone."""
        return c.call("PUT", "/v2/models/flaky/traffic", json.dumps(
            {"weights": {"1": 100},
             "rollout": {"candidate": "2", "steps": [50, 100], "dwell_seconds": 60},
             "guard": {"window_seconds": 10, "max_error_rate": 0.1,
                       "min_requests": min_requests}}).encode())

    def test_6_a_failing_version_is_taken_out_of_rotation_by_its_breaker(self):
        c = Client(self.server.port)
        status, body = c.call("PUT", "/v2/models/flaky/traffic", json.dumps(
            {"weights": {"1": 50, "2": 50},
             "breaker": {"failure_threshold": 3, "window_seconds": 10,
                         "open_seconds": 60}}).encode())
        self.assertEqual(status, 200, body)
        answers = [self.call_flaky(c) for _ in range(200)]
        failed = [a for a in answers if a[0] != 200]
        self.assertGreaterEqual(len(failed), 3)  # what it took to open the breaker
        self.assertLessEqual(len(failed), 4)
        self.assertTrue(all(a[0] == 500 for a in failed), failed[:2])
        self.assertEqual({a[1]["model_version"] for a in answers[-100:]}, {"1"})
        status, state = c.call("GET", "/v2/models/flaky/traffic")
        self.assertEqual(state["state"]["breakers"]["2"], "open")
        self.assertEqual(self.metric("harrier_traffic_breaker_state",
                                     {"model": "flaky", "version": "2", "state": "open"}), 1)
        self.assertEqual(self.metric("harrier_traffic_breaker_state",
                                     {"model": "flaky", "version": "1", "state": "closed"}), 1)

    def test_6b_a_clients_own_deadline_opens_no_breaker_and_rolls_nothing_back(self):
        """A deadline the client chose (1 us: it passes in the queue) is the client's doing, as
        a cancellation is: five of them opened the breaker (503 for everyone) and a dozen rolled
        a rollout back (probe 28)."""
        c = Client(self.server.port)

        def expired(path):
            c.conn.request("POST", path, body=RANKER_BODY,
                           headers={"Content-Type": "application/json",
                                    "X-Request-Timeout-Us": "1"})
            r = c.conn.getresponse()
            return r.status, r.read()

        status, body = c.call("PUT", "/v2/models/flaky/traffic", json.dumps(
            {"weights": {"1": 1},
             "breaker": {"failure_threshold": 3, "window_seconds": 10,
                         "open_seconds": 60}}).encode())
        self.assertEqual(status, 200, body)
        statuses = [expired("/v2/models/flaky/infer")[0] for _ in range(20)]
        self.assertIn(504, statuses)
        status, state = c.call("GET", "/v2/models/flaky/traffic")
        self.assertEqual(state["state"]["breakers"]["1"], "closed", state)
        self.assertEqual(self.call_flaky(c)[0], 200)

        status, body = self.put_flaky_rollout(c, min_requests=5)
        self.assertEqual(status, 200, body)
        for _ in range(40):
            expired("/v2/models/flaky/infer")
        time.sleep(0.2)  # past the guard's 100 ms between evaluations: the next read judges
        status, state = c.call("GET", "/v2/models/flaky/traffic")
        self.assertEqual(state["state"]["rollout"]["state"], "running", state)
        status, body = c.call("DELETE", "/v2/models/flaky/traffic")
        self.assertEqual(status, 200, body)

    def test_7_with_every_version_out_of_rotation_the_split_routes_in_a_panic(self):
        """Breakers move traffic between versions and never take the model out of service: one
        client's inputs that fail on every version opened them all, and every client then got
        503 (probe 38). With every version with traffic open, requests go where the split says
        (a panic, counted); one whose X-Harrier-Model-Version names an open version, while another
        takes traffic, is still a fast 503."""
        c = Client(self.server.port)
        status, body = c.call("PUT", "/v2/models/flaky/traffic", json.dumps(
            {"weights": {"2": 1},
             "breaker": {"failure_threshold": 3, "window_seconds": 10,
                         "open_seconds": 60}}).encode())
        self.assertEqual(status, 200, body)
        answers = [self.call_flaky(c) for _ in range(20)]
        self.assertEqual([a[0] for a in answers], [500] * 20)  # the engine's, not the breaker's
        status, state = c.call("GET", "/v2/models/flaky/traffic")
        self.assertEqual(state["state"]["breakers"]["2"], "open")
        # The 4th request on (the 3rd failure's record may come just after its answer).
        panics = state["state"]["breaker_panics"]
        self.assertIn(panics, (16, 17), state)
        self.assertEqual(self.metric("harrier_traffic_breaker_panics_total", {"model": "flaky"}),
                         panics)
        # Version 1 takes traffic too: the split avoids 2, and a request naming 2 is refused.
        status, body = c.call("PUT", "/v2/models/flaky/traffic", json.dumps(
            {"weights": {"1": 1, "2": 1},
             "breaker": {"failure_threshold": 3, "window_seconds": 10,
                         "open_seconds": 60}}).encode())
        self.assertEqual(status, 200, body)

        def call_version_2():
            c.conn.request("POST", "/v2/models/flaky/infer", body=RANKER_BODY,
                           headers={"Content-Type": "application/json",
                                    "X-Harrier-Model-Version": "2"})
            r = c.conn.getresponse()
            return r.status, json.loads(r.read()), r.getheader("Retry-After")

        self.assertEqual([call_version_2()[0] for _ in range(3)], [500] * 3)  # opens its breaker
        for _ in range(20):
            status, body, _ = self.call_flaky(c)
            self.assertEqual(status, 200, body)
            self.assertEqual(body["model_version"], "1")
        status, body, retry_after = call_version_2()
        self.assertEqual(status, 503, body)
        self.assertIn("circuit breaker", body["error"])
        self.assertGreater(int(retry_after), 0)

    def test_8_a_failing_candidate_is_rolled_back_on_its_error_rate(self):
        # flaky 2 fails every run (a 500), version 1 none; the guard sets no latency limit.
        rollbacks = self.metric("harrier_traffic_rollbacks_total", {"model": "flaky"}) or 0
        c = Client(self.server.port)
        status, body = self.put_flaky_rollout(c, min_requests=20)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["state"]["rollout"]["state"], "running")
        # Clients' bad requests (400s) are no server-side errors: they roll nothing back.
        bad = json.dumps({"inputs": [{"name": "features", "shape": [1, 7], "datatype": "FP32",
                                      "data": FEATURES[:7]}]}).encode()
        for _ in range(60):
            status, body = c.call("POST", "/v2/models/flaky/infer", bad)
            self.assertEqual(status, 400, body)
        time.sleep(0.2)  # past the guard's 100 ms between evaluations: the next read judges
        status, state = c.call("GET", "/v2/models/flaky/traffic")
        self.assertEqual(state["state"]["rollout"]["state"], "running", state)
        # The split sends half of the requests to the candidate, whose runs fail.
        failures, rolled_back = [], False
        deadline = time.monotonic() + 30
        while not rolled_back and time.monotonic() < deadline:
            status, body, _ = self.call_flaky(c)
            if status != 200:
                failures.append((status, body))
            status, state = c.call("GET", "/v2/models/flaky/traffic")
            rolled_back = state["state"]["rollout"]["state"] == "rolled back"
        self.assertTrue(rolled_back, state)
        self.assertGreaterEqual(len(failures), 20)  # the guard's min_requests
        for status, body in failures:
            self.assertEqual(status, 500, body)
            self.assertIn("version 2: running the model", body["error"])
        self.assertEqual(state["state"]["weights"].get("2", 0), 0)
        self.assertEqual(state["state"]["rollout"]["candidate_percent"], 0)
        last = state["last_rollback"]
        self.assertEqual((last["step"], last["percent"]), (0, 50), last)
        # Over the baseline's own rate when the baseline has min_requests in the window, else
        # over the limit alone (a candidate's failures are judged within 5 ms, often before).
        self.assertRegex(last["reason"], r"^candidate error rate [0-9.]+% \(\d+ of \d+\) > "
                                         r"(baseline 0\.00% \+ )?max_error_rate 10\.00%$")
        self.assertGreaterEqual(last["candidate"]["errors"], 20)
        self.assertEqual(last["baseline"]["errors"], 0)
        self.assertEqual(self.metric("harrier_traffic_rollbacks_total", {"model": "flaky"}),
                         rollbacks + 1)
        self.assertIn("rollout of version 2 rolled back", self.server.log_text())
        # The split's requests go to the baseline alone from then on.
        answers = [self.call_flaky(c) for _ in range(100)]
        self.assertEqual({(a[0], a[1].get("model_version")) for a in answers}, {(200, "1")})
        c.close()


class FileOverrideTest(unittest.TestCase):
    """Triton's file overrides: a load request carrying the model's files (base64) loads the model
    from a private directory under $TMPDIR, which unload, a later load and SIGTERM remove, and the
    next start removes when a killed server left it."""
    server = None

    @classmethod
    def setUpClass(cls):
        cls.repo = make_repository("override-repo")
        cls.tmp = os.path.join(ARGS.work_dir, "override-tmp")
        shutil.rmtree(cls.tmp, ignore_errors=True)
        os.makedirs(cls.tmp)
        with open(os.path.join(cls.repo, "dense", "1", "model.onnx"), "rb") as f:
            cls.model = base64.b64encode(f.read()).decode()
        cls.server = cls.start("override.log")

    @classmethod
    def start(cls, log_name):
        """A server on the suite's repository, explicit mode, $TMPDIR the suite's directory."""
        return harness.Harrier(ARGS.harrier, cls.repo, os.path.join(ARGS.work_dir, log_name),
                               ["--model-control-mode", "explicit", "--load-model", "dense"],
                               env=dict(os.environ, TMPDIR=cls.tmp))

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.terminate()
        if getattr(cls, "rc", None) is None:
            cls.rc = rc

    def written(self):
        return sorted(os.listdir(self.tmp))

    def load(self, name, parameters, server=None):
        return Client((server or self.server).port).call(
            "POST", "/v2/repository/models/%s/load" % name,
            json.dumps({"parameters": parameters}).encode())

    def test_1_a_model_loads_under_a_new_name_from_its_files_and_unload_removes_them(self):
        status, body = self.load("copy", {"config": "{}", "file:1/model.onnx": self.model})
        self.assertEqual(status, 200, body)
        written = self.written()
        self.assertEqual(len(written), 1, written)
        self.assertTrue(written[0].startswith("harrier-override-"), written)
        self.assertEqual(os.stat(os.path.join(self.tmp, written[0])).st_mode & 0o777, 0o700)
        c = Client(self.server.port)
        status, body = c.call("POST", "/v2/models/copy/infer", BODY)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["model_name"], "copy")
        status, expected = c.call("POST", "/v2/models/dense/infer", BODY)
        self.assertEqual(body["outputs"][0]["data"], expected["outputs"][0]["data"])
        self.assertEqual(index_rows(self.server.port)[("copy", "1")]["state"], "READY")
        status, body = c.call("POST", "/v2/repository/models/copy/unload")
        self.assertEqual(status, 200, body)
        self.assertTrue(wait_for(lambda: self.written() == []), self.written())
        # Not in the repository: forgotten once unloaded (each name stayed in the index and the
        # metrics for good, probe 28).
        self.assertTrue(wait_for(lambda: ("copy", "1") not in index_rows(self.server.port)))

    def test_2_bad_requests_are_400s_that_change_and_write_nothing(self):
        cases = [({"file:1/model.onnx": self.model}, "parameters.config must be given"),
                 ({"config": "{}", "file:../1/model.onnx": self.model}, "'..'"),
                 ({"config": "{}", "file:/etc/model.onnx": self.model}, "absolute"),
                 ({"config": "{}", "file:0/model.onnx": self.model}, "version number"),
                 ({"config": "{}", "file:1/model.onnx": "not base64"}, "not base64")]
        for parameters, words in cases:
            status, body = self.load("dense", parameters)
            self.assertEqual(status, 400, (parameters.keys(), body))
            self.assertIn(words, body["error"])
        self.assertEqual(self.written(), [])
        status, body = Client(self.server.port).call("POST", "/v2/models/dense/infer", BODY)
        self.assertEqual(status, 200, body)

    def test_2a_tritons_default_sections_load_and_a_response_cache_is_refused(self):
        # Triton's config endpoint writes these sections out with their defaults: a config saved
        # from it loads unchanged. A response cache, which Harrier has not, fails the load and
        # leaves the serving version alone.
        defaults = {"max_batch_size": 0, "response_cache": {"enable": False},
                    "model_transaction_policy": {"decoupled": False}}
        status, body = self.load("dense", {"config": json.dumps(defaults)})
        self.assertEqual(status, 200, body)
        status, config = Client(self.server.port).call("GET", "/v2/models/dense/config")
        self.assertEqual(status, 200, config)
        self.assertEqual(config["max_batch_size"], 0)
        for section, want in (("response_cache", {"enable": True}),
                              ("model_transaction_policy", {"decoupled": True})):
            status, body = self.load("dense", {"config": json.dumps({section: want})})
            self.assertEqual(status, 501, body)
            self.assertIn("failed to load 'dense'", body["error"])
            self.assertIn(section + ": ", body["error"])
        status, body = Client(self.server.port).call("POST", "/v2/models/dense/infer", BODY)
        self.assertEqual(status, 200, body)
        status, config = Client(self.server.port).call("GET", "/v2/models/dense/config")
        self.assertEqual(config["max_batch_size"], 0)

    def test_3_a_plain_load_after_files_reloads_from_the_repository(self):
        status, body = self.load("dense", {"config": "{}", "file:1/model.onnx": self.model})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(self.written()), 1)
        status, body = Client(self.server.port).call("POST", "/v2/repository/models/dense/load")
        self.assertEqual(status, 200, body)
        self.assertTrue(wait_for(lambda: self.written() == []), self.written())
        status, body = Client(self.server.port).call("POST", "/v2/models/dense/infer", BODY)
        self.assertEqual(status, 200, body)

    def test_4_sigterm_removes_the_directories(self):
        status, body = self.load("copy", {"config": "{}", "file:1/model.onnx": self.model})
        self.assertEqual(status, 200, body)
        self.assertEqual(len(self.written()), 1)
        type(self).rc = self.server.terminate()
        self.assertEqual(self.rc, 0)
        self.assertEqual(self.written(), [])

    def test_5_the_next_start_removes_what_a_killed_server_left(self):
        killed = self.start("override-killed.log")
        try:
            status, body = self.load("copy", {"config": "{}", "file:1/model.onnx": self.model},
                                     killed)
            self.assertEqual(status, 200, body)
            left = self.written()
            self.assertEqual(left, ["harrier-override-%d-%s" % (killed.proc.pid, left[0][-6:])])
        finally:
            killed.proc.kill()  # no shutdown: the directory stays behind
            killed.proc.wait()
            killed.terminate()
        self.assertEqual(self.written(), left)
        # Another server's directory that is still in use is left alone.
        live = os.path.join(self.tmp, "harrier-override-%d-abcdef" % os.getpid())
        os.makedirs(live)
        again = self.start("override-again.log")
        try:
            self.assertEqual(self.written(), [os.path.basename(live)])
            self.assertIn("no longer running", again.log_text())
        finally:
            self.assertEqual(again.terminate(), 0)
            shutil.rmtree(live)


class ParallelLoadTest(unittest.TestCase):
    """--model-load-thread-count 2: several models load at start, two at a time, and the server is
    ready once all are; the load API takes two models at once; bad counts stop the start."""

    def make_repository(self, name, copies):
        repo = make_repository(name)
        for i in range(2, copies + 1):
            shutil.copytree(os.path.join(repo, "dense"), os.path.join(repo, "dense%d" % i))
        return repo

    def test_1_every_model_is_ready_at_start_with_two_threads(self):
        repo = self.make_repository("parallel-repo", 4)  # dense, dense2..4, simple
        server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "parallel.log"),
                                 ["--model-load-thread-count", "2"])
        try:
            rows = index_rows(server.port)
            self.assertEqual(sorted(rows), [("dense", "1"), ("dense2", "1"), ("dense3", "1"),
                                            ("dense4", "1"), ("simple", "1")])
            self.assertEqual({r["state"] for r in rows.values()}, {"READY"}, rows)
            c = Client(server.port)
            self.assertEqual(c.call("GET", "/v2/health/ready")[0], 200)
            for model in ("dense", "dense2", "dense3", "dense4"):
                status, body = c.call("POST", "/v2/models/%s/infer" % model, BODY)
                self.assertEqual(status, 200, (model, body))
            self.assertIn("5 of 5 model version(s) ready", server.log_text())
        finally:
            self.assertEqual(server.terminate(), 0)

    def test_2_the_load_api_loads_two_models_at_once_in_explicit_mode(self):
        repo = self.make_repository("parallel-explicit-repo", 3)
        server = harness.Harrier(ARGS.harrier, repo,
                                 os.path.join(ARGS.work_dir, "parallel-explicit.log"),
                                 ["--model-load-thread-count", "2", "--model-control-mode",
                                  "explicit", "--load-model", "dense", "--load-model", "simple"])
        try:
            rows = index_rows(server.port)
            self.assertEqual(rows[("dense", "1")]["state"], "READY")
            self.assertEqual(rows[("simple", "1")]["state"], "READY")
            answers = {}

            def load(model):
                answers[model] = Client(server.port).call(
                    "POST", "/v2/repository/models/%s/load" % model)[0]

            threads = [threading.Thread(target=load, args=(m,)) for m in ("dense2", "dense3")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(answers, {"dense2": 200, "dense3": 200})
            rows = index_rows(server.port)
            self.assertEqual({r["state"] for r in rows.values()}, {"READY"}, rows)
            # One model's unload then load, asked back to back, answer in that order.
            c = Client(server.port)
            self.assertEqual(c.call("POST", "/v2/repository/models/dense2/unload")[0], 200)
            self.assertEqual(c.call("POST", "/v2/repository/models/dense2/load")[0], 200)
            self.assertEqual(c.call("POST", "/v2/models/dense2/infer", BODY)[0], 200)
        finally:
            self.assertEqual(server.terminate(), 0)

    def test_3_a_count_that_is_not_a_positive_integer_stops_the_start(self):
        repo = self.make_repository("parallel-bad-repo", 1)
        for bad in ("0", "-2", "1.5", "four"):
            r = subprocess.run([ARGS.harrier, "serve", "--model-repository", repo,
                                "--model-load-thread-count", bad],
                               capture_output=True, timeout=60)
            self.assertNotEqual(r.returncode, 0, bad)
            self.assertIn(b"--model-load-thread-count", r.stderr, (bad, r.stderr))
            self.assertNotIn(b"listening on", r.stderr + r.stdout)


@unittest.skipIf(harness.SANITIZER, harness.SANITIZER_ALLOCATOR)
class MemoryTest(unittest.TestCase):
    """tools/make_memory_models.py's wide (64 MiB of weights) in explicit mode, with the default
    --model-load-retain-mb (512)."""
    server = None

    @classmethod
    def setUpClass(cls):
        repo = os.path.join(ARGS.work_dir, "memory-repo")
        harness.generate_repository(ARGS.source_dir, repo, ("make_memory_models.py",))
        cls.server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "memory.log"),
                                     ["--model-control-mode", "explicit", "--load-model", "wide"])

    @classmethod
    def tearDownClass(cls):
        cls.rc = cls.server.terminate()

    def test_1_reloads_keep_what_they_free_until_loads_stop_then_give_it_back(self):
        pid = self.server.proc.pid
        loaded = rss(pid)  # the load at start trimmed after it: the baseline
        c = Client(self.server.port)
        for i in range(3):
            status, body = c.call("POST", "/v2/repository/models/wide/load")
            self.assertEqual(status, 200, "reload %d: %s" % (i, body))
        kept = rss(pid)
        # A reload frees the replaced weights and its own temporaries (the parsed model): kept
        # for the next load, within the budget.
        self.assertGreater(kept - loaded, 96 * MIB, (loaded, kept))
        self.assertLess(kept - loaded, 512 * MIB + 64 * MIB, (loaded, kept))
        # No load for 30 s (FreedMemory::kSettleAfter): given back.
        self.assertTrue(wait_for(lambda: rss(pid) < loaded + 48 * MIB, 60),
                        (loaded, kept, rss(pid)))
        self.assertIn("READY", [r["state"] for r in index_rows(self.server.port).values()])

    def test_2_an_unload_gives_the_models_memory_back_at_once(self):
        pid = self.server.proc.pid
        loaded = rss(pid)
        status, body = Client(self.server.port).call("POST", "/v2/repository/models/wide/unload")
        self.assertEqual(status, 200, body)
        self.assertTrue(wait_for(lambda: index_rows(self.server.port)[("wide", "1")]["reason"]
                                 == "unloaded"))
        # Half the model's 64 MiB at least (the rest of what it held may stay in glibc's
        # bookkeeping and the thread caches).
        self.assertTrue(wait_for(lambda: rss(pid) < loaded - 32 * MIB, 5), (loaded, rss(pid)))


class SharedSessionTest(unittest.TestCase):
    """share_session_between_instances: wide (64 MiB of weights) with two instances, served once
    with a session per instance and once with one session for both."""

    def test_two_instances_on_one_session_hold_the_weights_once_and_answer_alike(self):
        source = os.path.join(ARGS.work_dir, "shared-session-source")
        if not os.path.exists(os.path.join(source, "wide", "1", "model.onnx")):
            harness.generate_repository(ARGS.source_dir, source, ("make_memory_models.py",))
        inputs = [[((k * 31 + i) % 17 - 8) / 64.0 for i in range(2048)] for k in range(8)]
        memory, answers = {}, {}
        for setting in ("separate", "shared"):
            repo = os.path.join(ARGS.work_dir, "shared-session-" + setting)
            shutil.rmtree(repo, ignore_errors=True)
            os.makedirs(os.path.join(repo, "wide", "1"))
            os.symlink(os.path.join(source, "wide", "1", "model.onnx"),
                       os.path.join(repo, "wide", "1", "model.onnx"))
            with open(os.path.join(repo, "wide", "config.pbtxt"), "w") as f:
                f.write("instance_group [{ count: 2 kind: KIND_CPU }]\n")
                if setting == "shared":
                    f.write('parameters { key: "share_session_between_instances" '
                            'value: { string_value: "true" } }\n')
            server = harness.Harrier(ARGS.harrier, repo,
                                     os.path.join(ARGS.work_dir, "shared-session-%s.log" % setting))
            try:
                self.assertTrue(wait_for(lambda: Client(server.port).call(
                    "GET", "/v2/models/wide/ready")[0] == 200), setting)
                memory[setting] = rss(server.proc.pid)
                # Two clients at once, so that both instances run, each request its own input.
                results = {}

                def client(first):
                    c = Client(server.port)
                    for k in range(first, len(inputs), 2):
                        for _ in range(5):
                            status, body = c.call("POST", "/v2/models/wide/infer", json.dumps({
                                "inputs": [{"name": "x", "shape": [1, 2048], "datatype": "FP32",
                                            "data": inputs[k]}]}).encode())
                            answer = (status, body["outputs"][0]["data"] if status == 200 else body)
                            self.assertEqual(results.setdefault(k, answer), answer, (setting, k))

                threads = [threading.Thread(target=client, args=(i,)) for i in range(2)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                answers[setting] = results
            finally:
                self.assertEqual(server.terminate(), 0, setting)
        for k in range(len(inputs)):
            self.assertEqual(answers["shared"][k][0], 200, answers["shared"][k])
        self.assertEqual(answers["shared"], answers["separate"])
        # The second session's copy of the weights (64 MiB) is not there; most of it, at least.
        self.assertLess(memory["shared"], memory["separate"] - 48 * MIB, memory)


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)
    suite = unittest.TestSuite()
    loader = unittest.TestLoader()
    suite.addTests(loader.loadTestsFromTestCase(ExplicitModeTest))
    suite.addTests(loader.loadTestsFromTestCase(PollModeTest))
    suite.addTests(loader.loadTestsFromTestCase(TrafficTest))
    suite.addTests(loader.loadTestsFromTestCase(FileOverrideTest))
    suite.addTests(loader.loadTestsFromTestCase(ParallelLoadTest))
    suite.addTests(loader.loadTestsFromTestCase(MemoryTest))
    suite.addTests(loader.loadTestsFromTestCase(SharedSessionTest))
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if ARGS.verbose else 1).run(suite)
    rcs = [getattr(t, "rc", None)
           for t in (ExplicitModeTest, PollModeTest, TrafficTest, FileOverrideTest, MemoryTest)]
    bad_rc = next((rc for rc in rcs if rc not in (0, None)), None)
    passed, failed = harness.summarize(result, bad_rc if bad_rc is not None else 0)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
