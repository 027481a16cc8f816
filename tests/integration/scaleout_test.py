#!/usr/bin/python3
"""Scale-out on one machine: three replicas behind HAProxy, a rolling restart, a SIGKILL.

usage: /usr/bin/python3 tests/integration/scaleout_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Three `harrier serve` replicas on loopback, each with --shutdown-delay-secs 2 and a repository
of its own, behind HAProxy (Debian's package) that health-checks GET /v2/health/ready every
200 ms (one failure marks a replica down, two successes up) and, like a Kubernetes Service,
never retries a request (`retries 0`, no redispatch). A closed-loop client (four connections to
HAProxy, each sending the next inference as soon as the last is answered) runs throughout.

1. Rolling restart: each replica in turn gets SIGTERM (readiness 503, so HAProxy stops sending
   within a check; the replica keeps serving for the 2 s delay, then exits 0) and comes back on
   the same port with a new model version (version 2 added to its repository). Every request
   must succeed: zero failures, and at the end every replica answers with version 2.
   For comparison (printed, not asserted), one replica is then restarted the same way with
   --shutdown-delay-secs 0: HAProxy still sends it requests until its next check fails.
2. One replica killed with SIGKILL: the requests in flight on it, and those HAProxy sends it
   before its next check fails, fail; the test reports how many, and checks that the other two
   carried on (the failures stop within a second, and requests succeed after it).

Python stdlib only (plus HAProxy). The figures are printed; the last line is "N passed, N failed".
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the model generators and the summary line

ARGS = None
HAPROXY = "/usr/sbin/haproxy"
DELAY_SECS = 2
BODY = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
]})
EXPECTED = [i + 1 for i in range(16)]


def status_of(port, path):
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        conn.request("GET", path)
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


class Replica:
    """One harrier on a fixed port (HAProxy's configuration names it), restartable."""

    def __init__(self, index, repo):
        self.index, self.repo = index, repo
        # Only the HTTP port is fixed (HAProxy's configuration names it, and a restart must come
        # back on it); the others are the kernel's pick, so that a port another test takes
        # between free_port() and the bind cannot fail a start.
        self.port = harness.free_port()
        self.proc = None
        self.starts = 0

    def start(self, delay_secs=DELAY_SECS):
        self.starts += 1
        log = open(os.path.join(ARGS.work_dir, "replica-%d-%d.log" % (self.index, self.starts)),
                   "wb")
        self.proc = subprocess.Popen(
            [ARGS.harrier, "serve", "--model-repository", self.repo,
             "--http-address", "127.0.0.1", "--http-port", str(self.port),
             "--grpc-port", "0", "--metrics-port", "0",
             "--http-threads", "1", "--shutdown-delay-secs", str(delay_secs),
             "--exit-timeout-secs", "10"], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 60
        while status_of(self.port, "/v2/health/ready") != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("replica %d did not become ready" % self.index)
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class LoadClient:
    """A closed loop per connection: send, wait for the answer, send the next. Every outcome is
    recorded as (time sent, time answered, ok, model_version or why it failed)."""

    def __init__(self, port, connections=4):
        self.port = port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.records = []
        self.threads = [threading.Thread(target=self._loop, daemon=True)
                        for _ in range(connections)]

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _loop(self):
        conn = None
        while not self.stop.is_set():
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            sent = time.monotonic()
            try:
                conn.request("POST", "/v2/models/simple/infer", body=BODY,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                if r.status == 200 and json.loads(data)["outputs"][0]["data"] == EXPECTED:
                    outcome = (True, json.loads(data)["model_version"])
                else:
                    outcome = (False, "HTTP %d %s" % (r.status, data[:100]))
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException) as e:
                outcome = (False, "%s: %s" % (type(e).__name__, e))
                conn.close()
                conn = None
            with self.lock:
                self.records.append((sent, time.monotonic()) + outcome)

    def between(self, start, end):
        with self.lock:
            return [r for r in self.records if start <= r[0] < end]


def haproxy_config(frontend_port, replicas):
    servers = "\n".join("    server r%d 127.0.0.1:%d check" % (r.index, r.port) for r in replicas)
    return """global
    maxconn 1024
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    # A Kubernetes Service never retries a request elsewhere; neither does this.
    retries 0
    no option redispatch
frontend inference
    bind 127.0.0.1:%d
    default_backend harrier
backend harrier
    balance roundrobin
    option httpchk GET /v2/health/ready
    http-check expect status 200
    default-server inter 200ms fastinter 200ms downinter 200ms fall 1 rise 2
%s
""" % (frontend_port, servers)


class ScaleOutTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        source_repo = os.path.join(ARGS.work_dir, "repo-source")
        harness.generate_repository(ARGS.source_dir, source_repo)
        cls.replicas = []
        cls.haproxy = None
        for i in range(3):
            repo = os.path.join(ARGS.work_dir, "repo-%d" % i)
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(os.path.join(source_repo, "simple"), os.path.join(repo, "simple"))
            cls.replicas.append(Replica(i, repo))
        # unittest skips tearDownClass when setUpClass fails: stop what started, then fail.
        try:
            cls.start_all()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_all(cls):
        for r in cls.replicas:
            r.start()
        cls.frontend = harness.free_port()
        config = os.path.join(ARGS.work_dir, "haproxy.cfg")
        with open(config, "w") as f:
            f.write(haproxy_config(cls.frontend, cls.replicas))
        check = subprocess.run([HAPROXY, "-c", "-q", "-f", config], capture_output=True,
                               text=True)
        if check.returncode != 0:
            raise RuntimeError("haproxy -c: " + check.stdout + check.stderr)
        cls.haproxy_log = open(os.path.join(ARGS.work_dir, "haproxy.log"), "wb")
        cls.haproxy = subprocess.Popen([HAPROXY, "-db", "-f", config], stdout=cls.haproxy_log,
                                       stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while status_of(cls.frontend, "/v2/health/ready") != 200:
            if cls.haproxy.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("HAProxy does not answer on %d" % cls.frontend)
            time.sleep(0.05)
        time.sleep(1)  # every replica UP (rise 2 at 200 ms)

    @classmethod
    def tearDownClass(cls):
        if cls.haproxy is not None:
            cls.haproxy.terminate()
            try:
                cls.haproxy.wait(10)
            except subprocess.TimeoutExpired:
                cls.haproxy.kill()
                cls.haproxy.wait()
            cls.haproxy_log.close()
        for r in cls.replicas:
            if r.proc is not None and r.proc.poll() is None:
                r.stop(signal.SIGKILL)

    def test_1_rolling_restart_loses_nothing_and_sigkill_loses_little(self):
        load = LoadClient(self.frontend)
        load.start()
        try:
            time.sleep(1)
            t_roll = time.monotonic()
            for r in self.replicas:
                t0 = time.monotonic()
                rc = r.stop(signal.SIGTERM)
                self.assertEqual(rc, 0, "replica %d exited with %s on SIGTERM" % (r.index, rc))
                self.assertGreaterEqual(time.monotonic() - t0, DELAY_SECS)
                # It comes back with a new model version.
                v2 = os.path.join(r.repo, "simple", "2")
                shutil.copytree(os.path.join(r.repo, "simple", "1"), v2)
                r.start()
                time.sleep(1)  # HAProxy: two good checks mark it up again
            t_rolled = time.monotonic()
            time.sleep(1)

            # For comparison, not asserted: the same restart without the delay (the replica
            # restarted first with --shutdown-delay-secs 0, then stopped).
            control = self.replicas[1]
            control.stop(signal.SIGTERM)
            control.start(delay_secs=0)
            time.sleep(1)
            t_control = time.monotonic()
            control.stop(signal.SIGTERM)
            control.start()
            time.sleep(1)
            t_controlled = time.monotonic()

            victim = self.replicas[0]
            t_kill = time.monotonic()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(10)
            time.sleep(3)
            t_end = time.monotonic()
        finally:
            load.finish()

        rolling = load.between(t_roll, t_rolled + 1)
        rolling_failed = [r for r in rolling if not r[2]]
        versions = sorted({r[3] for r in rolling if r[2]})
        after_roll = load.between(t_rolled, t_rolled + 1)
        control_failed = [r for r in load.between(t_control, t_controlled) if not r[2]]
        killed = load.between(t_kill, t_end)
        killed_failed = [r for r in killed if not r[2]]
        late = [r for r in killed_failed if r[0] > t_kill + 1.0]
        after_kill_ok = [r for r in killed if r[2] and r[0] > t_kill + 1.0]
        rate = len(rolling) / max(1e-9, t_rolled + 1 - t_roll)
        print("rolling restart of 3 replicas (SIGTERM, %d s shutdown delay, new version): "
              "%d requests in %.1f s (%.0f/s), %d failed; versions answered: %s"
              % (DELAY_SECS, len(rolling), t_rolled + 1 - t_roll, rate, len(rolling_failed),
                 versions))
        print("for comparison, one replica restarted with --shutdown-delay-secs 0: %d failed (%s)"
              % (len(control_failed), "; ".join(sorted({r[3] for r in control_failed}))[:200]))
        reasons = sorted({r[3] for r in killed_failed})
        print("SIGKILL of one replica: %d requests in the %.1f s after it, %d failed (%s), "
              "%d of them over 1 s after the kill; %d succeeded after that second"
              % (len(killed), t_end - t_kill, len(killed_failed), "; ".join(reasons)[:300],
                 len(late), len(after_kill_ok)))
        self.assertGreater(len(rolling), 100, "too little load to mean anything")
        self.assertEqual(rolling_failed[:5], [], "requests failed during the rolling restart")
        self.assertEqual(versions, ["1", "2"])
        self.assertEqual({r[3] for r in after_roll if r[2]}, {"2"},
                         "after the rolling restart every replica serves version 2")
        self.assertEqual(late, [], "failures went on after HAProxy's check window")
        self.assertGreater(len(after_kill_ok), 50, "the two other replicas did not carry on")


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)
    if not os.access(HAPROXY, os.X_OK):
        print("%s is missing: tools/deps.sh installs Debian's haproxy" % HAPROXY)
        print("0 passed, 1 failed")
        return 1
    return harness.run_cases(ScaleOutTest, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
