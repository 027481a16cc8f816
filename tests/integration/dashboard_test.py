#!/usr/bin/python3
"""Harrier's status page, end to end: the real binary, real traffic, headless Chromium.

usage: /usr/bin/python3 tests/integration/dashboard_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v] [--screenshot PNG]

Starts harrier on ports it picks (--http-port 0 --grpc-port 0 --metrics-port 0, read from the
log) over a copy of examples/models/simple, sends inference traffic, checks GET /dashboard and
GET /v2/dashboard/summary, then loads the page in headless Chromium (/usr/bin/chromium,
--headless --no-sandbox --disable-gpu, a fresh user-data dir, --dump-dom) while traffic keeps
flowing, and checks that the rendered DOM shows the model, READY and non-zero figures.
Chromium missing is a failure, never a skip (tools/deps.sh installs it). --screenshot PNG also
saves a 1200x800 screenshot (docs/dashboard.png is made this way, by hand).
Python stdlib + numpy only. The last line is "N passed, N failed".
"""
import html.parser
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks
import run  # noqa: E402 - the socket and request helpers of the main integration suite

ARGS = None
SERVER = None
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                  "--virtual-time-budget=5000"]


def Server(repo):
    return harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "dashboard-harrier.log"))


def get(path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (SERVER.port, path), timeout=10) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode("utf-8")


def infer_simple(c):
    r = c.infer("simple", {"INPUT0": run.SIMPLE_A, "INPUT1": run.SIMPLE_B})
    assert r.status == 200, r.raw[:300]


class Traffic:
    """Inference requests to `simple` from a thread until stopped, so that the page's
    requests/s is not zero while Chromium looks at it. The first exception the thread meets
    (a failed assertion on an answer among them) ends it and is kept; check() raises it in the
    test's thread, where unittest sees it."""

    def __init__(self):
        self.stop = threading.Event()
        self.sent = 0
        self.error = None  # (exception, its formatted traceback)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        try:
            c = run.client(SERVER.port)
            while not self.stop.is_set():
                infer_simple(c)
                self.sent += 1
                time.sleep(0.005)
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread by check()
            self.error = (e, traceback.format_exc())

    def close(self):
        self.stop.set()
        self.thread.join(30)

    def check(self):
        """After close(): raises AssertionError if the thread failed or did not stop."""
        if self.thread.is_alive():
            raise AssertionError("the traffic thread did not stop within 30 s")
        if self.error is not None:
            raise AssertionError("the traffic thread failed after %d requests: %r\n%s"
                                 % (self.sent, self.error[0], self.error[1])) from self.error[0]


def chromium(*args, timeout=90):
    """Runs headless Chromium with a fresh profile; returns its stdout. Always cleaned up."""
    profile = tempfile.mkdtemp(prefix="harrier-chromium-")
    cmd = [CHROMIUM] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile] + list(args)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise AssertionError("chromium did not finish in %d s" % timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    if proc.returncode != 0:
        raise AssertionError("chromium exited %d: %s" % (proc.returncode,
                                                         err.decode("utf-8", "replace")[-2000:]))
    return out.decode("utf-8", "replace")


class Rows(html.parser.HTMLParser):
    """The text of each <td class="..."> in each <tr data-model="..."> of the dumped DOM."""

    def __init__(self):
        super().__init__()
        self.rows = []
        self._cls = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and "data-model" in attrs:
            self.rows.append({})
        elif tag == "td" and self.rows:
            self._cls = (attrs.get("class") or "").split()
            self._cls = [c for c in self._cls if c != "l"][0] if self._cls else None
            if self._cls:
                self.rows[-1][self._cls] = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._cls = None

    def handle_data(self, data):
        if self._cls and self.rows:
            self.rows[-1][self._cls] += data


def number(text):
    try:
        return float(text)
    except ValueError:
        return None  # "–": no figure yet


class DashboardTest(unittest.TestCase):
    REQUESTS = 50

    @classmethod
    def setUpClass(cls):
        c = run.client(SERVER.port)
        for _ in range(cls.REQUESTS):
            infer_simple(c)

    def test_page_is_served_self_contained(self):
        for path in ("/", "/dashboard"):
            status, ctype, body = get(path)
            self.assertEqual(status, 200)
            self.assertEqual(ctype, "text/html; charset=utf-8")
            self.assertIn("/v2/dashboard/summary", body)
            self.assertNotRegex(body, r"https?://|<link|src=")
        # What a browser may do with it (probe 61): no framing, no forms, fetches to this
        # server only (Chromium still renders it under this policy, below).
        with urllib.request.urlopen("http://127.0.0.1:%d/" % SERVER.port, timeout=10) as r:
            policy = r.headers.get("Content-Security-Policy", "")
            self.assertIn("frame-ancestors 'none'", policy)
            self.assertIn("connect-src 'self'", policy)
            self.assertIn("form-action 'none'", policy)
            self.assertEqual(r.headers.get("X-Frame-Options"), "DENY")
            self.assertEqual(r.headers.get("X-Content-Type-Options"), "nosniff")

    def test_summary_has_the_traffic(self):
        status, ctype, body = get("/v2/dashboard/summary")
        self.assertEqual(status, 200)
        self.assertEqual(ctype, "application/json")
        doc = json.loads(body)
        rows = [v for v in doc["versions"] if v["name"] == "simple"]
        self.assertEqual(len(rows), 1)
        v = rows[0]
        self.assertEqual(v["state"], "READY")
        self.assertGreaterEqual(v["success"], self.REQUESTS)
        self.assertEqual(sum(v["duration_buckets"]), v["success"])
        self.assertEqual(len(v["duration_buckets"]), len(doc["latency_bounds_seconds"]) + 1)
        self.assertGreater(v["p99_seconds"], 0)
        self.assertGreaterEqual(v["p99_seconds"], v["p50_seconds"])

    def test_chromium_renders_real_figures(self):
        self.assertTrue(os.access(CHROMIUM, os.X_OK),
                        "%s is missing: install Debian's chromium (tools/deps.sh)" % CHROMIUM)
        traffic = Traffic()
        try:
            time.sleep(0.5)
            dom = chromium("--dump-dom", "http://127.0.0.1:%d/dashboard" % SERVER.port)
            if ARGS.screenshot:
                chromium("--screenshot=" + os.path.abspath(ARGS.screenshot),
                         "--window-size=1200,800",
                         "http://127.0.0.1:%d/dashboard" % SERVER.port)
        finally:
            traffic.close()
        traffic.check()
        self.assertGreater(traffic.sent, 0)
        # The dump holds the script's source too: look at the status line only.
        updated = re.search(r'<div id="updated">([^<]*)</div>', dom)
        self.assertIsNotNone(updated, dom[:3000])
        self.assertTrue(updated.group(1).startswith("updated "), updated.group(1))
        parser = Rows()
        parser.feed(dom)
        rows = [r for r in parser.rows if r.get("name") == "simple"]
        self.assertEqual(len(rows), 1, dom[-3000:])
        row = rows[0]
        self.assertEqual(row["state"], "READY")
        self.assertGreaterEqual(int(row["success"]), self.REQUESTS)
        rps, p99_all = number(row["rps"]), number(row["p99-all"])
        self.assertTrue((rps or 0) > 0 or (p99_all or 0) > 0, row)
        self.assertGreater(p99_all or 0, 0, row)
        self.assertIn("<canvas", dom)


def main():
    global ARGS, SERVER
    ARGS = harness.parse_args(
        __doc__, lambda p: p.add_argument("--screenshot", default=""))
    run.ARGS = ARGS

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo-dashboard")
        if os.path.exists(repo):
            shutil.rmtree(repo)
        os.makedirs(repo)
        shutil.copytree(os.path.join(ARGS.source_dir, "examples", "models", "simple"),
                        os.path.join(repo, "simple"))
        SERVER = Server(repo)
        return SERVER

    suite = unittest.TestLoader().loadTestsFromTestCase(DashboardTest)
    return harness.run_suite(suite, start, ARGS.verbose)

if __name__ == "__main__":
    sys.exit(main())
