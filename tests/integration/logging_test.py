#!/usr/bin/python3
"""Harrier's access log, request ids, Server-Timing and /v2/logging, end to end.

usage: /usr/bin/python3 tests/integration/logging_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Starts the real binary with --access-log on --log-format json on ports it picks itself (0),
over a repository holding examples/models/simple, sends requests with and without X-Request-Id
(successes and errors), and checks that the id round-trips in the response, that every
response names one, that a successful inference carries a parseable Server-Timing header, and
that stderr carries one JSON access line per request with the id, model, version, input
shapes, status, bytes and stage durations (an error's line its cause), also for requests the
HTTP layer refuses itself (a body over --max-body-bytes, a malformed request line). Then reads
and changes the log level through GET/POST /v2/logging and checks that a debug line appears
only after the change. Python stdlib only. The last line is "N passed, N failed".
"""
import fcntl
import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import termios
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None
# --max-body-bytes: small, so that a body over it is cheap to send.
MAX_BODY_BYTES = 65536


class Server(harness.Harrier):
    """harrier serve with --access-log on --log-format json, on ports it picks itself."""

    def __init__(self, repo):
        super().__init__(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "logging-harrier.log"),
                         ["--access-log", "on", "--log-format", "json",
                          "--max-body-bytes", str(MAX_BODY_BYTES)])

    def json_lines(self):
        """Every complete stderr line, parsed; a line that is not a JSON object fails the test.
        The last line is left out while it has no newline yet: the server may be writing it
        (another thread's line lands while the test reads)."""
        lines = []
        text = self.log_text()
        if not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        for line in text.splitlines():
            if not line.strip():
                continue
            doc = json.loads(line)  # raises on a line that is not JSON
            assert isinstance(doc, dict), line
            lines.append(doc)
        return lines

    def access_lines(self, request_id):
        """The access lines for `request_id`, waiting a little for the asynchronous writer."""
        deadline = time.monotonic() + 10
        while True:
            found = [d for d in self.json_lines()
                     if d.get("log") == "access" and d.get("request_id") == request_id]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.05)


def request(method, target, body=b"", headers=None):
    """One HTTP/1.1 request on a new connection: (status, {lower-case header: value}, body)."""
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: harrier", "Connection: close"]
    for k, v in (headers or {}).items():
        lines.append("%s: %s" % (k, v))
    lines.append("Content-Length: %d" % len(body))
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
    return raw_request(data)


def raw_request(data):
    """Sends `data` on a new connection and reads to EOF: (status, {header: value}, body)."""
    with socket.create_connection(("127.0.0.1", SERVER.port), timeout=10) as s:
        s.sendall(data)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    head_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in head_lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return int(head_lines[0].split(" ")[1]), headers, rest


def infer_body():
    return json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [3] * 16},
    ]}).encode()


GENERATED_ID = re.compile(r"^[0-9a-f]{6}-[0-9a-f]{8}$")
TIMING_METRIC = re.compile(r"^([A-Za-z0-9_-]+);dur=(\d+(?:\.\d+)?)$")


def parse_server_timing(value):
    """{name: milliseconds} of a Server-Timing header; fails on anything else."""
    metrics = {}
    for part in value.split(","):
        m = TIMING_METRIC.match(part.strip())
        assert m, "unparsable Server-Timing metric %r in %r" % (part, value)
        metrics[m.group(1)] = float(m.group(2))
    return metrics


class LoggingTests(unittest.TestCase):
    def test_request_id_round_trips_and_is_logged_with_the_inference(self):
        body = infer_body()
        status, headers, resp = request("POST", "/v2/models/simple/infer", body,
                                        {"X-Request-Id": "client-abc-1"})
        self.assertEqual(status, 200, resp)
        self.assertEqual(headers.get("x-request-id"), "client-abc-1")
        timing = parse_server_timing(headers["server-timing"])
        self.assertEqual(set(timing), {"queue", "input", "infer", "output", "total"})
        self.assertGreater(timing["total"], 0)
        self.assertGreaterEqual(timing["total"] + 0.0015, timing["queue"] + timing["infer"])
        lines = SERVER.access_lines("client-abc-1")
        self.assertEqual(len(lines), 1, lines)
        a = lines[0]
        self.assertEqual(a["level"], "info")
        self.assertEqual(a["protocol"], "http")
        self.assertEqual(a["method"], "POST")
        self.assertEqual(a["target"], "/v2/models/simple/infer")
        self.assertEqual(a["status"], 200)
        self.assertEqual(a["model"], "simple")
        self.assertEqual(a["version"], 1)
        self.assertEqual(a["inputs"], [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16]},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16]}])
        self.assertEqual(a["request_bytes"], len(body))
        self.assertEqual(a["response_bytes"], len(resp))
        for stage in ("queue_us", "input_us", "infer_us", "output_us", "total_us"):
            self.assertIsInstance(a[stage], int, stage)
            self.assertGreaterEqual(a[stage], 0, stage)
        self.assertGreater(a["total_us"], 0)
        self.assertGreaterEqual(a["total_us"] + 2, a["queue_us"] + a["infer_us"])
        self.assertNotIn("error", a)
        # The header and the line tell the same story (ms vs us, each rounded).
        self.assertAlmostEqual(timing["infer"] * 1000, a["infer_us"], delta=2)

    def test_a_request_without_an_id_gets_a_generated_one(self):
        ids = set()
        for _ in range(3):
            status, headers, _ = request("POST", "/v2/models/simple/infer", infer_body())
            self.assertEqual(status, 200)
            ids.add(headers.get("x-request-id", ""))
        self.assertEqual(len(ids), 3, ids)
        for rid in ids:
            self.assertRegex(rid, GENERATED_ID)
            self.assertEqual(len(SERVER.access_lines(rid)), 1, rid)

    def test_an_unacceptable_id_is_replaced(self):
        status, headers, _ = request("GET", "/v2/health/live", b"", {"X-Request-Id": "x" * 200})
        self.assertEqual(status, 200)
        self.assertRegex(headers.get("x-request-id", ""), GENERATED_ID)

    def test_errors_carry_the_id_and_their_cause(self):
        status, headers, resp = request("POST", "/v2/models/simple/infer", b'{"inputs": [}',
                                        {"X-Request-Id": "bad-json-1"})
        self.assertEqual(status, 400, resp)
        self.assertEqual(headers.get("x-request-id"), "bad-json-1")
        self.assertNotIn("server-timing", headers)
        a = SERVER.access_lines("bad-json-1")
        self.assertEqual(len(a), 1)
        self.assertEqual(a[0]["status"], 400)
        self.assertEqual(a[0]["model"], "simple")
        self.assertIn("JSON", a[0]["error"])

        status, headers, _ = request("POST", "/v2/models/nope/infer", infer_body(),
                                     {"X-Request-Id": "unknown-model-1"})
        self.assertEqual(status, 404)
        self.assertEqual(headers.get("x-request-id"), "unknown-model-1")
        a = SERVER.access_lines("unknown-model-1")
        self.assertEqual(len(a), 1)
        self.assertEqual(a[0]["status"], 404)
        self.assertIn("Request for unknown model: 'nope' is not found", a[0]["error"])

        body = json.dumps({"inputs": [
            {"name": "WRONG", "shape": [1, 16], "datatype": "INT32", "data": [0] * 16}]}).encode()
        status, headers, _ = request("POST", "/v2/models/simple/infer", body,
                                     {"X-Request-Id": "wrong-input-1"})
        self.assertEqual(status, 400)
        a = SERVER.access_lines("wrong-input-1")
        self.assertEqual(len(a), 1)
        self.assertEqual(a[0]["inputs"], [{"name": "WRONG", "datatype": "INT32", "shape": [1, 16]}])
        self.assertIn("WRONG", a[0]["error"])

    def test_requests_the_http_layer_refuses_are_logged(self):
        # A body over --max-body-bytes: refused by the transport from its Content-Length.
        status, headers, resp = request("POST", "/v2/models/simple/infer",
                                        b"x" * (MAX_BODY_BYTES + 1), {"X-Request-Id": "too-big-1"})
        self.assertEqual(status, 413, resp)
        self.assertEqual(headers.get("x-request-id"), "too-big-1")
        a = SERVER.access_lines("too-big-1")
        self.assertEqual(len(a), 1, a)
        self.assertEqual(a[0]["status"], 413)
        self.assertEqual(a[0]["protocol"], "http")
        self.assertEqual(a[0]["method"], "POST")
        self.assertEqual(a[0]["target"], "/v2/models/simple/infer")
        self.assertEqual(a[0]["request_bytes"], 0)  # refused before any of the body was read
        self.assertEqual(a[0]["response_bytes"], len(resp))
        self.assertIn(str(MAX_BODY_BYTES), a[0]["error"])
        self.assertNotIn("model", a[0])

        # A malformed request line: no method or target, a generated id in the header and line.
        status, headers, resp = raw_request(b"NOT AN HTTP REQUEST\r\n\r\n")
        self.assertEqual(status, 400, resp)
        rid = headers.get("x-request-id", "")
        self.assertRegex(rid, GENERATED_ID)
        a = SERVER.access_lines(rid)
        self.assertEqual(len(a), 1, a)
        self.assertEqual(a[0]["status"], 400)
        self.assertEqual(a[0]["method"], "")
        self.assertEqual(a[0]["target"], "")
        self.assertEqual(a[0]["response_bytes"], len(resp))
        self.assertIn("malformed HTTP request", a[0]["error"])

    def test_logging_endpoint_changes_the_level(self):
        status, _, body = request("GET", "/v2")
        self.assertEqual(status, 200)
        self.assertIn("logging", json.loads(body)["extensions"])
        status, _, body = request("GET", "/v2/logging")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body), {"log_file": "", "log_info": True,
                                            "log_warning": True, "log_error": True,
                                            "log_verbose_level": 0, "log_format": "json"})
        debug_line = "http: answering 400 and closing"

        def send_garbage():
            """A malformed request, answered 400, then its access line. The server logs the
            debug line (at debug level) before it builds the 400 and its access record, on the
            same thread, with a synchronous logger; the access line is written later, by the
            access log's writer thread. So once the access line is in the log, the debug line
            would be too: an absence checked after this is an absence, not a race."""
            status, headers, resp = raw_request(b"NOT AN HTTP REQUEST\r\n\r\n")
            self.assertEqual(status, 400, resp)
            rid = headers.get("x-request-id", "")
            self.assertRegex(rid, GENERATED_ID)
            self.assertEqual(len(SERVER.access_lines(rid)), 1, "no access line for %s" % rid)

        def debug_lines():
            return [d for d in SERVER.json_lines()
                    if d.get("level") == "debug" and debug_line in d.get("message", "")]

        send_garbage()
        self.assertEqual(debug_lines(), [])
        for bad in (b"{not json", b'{"log_levels": 1}', b'{"log_warning": false}'):
            status, _, resp = request("POST", "/v2/logging", bad)
            self.assertEqual(status, 400, (bad, resp))
        status, _, body = request("POST", "/v2/logging", b'{"log_verbose_level": 1}')
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["log_verbose_level"], 1)
        send_garbage()
        # No waiting: at debug level the line is in by the time the access line is, which is
        # what makes the absence checks before and after this one meaningful.
        self.assertEqual(len(debug_lines()), 1)
        status, _, body = request("POST", "/v2/logging", b'{"log_verbose_level": 0}')
        self.assertEqual(status, 200, body)
        send_garbage()
        self.assertEqual(len(debug_lines()), 1)

    def test_every_stderr_line_is_json(self):
        self.assertTrue(SERVER.json_lines())

    def test_dropped_access_lines_are_a_metric(self):
        url = "http://127.0.0.1:%d/metrics" % SERVER.metrics_port
        with urllib.request.urlopen(url, timeout=10) as r:
            scrape = r.read().decode("utf-8")
        self.assertIn("# TYPE harrier_access_log_dropped_lines_total counter", scrape)
        self.assertRegex(scrape, r"(?m)^harrier_access_log_dropped_lines_total 0$")

    @staticmethod
    def unread(pipe):
        """Bytes in `pipe` that nobody has read."""
        return struct.unpack("i", fcntl.ioctl(pipe.fileno(), termios.FIONREAD, b"\0" * 4))[0]

    def test_a_stalled_reader_of_stderr_holds_neither_requests_nor_the_stop(self):
        """stderr is a pipe whose reader stops reading once the server listens (a stuck log
        shipper), with the access log on it: requests are still answered, the lines that do
        not fit are dropped, and SIGTERM ends the process within the logs' grace
        periods. The stop's own log line once blocked in write(2) until the reader read."""
        repo = os.path.join(ARGS.work_dir, "repo")
        proc = subprocess.Popen(
            [ARGS.harrier, "serve", "--model-repository", repo, "--http-port", "0",
             "--grpc-port", "0", "--metrics-port", "0", "--http-threads", "2",
             "--access-log", "on", "--exit-timeout-secs", "5"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            text = b""
            deadline = time.monotonic() + 60
            while not (re.search(rb"listening on HTTP [^ ]+:(\d+)", text)
                       and re.search(rb"listening on metrics [^ ]+:(\d+)", text)):
                self.assertLess(time.monotonic(), deadline, text[-2000:])
                ready, _, _ = select.select([proc.stderr], [], [], 1)
                if ready:
                    chunk = os.read(proc.stderr.fileno(), 65536)
                    self.assertTrue(chunk, "harrier exited: %r" % text[-2000:])
                    text += chunk
            port = int(re.search(rb"listening on HTTP [^ ]+:(\d+)", text).group(1))
            metrics_port = int(re.search(rb"listening on metrics [^ ]+:(\d+)", text).group(1))
            # From here on nobody reads stderr. About 200 access lines fill a pipe (64 KiB).
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for _ in range(1500):
                conn.request("POST", "/v2/models/simple/infer", body=infer_body())
                r = conn.getresponse()
                r.read()
                self.assertEqual(r.status, 200)
            conn.close()
            # The pipe is full (the access log writer's write(2) blocks), and the server
            # answers its metrics still.
            # (Full is 16 pages, not 64 KiB: each atomic write of whole lines takes a page.)
            unread, previous = self.unread(proc.stderr), -1
            while unread != previous:
                time.sleep(0.5)
                unread, previous = self.unread(proc.stderr), unread
            self.assertGreater(unread, 32768, "the pipe never filled")
            status, scrape = harness.http_call(metrics_port, "GET", "/metrics")
            self.assertEqual(status, 200)
            has_log_metric = re.search(rb"(?m)^harrier_log_dropped_lines_total \d+$", scrape)
            start = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                self.fail("still running 30 s after SIGTERM with stderr stalled")
            # Nothing in flight: the stop is the access log's and the server log's grace
            # periods (2 s each) at most.
            self.assertLess(time.monotonic() - start, 10)
            self.assertEqual(rc, 0)
            self.assertTrue(has_log_metric, "no harrier_log_dropped_lines_total")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()


def build_repository(repo):
    if os.path.exists(repo):
        shutil.rmtree(repo)
    os.makedirs(repo)
    shutil.copytree(os.path.join(ARGS.source_dir, "examples", "models", "simple"),
                    os.path.join(repo, "simple"))


def main():
    global ARGS, SERVER
    ARGS = harness.parse_args(__doc__)

    def start():
        global SERVER
        repo = os.path.join(ARGS.work_dir, "repo")
        build_repository(repo)
        SERVER = Server(repo)
        return SERVER

    suite = unittest.TestLoader().loadTestsFromTestCase(LoggingTests)
    return harness.run_suite(suite, start, ARGS.verbose)

if __name__ == "__main__":
    sys.exit(main())
