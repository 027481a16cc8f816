#!/usr/bin/python3
"""Harrier's HTTP/2 and TLS integration tests: the real binary, real clients.

usage: /usr/bin/python3 tests/integration/http2_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-k PATTERN] [-v]

Builds a model repository in DIR/repo-h2 (tools/make_test_models.py and
tools/make_example_models.py), makes a test CA, a server certificate and a client certificate
with `openssl` in DIR/tls, and starts harrier with h2c on the plain port and TLS on a free
HTTPS port. Checks: the same REST request suite answers identically over HTTP/1.1, h2c (prior
knowledge), h2c via `Upgrade` and h2 over TLS (curl); nghttp and h2load; openssl s_client (TLS
1.1 refused, 1.2 and 1.3 accepted, ALPN h2, resumption with tickets); client certificates
required with --tls-client-ca; bad input written frame by frame on raw sockets (garbage after
the preface, oversize header lists and bodies, a stream reset in the middle of its body), each
followed by a successful request; a 100 MB body through h2c; TLS connections the server ends
(timeouts, protocol errors) end with close_notify; the HTTP/2 window and frame-size flags are
advertised and the transport flags' ranges are enforced at startup. Python stdlib only. The last line
is "N passed, N failed"; the exit status is non-zero when anything failed.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - summarize(): what counts as failed, as in the other suites

ARGS = None
SERVER = None    # h2c + TLS
MTLS = None      # TLS with --tls-client-ca, no plain port
TLS_DIR = None
CURL = shutil.which("curl") or "/usr/bin/curl"


def run(cmd, timeout=60, input_bytes=None):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                          input=input_bytes)


class HarrierProcess:
    """harrier serve on free ports; HTTP and HTTPS ports parsed from its log."""

    def __init__(self, name, extra_args=(), plain=True):
        self.log_path = os.path.join(ARGS.work_dir, name + ".log")
        self.log = open(self.log_path, "wb")
        self.port = harness.free_port() if plain else None
        # Without plain HTTP, --http-port still names a free port: one that must stay closed.
        self.closed_port = None if plain else harness.free_port()
        self.grpc_port = harness.free_port()  # TLS when the server has a certificate
        self.metrics_port = harness.free_port()
        cmd = [ARGS.harrier, "serve", "--model-repository", os.path.join(ARGS.work_dir, "repo-h2"),
               "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
               "--http-threads", "2", "--log-verbose", "1",
               "--http-port", str(self.port if plain else self.closed_port)]
        self.proc = subprocess.Popen(cmd + list(extra_args), stdout=self.log,
                                     stderr=subprocess.STDOUT)
        self.https_port = None

    def wait_listening(self, want_https, timeout=120.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("harrier exited: %s\n%s" % (self.proc.returncode, self.log_tail()))
            text = open(self.log_path, "rb").read().decode("utf-8", "replace")
            m = re.search(r"listening on HTTPS [^ ]*:(\d+)", text)
            if m:
                self.https_port = int(m.group(1))
            ready = self.https_port is not None if want_https else True
            if ready and self.port is not None:
                r = run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http1.1",
                         "http://127.0.0.1:%d/v2/health/ready" % self.port])
                ready = r.stdout == b"200"
            elif ready:
                ready = "Server is ready" in text or "listening on HTTPS" in text
            if ready:
                return
            time.sleep(0.2)
        raise RuntimeError("harrier did not start:\n" + self.log_tail())

    def log_tail(self, lines=40):
        if not self.log.closed:  # also after terminate()
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")

    def terminate(self, timeout=60.0):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


# ---- Test certificates -------------------------------------------------------------------

def make_certificates(d):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)

    def ossl(*args):
        subprocess.run(["openssl"] + list(args), check=True, cwd=d, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)

    with open(os.path.join(d, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    for ca in ("ca", "client-ca"):
        ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", ca + ".key", "-out", ca + ".crt", "-days", "2", "-subj", "/CN=harrier " + ca)
    for leaf, ca in (("server", "ca"), ("client", "client-ca")):
        ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", leaf + ".key", "-out", leaf + ".csr", "-subj", "/CN=" +
             ("localhost" if leaf == "server" else "harrier test client"))
        ossl("x509", "-req", "-in", leaf + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
             "-CAcreateserial", "-out", leaf + ".crt", "-days", "2", "-extfile", leaf + ".ext")


def tls(name):
    return os.path.join(TLS_DIR, name)


# ---- curl --------------------------------------------------------------------------------

def curl(mode, method, path, body=None, headers=(), port=None, extra=()):
    """(status, http_version, body bytes) of one request. mode: http1 | h2c | upgrade | h2 |
    https1."""
    if mode in ("h2", "https1"):
        url = "https://localhost:%d%s" % (port or SERVER.https_port, path)
    else:
        url = "http://127.0.0.1:%d%s" % (port or SERVER.port, path)
    flag = {"http1": "--http1.1", "h2c": "--http2-prior-knowledge", "upgrade": "--http2",
            "h2": "--http2", "https1": "--http1.1"}[mode]
    out = os.path.join(ARGS.work_dir, "curl.out")
    cmd = [CURL, "-s", "-S", flag, "-o", out, "-w", "%{http_code} %{http_version}",
           "--max-time", "60"]
    # HEAD: curl's --head (with -X HEAD it waits for a body); the headers it writes carry a
    # Date, so only the status is compared.
    cmd += ["--head"] if method == "HEAD" else ["-X", method]
    if mode in ("h2", "https1"):
        cmd += ["--cacert", tls("ca.crt"), "--resolve", "localhost:%d:127.0.0.1" %
                (port or SERVER.https_port)]
    for h in headers:
        cmd += ["-H", h]
    if body is not None:
        path_in = os.path.join(ARGS.work_dir, "curl.in")
        with open(path_in, "wb") as f:
            f.write(body)
        cmd += ["--data-binary", "@" + path_in]
    cmd += list(extra) + [url]
    r = run(cmd, timeout=120)
    if r.returncode != 0:
        return None, None, r.stderr
    code, version = r.stdout.decode().split()
    if method == "HEAD":
        return int(code), version, b""
    with open(out, "rb") as f:
        return int(code), version, f.read()


SIMPLE_JSON = json.dumps({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [3] * 16}]}).encode()


def simple_binary():
    """The binary-extension form of SIMPLE_JSON: (body, Inference-Header-Content-Length)."""
    head = json.dumps({"inputs": [
        {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}},
        {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32",
         "parameters": {"binary_data_size": 64}}],
        "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}).encode()
    data = struct.pack("<16i", *range(16)) + struct.pack("<16i", *([3] * 16))
    return head + data, len(head)


def request_suite():
    """(name, method, path, body, headers): every REST endpoint, good and bad."""
    binary, header_len = simple_binary()
    return [
        ("live", "GET", "/v2/health/live", None, ()),
        ("ready", "GET", "/v2/health/ready", None, ()),
        ("metadata", "GET", "/v2", None, ()),
        ("model metadata", "GET", "/v2/models/simple", None, ()),
        ("model version metadata", "GET", "/v2/models/simple/versions/1", None, ()),
        ("model ready", "GET", "/v2/models/simple/ready", None, ()),
        ("model config", "GET", "/v2/models/simple/config", None, ()),
        ("unknown model", "GET", "/v2/models/nope", None, ()),
        ("unknown path", "GET", "/v3/nothing", None, ()),
        ("repository index", "POST", "/v2/repository/index", b"{}", ("Content-Type: application/json",)),
        ("infer json", "POST", "/v2/models/simple/infer", SIMPLE_JSON, ("Content-Type: application/json",)),
        ("infer binary", "POST", "/v2/models/simple/infer", binary,
         ("Content-Type: application/octet-stream", "Inference-Header-Content-Length: %d" % header_len)),
        ("infer bad json", "POST", "/v2/models/simple/infer", b"{not json", ()),
        ("infer wrong shape", "POST", "/v2/models/simple/infer",
         SIMPLE_JSON.replace(b"[1, 16]", b"[1, 15]", 1), ()),
        ("infer unknown model", "POST", "/v2/models/nope/infer", SIMPLE_JSON, ()),
        ("method not allowed", "DELETE", "/v2/health/live", None, ()),
        ("head", "HEAD", "/v2/health/ready", None, ()),
    ]


# ---- A minimal HTTP/2 client on a raw socket (frames written by hand) --------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream & 0x7fffffff) + payload


def hpack_int(value, prefix_bits, first_byte=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte | value])
    out = [first_byte | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7f) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def hpack(headers):
    """Literal fields without indexing, no Huffman: any decoder reads them."""
    out = b""
    for name, value in headers:
        n, v = name.encode(), value.encode()
        out += b"\x00" + hpack_int(len(n), 7) + n + hpack_int(len(v), 7) + v
    return out


def request_headers(method, path, extra=()):
    return [(":method", method), (":scheme", "http"), (":path", path),
            (":authority", "harrier")] + list(extra)


class RawH2:
    """Preface + SETTINGS, then frames in and out; replies to SETTINGS and PING."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def read_frame(self):
        while len(self.buf) < 9:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        length = struct.unpack(">I", b"\x00" + self.buf[:3])[0]
        while len(self.buf) < 9 + length:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        ftype, flags = self.buf[3], self.buf[4]
        stream = struct.unpack(">I", self.buf[5:9])[0] & 0x7fffffff
        payload = self.buf[9:9 + length]
        self.buf = self.buf[9 + length:]
        if ftype == SETTINGS and not flags & ACK:
            self.sock.sendall(frame(SETTINGS, ACK, 0))
        if ftype == PING and not flags & ACK:
            self.sock.sendall(frame(PING, ACK, 0, payload))
        return ftype, flags, stream, payload

    def response(self, stream, timeout=10):
        """(saw_headers, body, rst_code or None, goaway) for `stream`, until END_STREAM or
        RST_STREAM (or a GOAWAY / close)."""
        self.sock.settimeout(timeout)
        saw_headers, body, rst = False, b"", None
        while True:
            try:
                f = self.read_frame()
            except (socket.timeout, ConnectionResetError):
                return saw_headers, body, rst, True
            if f is None:
                return saw_headers, body, rst, True
            ftype, flags, sid, payload = f
            if ftype == GOAWAY:
                return saw_headers, body, rst, True
            if sid != stream:
                continue
            if ftype == HEADERS:
                saw_headers = True
            elif ftype == DATA:
                body += payload
                if payload:  # give the window back so large answers flow
                    self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", len(payload))) +
                              frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", len(payload))))
            elif ftype == RST_STREAM:
                return saw_headers, body, struct.unpack(">I", payload)[0], False
            if flags & END_STREAM:
                return saw_headers, body, rst, False

    def close(self):
        self.sock.close()


# ---- Tests -------------------------------------------------------------------------------

class SameSuiteTests(unittest.TestCase):
    def test_every_endpoint_answers_identically_over_every_transport(self):
        modes = ("http1", "h2c", "upgrade", "h2", "https1")
        want_version = {"http1": "1.1", "h2c": "2", "upgrade": "2", "h2": "2", "https1": "1.1"}
        for name, method, path, body, headers in request_suite():
            results = {}
            for mode in modes:
                if mode == "upgrade" and body is not None:
                    continue  # curl only upgrades requests without a body
                status, version, data = curl(mode, method, path, body, headers)
                self.assertIsNotNone(status, "%s over %s: curl failed: %s" % (name, mode, data))
                self.assertEqual(version, want_version[mode], "%s over %s" % (name, mode))
                results[mode] = (status, data)
            base = results["http1"]
            for mode, got in results.items():
                self.assertEqual(got, base, "%s: %s differs from HTTP/1.1" % (name, mode))

    def test_infer_answer_is_right_over_h2(self):
        for mode in ("h2c", "h2"):
            status, _, data = curl(mode, "POST", "/v2/models/simple/infer", SIMPLE_JSON)
            self.assertEqual(status, 200)
            out = {o["name"]: o["data"] for o in json.loads(data)["outputs"]}
            self.assertEqual(out["OUTPUT0"], [i + 3 for i in range(16)])
            self.assertEqual(out["OUTPUT1"], [i - 3 for i in range(16)])


class ClientToolTests(unittest.TestCase):
    def test_nghttp_h2c(self):
        r = run(["nghttp", "-n", "-s", "http://127.0.0.1:%d/v2/health/ready" % SERVER.port])
        self.assertEqual(r.returncode, 0, r.stderr)
        path = os.path.join(ARGS.work_dir, "nghttp.json")
        with open(path, "wb") as f:
            f.write(SIMPLE_JSON)
        r = run(["nghttp", "-d", path, "http://127.0.0.1:%d/v2/models/simple/infer" % SERVER.port])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b'"OUTPUT0"', r.stdout)

    def test_nghttp_upgrade(self):
        r = run(["nghttp", "-u", "-n", "-s", "http://127.0.0.1:%d/v2/health/ready" % SERVER.port])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_h2load_short_load(self):
        path = os.path.join(ARGS.work_dir, "h2load.json")
        with open(path, "wb") as f:
            f.write(SIMPLE_JSON)
        for url in ("http://127.0.0.1:%d/v2/models/simple/infer" % SERVER.port,
                    "https://127.0.0.1:%d/v2/models/simple/infer" % SERVER.https_port):
            r = run(["h2load", "-n", "400", "-c", "4", "-m", "10", "-d", path, url], timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            # Every stream answered, none with an error, a timeout or a 5xx. Overload protection
            # may answer some of 40 concurrent streams 429 when the machine is busy (CI runs the
            # suites in parallel; a sanitizer makes a request several times slower): the 4xx
            # h2load counts are those, and most requests still succeed.
            self.assertIn(b"400 done", r.stdout, r.stdout)
            self.assertIn(b"0 errored, 0 timeout", r.stdout, r.stdout)
            codes = re.search(rb"status codes: (\d+) 2xx, 0 3xx, (\d+) 4xx, 0 5xx", r.stdout)
            self.assertIsNotNone(codes, r.stdout)
            self.assertEqual(int(codes.group(1)) + int(codes.group(2)), 400, r.stdout)
            if not harness.SANITIZER:
                self.assertGreaterEqual(int(codes.group(1)), 200, r.stdout)


class TlsTests(unittest.TestCase):
    def s_client(self, *args, stdin=b"", port=None):
        cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % (port or SERVER.https_port),
               "-servername", "localhost", "-CAfile", tls("ca.crt")] + list(args)
        return run(cmd, timeout=30, input_bytes=stdin)

    def test_tls_1_1_is_refused(self):
        # SECLEVEL=0 so that the client really offers TLS 1.1: the refusal is the server's
        # (alert 70, protocol_version), not the local OpenSSL policy's.
        r = self.s_client("-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(b"alert protocol version", r.stderr)

    def test_tls_1_2_and_1_3_are_accepted_with_alpn_h2(self):
        for version, name in (("-tls1_2", b"TLSv1.2"), ("-tls1_3", b"TLSv1.3")):
            r = self.s_client(version, "-alpn", "h2,http/1.1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"Protocol  : " + name if version == "-tls1_2" else name, r.stdout)
            self.assertIn(b"ALPN protocol: h2", r.stdout)
            self.assertIn(b"Verify return code: 0 (ok)", r.stdout)
        r = self.s_client("-alpn", "http/1.1")
        self.assertIn(b"ALPN protocol: http/1.1", r.stdout)

    def test_alpn_with_no_protocol_in_common_is_refused_with_an_alert(self):
        # RFC 7301 §3.2 (probe 36): an offer of only protocols the port does not speak ends in
        # alert 120, no_application_protocol, on the HTTPS port and, for http/1.1, on the gRPC
        # port, which speaks h2 alone.
        r = self.s_client("-alpn", "spdy/3.1")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(b"no application protocol", r.stderr)
        r = self.s_client("-alpn", "http/1.1", port=SERVER.grpc_port)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn(b"no application protocol", r.stderr)
        r = self.s_client("-alpn", "http/1.1,h2", port=SERVER.grpc_port)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"ALPN protocol: h2", r.stdout)

    def tls_counters(self):
        r = run([CURL, "-s", "http://127.0.0.1:%d/metrics" % SERVER.metrics_port])
        self.assertEqual(r.returncode, 0, r.stderr)
        counts = {}
        for line in r.stdout.decode().splitlines():
            m = re.match(r"(harrier_tls_\w+)\{(.*)\} (\d+)$", line)
            if m:
                counts[(m.group(1), m.group(2))] = int(m.group(3))
        return counts

    def test_handshakes_are_counted_per_port_by_version_and_failure(self):
        before = self.tls_counters()
        self.assertEqual(self.s_client("-tls1_2", "-alpn", "h2").returncode, 0)
        self.assertNotEqual(self.s_client("-alpn", "spdy/3.1").returncode, 0)
        self.assertNotEqual(self.s_client("-alpn", "http/1.1", port=SERVER.grpc_port).returncode, 0)
        after = self.tls_counters()
        delta = {k: v - before.get(k, 0) for k, v in after.items()}
        self.assertEqual(delta[("harrier_tls_handshakes_total", 'port="http",version="TLSv1.2"')], 1)
        self.assertEqual(delta[("harrier_tls_handshake_failures_total",
                                'port="http",reason="error"')], 1)
        self.assertEqual(delta[("harrier_tls_handshake_failures_total",
                                'port="grpc",reason="error"')], 1)
        self.assertEqual(delta[("harrier_tls_handshakes_total", 'port="grpc",version="TLSv1.3"')], 0)
        # The metrics port is plain here: no series of its own.
        self.assertFalse([k for k in after if 'port="metrics"' in k[1]], after)

    def test_session_resumption_with_tickets(self):
        for version in ("-tls1_2", "-tls1_3"):
            sess = os.path.join(ARGS.work_dir, "session%s.pem" % version)
            # TLS 1.3 tickets come after the handshake: send a request so s_client reads them.
            req = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            r = self.s_client(version, "-alpn", "http/1.1", "-sess_out", sess, "-ign_eof",
                              stdin=req)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"HTTP/1.1 200", r.stdout)
            r = self.s_client(version, "-alpn", "http/1.1", "-sess_in", sess, "-ign_eof", stdin=req)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(b"Reused, ", r.stdout, version)

    def test_metrics_tls_serves_the_metrics_port_over_tls_only(self):
        # MTLS runs with --metrics-tls on (and a client CA); SERVER keeps the plain default.
        port = MTLS.metrics_port
        url = "https://localhost:%d/metrics" % port
        base = [CURL, "-s", "-S", "--cacert", tls("ca.crt"), "--resolve",
                "localhost:%d:127.0.0.1" % port, "-o", "-", "-w", "\n%{http_code}"]
        r = run(base + ["--cert", tls("client.crt"), "--key", tls("client.key"), url])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.endswith(b"\n200"), r.stdout[-200:])
        self.assertIn(b"# TYPE harrier_http_connections gauge", r.stdout)
        self.assertIn(b"listening on metrics 0.0.0.0:%d (GET /metrics, TLS)" % port,
                      open(MTLS.log_path, "rb").read())
        r = run(base + ["--tls-max", "1.2", url])  # no client certificate
        self.assertEqual(r.returncode, 35, r.stdout)
        r = run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                 "http://127.0.0.1:%d/metrics" % port])  # plain HTTP: not served
        self.assertNotEqual(r.stdout, b"200")
        r = run([CURL, "-s", "-o", "/dev/null", "-w", "%{http_code}",
                 "http://127.0.0.1:%d/metrics" % SERVER.metrics_port])
        self.assertEqual(r.stdout, b"200")

    def test_client_certificate_required(self):
        url = "https://localhost:%d/v2/health/ready" % MTLS.https_port
        base = [CURL, "-s", "-S", "--http2", "--cacert", tls("ca.crt"), "--resolve",
                "localhost:%d:127.0.0.1" % MTLS.https_port, "-o", "/dev/null", "-w", "%{http_code}"]
        client = ["--cert", tls("client.crt"), "--key", tls("client.key")]
        other_ca = ["--cert", tls("server.crt"), "--key", tls("server.key")]
        r = run(base + client + [url])
        self.assertEqual((r.returncode, r.stdout), (0, b"200"), r.stderr)
        # TLS 1.2: the refusal is inside the handshake, so curl's error is deterministic: 35
        # (CURLE_SSL_CONNECT_ERROR) with the server's alert. Without a certificate the server
        # sends handshake_failure (40); with one from another CA, unknown_ca (48).
        r = run(base + ["--tls-max", "1.2", url])
        self.assertEqual((r.returncode, r.stdout), (35, b"000"), r.stderr)
        self.assertIn(b"alert handshake failure", r.stderr)
        r = run(base + ["--tls-max", "1.2"] + other_ca + [url])
        self.assertEqual((r.returncode, r.stdout), (35, b"000"), r.stderr)
        self.assertIn(b"alert unknown ca", r.stderr)
        r = self.s_client("-tls1_2", port=MTLS.https_port)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(b"SSL alert number 40", r.stderr)
        r = self.s_client("-tls1_2", *client, port=MTLS.https_port)
        self.assertEqual(r.returncode, 0, r.stderr)
        # TLS 1.3: the client's side of the handshake ends before the server has checked the
        # certificate, and the alert comes on the first read (curl's exit status then depends
        # on a race: 55 or 56); read it here: certificate_required (116) and unknown_ca (48).
        self.assertEqual(mtls_tls13_first_read(None), "TLSV13_ALERT_CERTIFICATE_REQUIRED")
        self.assertEqual(mtls_tls13_first_read("server"), "TLSV1_ALERT_UNKNOWN_CA")
        self.assertTrue(mtls_tls13_first_read("client").startswith("HTTP/1.1 200"))

    def test_plain_http_off_has_no_plain_port(self):
        text = open(MTLS.log_path, "rb").read().decode("utf-8", "replace")
        self.assertNotIn("listening on HTTP ", text)
        # The --http-port it was given is closed; TLS on the HTTPS port answers.
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", MTLS.closed_port), timeout=10).close()
        self.assertTrue(mtls_tls13_first_read("client").startswith("HTTP/1.1 200"))


def mtls_tls13_first_read(cert):
    """A TLS 1.3 connection to MTLS with the client certificate `cert` ("client", "server" or
    None): the reason of the TLS alert the first read raises, or the start of the answer to a
    GET /v2/health/ready (sent only with a certificate, so that no write meets a closed
    socket and turns the alert into a reset)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(tls("ca.crt"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if cert:
        ctx.load_cert_chain(tls(cert + ".crt"), tls(cert + ".key"))
    with socket.create_connection(("127.0.0.1", MTLS.https_port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            try:
                if cert == "client":
                    s.sendall(b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\n"
                              b"Connection: close\r\n\r\n")
                return s.recv(4096).decode("latin-1")
            except ssl.SSLError as e:
                return e.reason


class BadInputTests(unittest.TestCase):
    def assert_still_serves(self):
        status, version, _ = curl("h2c", "GET", "/v2/health/ready")
        self.assertEqual((status, version), (200, "2"))
        c = RawH2(SERVER.port)
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack(request_headers("GET", "/v2/health/live"))))
        saw, _, rst, gone = c.response(1)
        c.close()
        self.assertTrue(saw and rst is None and not gone)

    def test_garbage_after_the_preface(self):
        c = RawH2(SERVER.port)
        c.send(b"\xff" * 64 + b"this is not a frame" * 10)
        _, _, _, gone = c.response(1, timeout=5)
        self.assertTrue(gone)
        c.close()
        self.assert_still_serves()

    def test_bad_preface(self):
        # Bytes that leave the preface at its 17th: not HTTP/2, so an HTTP/1.x request line
        # "PRI * HTTP/2.0" that the server refuses: a 505 (a version it does not speak on an
        # HTTP/1.1 connection) that says why, then it closes (after reading what was sent: a
        # clean EOF, not a reset).
        with socket.create_connection(("127.0.0.1", SERVER.port), timeout=5) as s:
            s.sendall(PREFACE[:16] + b"XX\r\n\r\n" + b"\x00" * 40)
            data = b""
            while True:
                chunk = s.recv(65536)  # a reset or a timeout fails the test
                if not chunk:
                    break
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 505 HTTP Version Not Supported\r\n"), data)
        self.assertIn(b"\r\nConnection: close", head)
        self.assertIn("only HTTP/1.0 and HTTP/1.1 are spoken", json.loads(body)["error"])
        self.assert_still_serves()

    def test_claimed_body_over_the_limit_gets_413(self):
        c = RawH2(SERVER.port)
        c.send(frame(HEADERS, END_HEADERS, 1, hpack(request_headers(
            "POST", "/v2/models/simple/infer", [("content-length", str(300 << 20))]))))
        c.send(frame(DATA, 0, 1, b"x" * 1000))
        saw, body, rst, gone = c.response(1)
        self.assertTrue(saw)
        self.assertIn(b"exceeds the maximum allowed value", body)
        self.assertFalse(gone)
        # The connection goes on: another stream.
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 3, hpack(request_headers("GET", "/v2/health/ready"))))
        saw, _, rst, gone = c.response(3)
        self.assertTrue(saw and rst is None and not gone)
        c.close()
        self.assert_still_serves()

    def test_header_list_over_the_limit_gets_431(self):
        c = RawH2(SERVER.port)
        block = hpack(request_headers("GET", "/v2/health/ready",
                                      [("x-big-%d" % i, "v" * 8000) for i in range(12)]))
        pieces = [block[i:i + 16000] for i in range(0, len(block), 16000)]
        out = frame(HEADERS, END_STREAM | (END_HEADERS if len(pieces) == 1 else 0), 1, pieces[0])
        for i, p in enumerate(pieces[1:], 1):
            out += frame(CONTINUATION, END_HEADERS if i == len(pieces) - 1 else 0, 1, p)
        c.send(out)
        saw, body, rst, gone = c.response(1)
        self.assertTrue(saw, (body, rst, gone))
        self.assertIn(b"header list is larger", body)
        c.close()
        self.assert_still_serves()

    def test_stream_reset_in_the_middle_of_its_body(self):
        c = RawH2(SERVER.port)
        c.send(frame(HEADERS, END_HEADERS, 1, hpack(request_headers(
            "POST", "/v2/models/simple/infer", [("content-length", str(len(SIMPLE_JSON)))]))))
        c.send(frame(DATA, 0, 1, SIMPLE_JSON[:40]))
        c.send(frame(RST_STREAM, 0, 1, struct.pack(">I", 8)))  # CANCEL
        # The same connection serves the next stream, and the whole request on another.
        c.send(frame(HEADERS, END_HEADERS, 3, hpack(request_headers(
            "POST", "/v2/models/simple/infer", [("content-length", str(len(SIMPLE_JSON)))]))))
        c.send(frame(DATA, END_STREAM, 3, SIMPLE_JSON))
        saw, body, rst, gone = c.response(3)
        self.assertTrue(saw and rst is None and not gone, (body, rst))
        self.assertIn(b'"OUTPUT0"', body)
        c.close()
        self.assert_still_serves()

    def test_connection_dropped_mid_body(self):
        c = RawH2(SERVER.port)
        c.send(frame(HEADERS, END_HEADERS, 1, hpack(request_headers(
            "POST", "/v2/models/simple/infer", [("content-length", "100000")]))))
        c.send(frame(DATA, 0, 1, b"{" * 5000))
        c.close()
        self.assert_still_serves()

    def test_100_mb_body_through_h2c(self):
        # The whole body is received (flow control keeps it moving) and then judged by the
        # handler: not a valid request for `simple`, so a 400 from the codec, not a 413.
        body = b"[" + b"0," * (50 << 20) + b"0]"
        self.assertGreater(len(body), 100 << 20)
        start = time.monotonic()
        status, version, data = curl("h2c", "POST", "/v2/models/simple/infer", body,
                                     ("Content-Type: application/json",))
        self.assertEqual(version, "2")
        self.assertEqual(status, 400, data[:300])
        self.assertIn(b"error", data)
        sys.stderr.write("[100 MB over h2c: %.2f s] " % (time.monotonic() - start))
        self.assert_still_serves()

    def test_unknown_frame_types_and_pings_are_fine(self):
        c = RawH2(SERVER.port)
        c.send(frame(0xEE, 0, 0, b"ignored") + frame(PING, 0, 0, b"12345678"))
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack(request_headers("GET", "/v2/health/ready"))))
        saw, _, rst, gone = c.response(1)
        self.assertTrue(saw and rst is None and not gone)
        c.close()


def server_settings(port, tls_port=None):
    """The server's first SETTINGS as {id: value} and the increment of its first WINDOW_UPDATE
    on stream 0 (None if none came within 2 s), over h2c or, with `tls_port`, h2."""
    if tls_port is None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    else:
        sock = tls_socket(tls_port, "h2")
    sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
    sock.settimeout(2)
    buf, settings, window = b"", None, None
    while settings is None or window is None:
        while len(buf) < 9 or len(buf) < 9 + struct.unpack(">I", b"\x00" + buf[:3])[0]:
            try:
                chunk = sock.recv(65536)
            except (socket.timeout, ssl.SSLError, OSError):
                chunk = b""
            if not chunk:
                sock.close()
                return settings, window
            buf += chunk
        length = struct.unpack(">I", b"\x00" + buf[:3])[0]
        ftype, flags, stream = buf[3], buf[4], struct.unpack(">I", buf[5:9])[0] & 0x7fffffff
        payload, buf = buf[9:9 + length], buf[9 + length:]
        if ftype == SETTINGS and not flags & ACK:
            settings = {struct.unpack(">H", payload[i:i + 2])[0]:
                        struct.unpack(">I", payload[i + 2:i + 6])[0]
                        for i in range(0, len(payload), 6)}
        elif ftype == WINDOW_UPDATE and stream == 0 and window is None:
            window = struct.unpack(">I", payload)[0] & 0x7fffffff
    sock.close()
    return settings, window


def tls_socket(port, alpn):
    """A TLS client socket whose recv() tells a clean close (close_notify: b"") from a bare TCP
    close (ssl.SSLEOFError), since suppress_ragged_eofs is off."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols([alpn])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname="localhost", suppress_ragged_eofs=False)


def frame_types(buf):
    """The types of the whole frames in `buf`, in order."""
    types = []
    while len(buf) >= 9:
        length = struct.unpack(">I", b"\x00" + buf[:3])[0]
        types.append(buf[3])
        buf = buf[9 + length:]
    return types


def read_to_close(sock):
    """(bytes received, how the server ended: "close_notify" | "bare EOF" | "timeout")."""
    got = b""
    try:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return got, "close_notify"
            got += chunk
    except ssl.SSLEOFError:
        return got, "bare EOF"
    except (ConnectionResetError, ssl.SSLError):
        return got, "bare EOF"
    except socket.timeout:
        return got, "timeout"
    finally:
        sock.close()


class TransportFlagTests(unittest.TestCase):
    def test_h2c_upgrade_is_off_by_default(self):
        # Without --http2-upgrade on, Upgrade: h2c is served as HTTP/1.1: behind a proxy that
        # forwards Upgrade, a 101 would open a tunnel past the proxy's rules (probe 57).
        p = HarrierProcess("harrier-h2-no-upgrade", [])
        try:
            p.wait_listening(want_https=False)
            status, version, body = curl("upgrade", "GET", "/v2/health/ready", port=p.port)
            self.assertEqual((status, version), (200, "1.1"), body)
            r = run(["nghttp", "-u", "-v", "-n", "http://127.0.0.1:%d/v2/health/ready" % p.port])
            self.assertIn(b"HTTP Upgrade failed", r.stdout + r.stderr)
            # Prior knowledge is still HTTP/2.
            status, version, _ = curl("h2c", "GET", "/v2/health/ready", port=p.port)
            self.assertEqual((status, version), (200, "2"))
        finally:
            p.terminate()

    def test_default_settings_are_advertised(self):
        settings, window = server_settings(SERVER.port)
        self.assertEqual(settings.get(0x4), 1 << 20)   # INITIAL_WINDOW_SIZE
        self.assertEqual(settings.get(0x5), 64 << 10)  # MAX_FRAME_SIZE
        self.assertEqual(window, (16 << 20) - 65535)   # connection window 16 MiB

    def test_non_default_windows_frame_size_and_ticket_period(self):
        p = HarrierProcess("harrier-h2-flags", [
            "--http2-initial-window-bytes", "262144", "--http2-connection-window-bytes", "4194304",
            "--http2-max-frame-bytes", "32768", "--tls-ticket-rotation-s", "1",
            "--tls-cert", tls("server.crt"), "--tls-key", tls("server.key"), "--https-port", "0"])
        try:
            p.wait_listening(want_https=True)
            for tls_port in (None, p.https_port):
                settings, window = server_settings(p.port, tls_port)
                self.assertEqual(settings.get(0x4), 262144, tls_port)
                self.assertEqual(settings.get(0x5), 32768, tls_port)
                self.assertEqual(window, 4194304 - 65535, tls_port)
            # A body larger than both windows still flows (WINDOW_UPDATEs as it is consumed).
            status, version, _ = curl("h2c", "POST", "/v2/models/simple/infer",
                                      SIMPLE_JSON + b" " * (6 << 20), port=p.port)
            self.assertEqual((status, version), (200, "2"))
            # Ticket keys last one second: a ticket still resumes at once, not three periods on.
            sess = os.path.join(ARGS.work_dir, "session-rotation.pem")
            req = b"GET /v2/health/live HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            base = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % p.https_port,
                    "-servername", "localhost", "-tls1_2", "-alpn", "http/1.1", "-ign_eof"]
            r = run(base + ["-sess_out", sess], timeout=30, input_bytes=req)
            self.assertEqual(r.returncode, 0, r.stderr)
            r = run(base + ["-sess_in", sess], timeout=30, input_bytes=req)
            self.assertIn(b"Reused, ", r.stdout)
            time.sleep(3.2)
            r = run(base + ["-sess_in", sess], timeout=30, input_bytes=req)
            self.assertIn(b"New, ", r.stdout)
        finally:
            self.assertEqual(p.terminate(), 0)

    def test_out_of_range_values_exit_1_with_a_clear_message(self):
        cases = [("--http2-initial-window-bytes", "0"),
                 ("--http2-initial-window-bytes", "2147483648"),
                 ("--http2-connection-window-bytes", "65534"),
                 ("--http2-max-frame-bytes", "16383"),
                 ("--http2-max-frame-bytes", "16777216"),
                 ("--tls-ticket-rotation-s", "0"),
                 ("--tls-ticket-rotation-s", "-5")]
        for flag, value in cases:
            r = run([ARGS.harrier, "serve", "--model-repository",
                     os.path.join(ARGS.work_dir, "repo-h2"), "--http-port", "0", flag, value],
                    timeout=30)
            self.assertEqual(r.returncode, 1, (flag, value, r.stderr))
            self.assertIn(flag.encode() + b" must be in", r.stderr, (flag, value))


class TimeoutTests(unittest.TestCase):
    """A server with 1 s header and body timeouts, h2c and TLS."""

    @classmethod
    def setUpClass(cls):
        cls.server = HarrierProcess("harrier-h2-timeouts", [
            "--http-header-timeout-secs", "1", "--http-body-timeout-secs", "1",
            "--tls-cert", tls("server.crt"), "--tls-key", tls("server.key"), "--https-port", "0"])
        cls.server.wait_listening(want_https=True)

    def test_tls_header_timeout_answers_408_then_close_notify(self):
        s = tls_socket(self.server.https_port, "http/1.1")
        s.sendall(b"GET /v2/health/live HTTP/1.1\r\nHo")
        got, end = read_to_close(s)
        self.assertTrue(got.startswith(b"HTTP/1.1 408"), got)
        self.assertEqual(end, "close_notify")

    def test_tls_silent_connection_ends_with_close_notify(self):
        for alpn in ("http/1.1", "h2"):
            s = tls_socket(self.server.https_port, alpn)
            if alpn == "h2":
                s.sendall(PREFACE + frame(SETTINGS, 0, 0))  # then silence: GOAWAY, close_notify
            got, end = read_to_close(s)
            self.assertEqual(end, "close_notify", alpn)

    def test_tls_malformed_request_and_h2_protocol_error_end_with_close_notify(self):
        s = tls_socket(self.server.https_port, "http/1.1")
        s.sendall(b"NOT HTTP\r\n\r\n")
        got, end = read_to_close(s)
        self.assertTrue(got.startswith(b"HTTP/1.1 400"), got)
        self.assertEqual(end, "close_notify")
        s = tls_socket(self.server.https_port, "h2")
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) + b"\xff" * 64 + b"not a frame" * 10)
        got, end = read_to_close(s)
        self.assertIn(GOAWAY, frame_types(got))
        self.assertEqual(end, "close_notify")

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.terminate()
        if rc != 0:  # an error of the class in unittest's report
            raise AssertionError("harrier-h2-timeouts exited with %s on SIGTERM (expected 0):\n%s"
                                 % (rc, cls.server.log_tail()))

    def test_preface_then_silence_is_cut_off_by_the_header_timeout(self):
        c = RawH2(self.server.port)
        start = time.monotonic()
        _, _, _, gone = c.response(1, timeout=20)  # GOAWAY or close, not the 60 s idle timeout
        elapsed = time.monotonic() - start
        c.close()
        self.assertTrue(gone)
        self.assertLess(elapsed, 5, "cut off after %.1f s" % elapsed)

    def test_an_unfinished_header_block_is_cut_off_by_the_header_timeout(self):
        c = RawH2(self.server.port)
        block = hpack(request_headers("GET", "/v2/health/ready"))
        c.send(frame(HEADERS, END_STREAM, 1, block[:10]))  # no END_HEADERS, no CONTINUATION
        start = time.monotonic()
        _, _, _, gone = c.response(1, timeout=20)
        elapsed = time.monotonic() - start
        c.close()
        self.assertTrue(gone)
        self.assertLess(elapsed, 5, "cut off after %.1f s" % elapsed)

    def test_a_stalled_body_gets_408_and_the_connection_goes_on(self):
        c = RawH2(self.server.port)
        c.send(frame(HEADERS, END_HEADERS, 1, hpack(request_headers(
            "POST", "/v2/models/simple/infer", [("content-length", str(len(SIMPLE_JSON)))]))))
        c.send(frame(DATA, 0, 1, SIMPLE_JSON[:40]))  # and then nothing more on stream 1
        time.sleep(0.5)
        # Another stream on the same connection keeps working while stream 1 stalls.
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 3, hpack(request_headers("GET", "/v2/health/ready"))))
        saw, _, rst, gone = c.response(3)
        self.assertTrue(saw and rst is None and not gone)
        start = time.monotonic()
        saw, body, rst, gone = c.response(1, timeout=10)
        self.assertTrue(saw and not gone, (body, rst, gone))
        self.assertIn(b"stalled", body)
        self.assertLess(time.monotonic() - start, 5)
        c.send(frame(HEADERS, END_HEADERS | END_STREAM, 5, hpack(request_headers("GET", "/v2/health/live"))))
        saw, _, rst, gone = c.response(5)
        self.assertTrue(saw and rst is None and not gone)
        c.close()


class ShutdownTests(unittest.TestCase):
    def test_sigterm_sends_goaway_and_finishes(self):
        p = HarrierProcess("h2-shutdown")
        try:
            p.wait_listening(want_https=False)
            c = RawH2(p.port)
            c.send(frame(HEADERS, END_HEADERS, 1, hpack(request_headers(
                "POST", "/v2/models/simple/infer", [("content-length", str(len(SIMPLE_JSON)))]))))
            c.send(frame(DATA, 0, 1, SIMPLE_JSON[:50]))
            time.sleep(0.3)
            p.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            self.assertIsNone(p.proc.poll(), "exited with a stream in flight")
            c.send(frame(DATA, END_STREAM, 1, SIMPLE_JSON[50:]))
            c.sock.settimeout(10)
            saw_goaway, body = False, b""
            while True:
                f = c.read_frame()
                if f is None:
                    break
                if f[0] == GOAWAY:
                    saw_goaway = True
                    last = struct.unpack(">I", f[3][:4])[0] & 0x7fffffff
                    self.assertEqual(last, 1)
                if f[0] == DATA and f[2] == 1:
                    body += f[3]
            self.assertTrue(saw_goaway)
            self.assertIn(b'"OUTPUT0"', body)
            c.close()
            self.assertEqual(p.proc.wait(timeout=60), 0, p.log_tail())
        finally:
            p.terminate()


def main():
    global ARGS, SERVER, MTLS, TLS_DIR
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--harrier", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("-k", dest="pattern", action="append", default=None)
    p.add_argument("-v", "--verbose", action="store_true")
    ARGS = p.parse_args()
    ARGS.harrier = os.path.abspath(ARGS.harrier)
    ARGS.work_dir = os.path.abspath(ARGS.work_dir)
    os.makedirs(ARGS.work_dir, exist_ok=True)
    TLS_DIR = os.path.join(ARGS.work_dir, "tls")

    loader = unittest.TestLoader()
    if ARGS.pattern:
        loader.testNamePatterns = ["*%s*" % k for k in ARGS.pattern]
    suite = unittest.TestSuite()
    for case in (SameSuiteTests, ClientToolTests, TlsTests, BadInputTests, TimeoutTests,
                 ShutdownTests, TransportFlagTests):
        suite.addTests(loader.loadTestsFromTestCase(case))

    try:
        repo = os.path.join(ARGS.work_dir, "repo-h2")
        harness.generate_repository(ARGS.source_dir, repo,
                                    ("make_test_models.py", "make_example_models.py"))
        make_certificates(TLS_DIR)
        SERVER = HarrierProcess("harrier-h2", [
            "--tls-cert", tls("server.crt"), "--tls-key", tls("server.key"), "--https-port", "0",
            "--http2-upgrade", "on"])
        MTLS = HarrierProcess("harrier-mtls", [
            "--tls-cert", tls("server.crt"), "--tls-key", tls("server.key"), "--https-port", "0",
            "--tls-client-ca", tls("client-ca.crt"), "--plain-http", "off",
            "--metrics-tls", "on"], plain=False)
        SERVER.wait_listening(want_https=True)
        MTLS.wait_listening(want_https=True)
    except Exception as e:  # noqa: BLE001 - report any setup failure as a failed run
        print("setup failed: %s" % e)
        for s in (SERVER, MTLS):
            if s is not None:
                s.proc.kill()
        print("0 passed, %d failed" % suite.countTestCases())
        return 1

    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if ARGS.verbose else 1).run(suite)
    rc = SERVER.terminate()
    mtls_rc = MTLS.terminate()
    # A skip, or a -k that selects nothing, fails too (harness.summarize).
    passed, failed = harness.summarize(result, None)
    for server, code in ((SERVER, rc), (MTLS, mtls_rc)):
        if code != 0:
            print("%s exited with %s on SIGTERM (expected 0):\n%s"
                  % (server.log_path, code, server.log_tail()))
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
