#!/usr/bin/python3
"""API keys, scopes and Triton's restricted APIs against the real binary (docs/security.md).

usage: /usr/bin/python3 tests/integration/auth_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Starts two servers on ports they pick (0) over examples/models, each with --api-key-file: one
as a public set-up would run it (keys, /metrics open, the access log on), one with
--metrics-require-key and Triton's --http-restricted-api / --grpc-restricted-protocol. Checks
over REST (http.client) that a missing, wrong or malformed key is 401 with WWW-Authenticate, a
key without the route's scope 403, a good one 200 (Bearer and X-API-Key, KServe and OpenAI
routes), health open, a refusal answered before a 100-continue body is sent, a key's rate
limit 429; that the key id (never the key) is in the access log and the per-key metrics; that
a rewritten key file rotates the keys within seconds and a broken one keeps them; over gRPC
(hand-written HTTP/2 frames, tools/h2_attacks.py) UNAUTHENTICATED, PERMISSION_DENIED and OK;
and that a key file that does not parse stops the start with exit 1. Python stdlib only (and
Debian's python3-hpack, as grpc_wire_test.py). The last line is "N passed, N failed".
"""
import hashlib
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
PUBLIC = None  # keys, /metrics open, access log on
LOCKED = None  # keys, --metrics-require-key, Triton's restrictions

CI_KEY = "ci-6f1d2a0c9b8e4e35a7d3c2b1"
OPS_KEY = "ops-0d9c8b7a6f5e4d3c2b1a0f9e"
SLOW_KEY = "slow-2b3c4d5e6f708192a3b4c5d6"
ROTATED_KEY = "rotated-77e5d4c3b2a1908f7e6d"
STREAMER_KEY = "streamer-5a4b3c2d1e0f9a8b7c6d"
REVOKED_KEY = "revoked-0f1e2d3c4b5a69788796"
ADMIN_HEADER_VALUE = "s3cret-admin-value"


def sha(key):
    return hashlib.sha256(key.encode()).hexdigest()


def key_file(keys):
    return json.dumps({"keys": keys})


FIRST_KEYS = [
    {"id": "ci", "sha256": sha(CI_KEY), "scopes": ["inference", "metadata"]},
    {"id": "ops", "sha256": sha(OPS_KEY), "scopes": ["admin", "metadata", "metrics"]},
    {"id": "slow", "sha256": sha(SLOW_KEY), "scopes": ["metadata"], "rate_limit": "0.2:1"},
    {"id": "streamer", "sha256": sha(STREAMER_KEY), "scopes": ["inference"],
     "rate_limit": "0.1:2"},
    {"id": "revoked", "sha256": sha(REVOKED_KEY), "scopes": ["inference", "metadata"]},
]


def write_atomically(path, text):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def infer_body():
    return json.dumps({"inputs": [
        {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
        {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]})


def request(port, method, path, headers=None, body=None):
    """(status, headers as a dict of lower-cased names, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def bearer(key):
    return {"Authorization": "Bearer " + key}


class Servers:
    """Both servers, stopped together (harness.run_suite stops what start() returns)."""

    def __init__(self):
        self.servers = []
        self.log_path = None

    def terminate(self):
        rcs = [s.terminate() for s in self.servers]
        return next((rc for rc in rcs if rc != 0), 0)


def h2():
    import h2_attacks  # from SRC/tools (harness.parse_args puts it on sys.path)
    return h2_attacks


class InferStream:
    """One ModelStreamInfer call written frame by frame: requests to `simple` go out one at a
    time; the answers are read back as (answered, error text) pairs, and the call's status."""

    def __init__(self, port, key):
        h = h2()
        self.c = h.Conn(port)
        headers = h.call_headers("ModelStreamInfer", self.c.authority)
        headers.append(("authorization", "Bearer " + key))
        self.c.send(h.frame(h.HEADERS, h.END_HEADERS, 1, self.c.encoder.encode(headers)))

    def send(self, end=False):
        h = h2()
        self.c.send(h.frame(h.DATA, h.END_STREAM if end else 0, 1,
                            h.grpc_message(h.model_infer_request("simple"))))

    def answers(self):
        """[(answered with outputs, the message's bytes)] for the messages in so far."""
        with self.c.lock:
            data = self.c.data.get(1, b"")
        out, at = [], 0
        while at + 5 <= len(data):
            n = int.from_bytes(data[at + 1:at + 5], "big")
            body = data[at + 5:at + 5 + n]
            out.append((b"OUTPUT0" in body, body))
            at += 5 + n
        return out

    def wait(self, predicate, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline and not predicate():
            time.sleep(0.02)
        return predicate()

    def status(self):
        return self.c.grpc_status(1)

    def close(self):
        self.c.close()


class PublicSetUpTest(unittest.TestCase):
    """Keys on every route but health; /metrics open; the access log on."""

    def test_a_missing_key_is_401_with_a_challenge(self):
        status, headers, body = request(PUBLIC.port, "GET", "/v2/models/simple")
        self.assertEqual(status, 401, body)
        self.assertEqual(headers.get("www-authenticate"), 'Bearer realm="harrier"')
        self.assertIn("an API key is required", json.loads(body)["error"])
        self.assertIn("x-request-id", headers)

    def test_a_wrong_or_malformed_key_is_401(self):
        for h in (bearer("not-a-key"), {"X-API-Key": "not-a-key"},
                  {"Authorization": "Basic Y2k6cGFzcw=="}, {"Authorization": "Bearer " + "k" * 8000}):
            status, headers, _ = request(PUBLIC.port, "GET", "/v2/models/simple", h)
            self.assertEqual(status, 401, h)
            self.assertIn('error="invalid_token"', headers.get("www-authenticate", ""))

    def test_a_key_with_the_scope_is_let_through(self):
        status, _, body = request(PUBLIC.port, "GET", "/v2/models/simple", bearer(CI_KEY))
        self.assertEqual(status, 200, body)
        status, _, body = request(PUBLIC.port, "POST", "/v2/models/simple/infer",
                                  {"X-API-Key": CI_KEY, "Content-Type": "application/json"},
                                  infer_body())
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["outputs"][0]["data"], [i + 1 for i in range(16)])

    def test_a_key_without_the_scope_is_403(self):
        status, headers, body = request(PUBLIC.port, "POST", "/v2/repository/models/simple/load",
                                        bearer(CI_KEY))
        self.assertEqual(status, 403, body)
        self.assertNotIn("www-authenticate", headers)
        self.assertIn("'admin'", json.loads(body)["error"])
        status, _, body = request(PUBLIC.port, "POST", "/v2/models/simple/infer", bearer(OPS_KEY),
                                  infer_body())
        self.assertEqual(status, 403, body)
        status, _, body = request(PUBLIC.port, "POST", "/v2/logging", bearer(CI_KEY), "{}")
        self.assertEqual(status, 403, body)
        status, _, body = request(PUBLIC.port, "POST", "/v2/logging", bearer(OPS_KEY), "{}")
        self.assertEqual(status, 200, body)

    def test_the_openai_api_needs_a_key_too(self):
        status, _, body = request(PUBLIC.port, "GET", "/v1/models")
        self.assertEqual(status, 401)
        self.assertEqual(json.loads(body)["error"]["code"], "missing_key")  # OpenAI's error object
        status, _, body = request(PUBLIC.port, "GET", "/v1/models", bearer(CI_KEY))
        self.assertEqual(status, 200, body)
        status, _, _ = request(PUBLIC.port, "POST", "/v1/chat/completions", bearer(OPS_KEY), "{}")
        self.assertEqual(status, 403)

    def test_health_is_open(self):
        for path in ("/v2/health/live", "/v2/health/ready"):
            status, _, _ = request(PUBLIC.port, "GET", path)
            self.assertEqual(status, 200, path)

    def test_metrics_are_open_by_default(self):
        status, _, _ = request(PUBLIC.metrics_port, "GET", "/metrics")
        self.assertEqual(status, 200)

    def test_a_refusal_comes_before_the_body(self):
        """A 100 MB upload announced with Expect: 100-continue is refused at once: the server
        never asks for the body (no 100 Continue) and answers 401 from the head."""
        s = socket.create_connection(("127.0.0.1", PUBLIC.port), timeout=10)
        try:
            s.sendall(b"POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\nContent-Length: 104857600\r\n"
                      b"Expect: 100-continue\r\n\r\n")
            reply = b""
            while b"\r\n\r\n" not in reply:
                chunk = s.recv(4096)
                if not chunk:
                    break
                reply += chunk
        finally:
            s.close()
        self.assertTrue(reply.startswith(b"HTTP/1.1 401"), reply[:200])
        self.assertNotIn(b"100 Continue", reply)

    def test_a_keys_rate_limit_is_429_with_retry_after(self):
        statuses = []
        for _ in range(3):
            status, headers, _ = request(PUBLIC.port, "GET", "/v2/models/simple", bearer(SLOW_KEY))
            statuses.append(status)
            if status == 429:
                self.assertGreaterEqual(int(headers["retry-after"]), 1)
        self.assertEqual(statuses[0], 200)
        self.assertIn(429, statuses)

    def test_the_key_id_is_logged_and_counted_never_the_key(self):
        request(PUBLIC.port, "GET", "/v2/models/simple", bearer(CI_KEY))
        request(PUBLIC.port, "POST", "/v2/repository/models/simple/unload", bearer(CI_KEY))
        deadline = time.time() + 10
        while time.time() < deadline:
            text = PUBLIC.log_text()
            if re.search(r"access .*status=403 key=ci ", text):
                break
            time.sleep(0.1)
        text = PUBLIC.log_text()
        self.assertRegex(text, r"access .*target=/v2/models/simple status=200 key=ci ")
        self.assertRegex(text, r"access .*status=403 key=ci ")
        for key in (CI_KEY, OPS_KEY, SLOW_KEY):
            self.assertNotIn(key, text)
        _, _, body = request(PUBLIC.metrics_port, "GET", "/metrics")
        metrics = body.decode()
        self.assertRegex(metrics, r'harrier_auth_requests_total\{key="ci",outcome="allowed"\} [1-9]')
        self.assertRegex(metrics, r'harrier_auth_requests_total\{key="ci",outcome="forbidden"\} [1-9]')
        self.assertRegex(metrics, r'harrier_auth_refusals_total\{reason="missing_key"\} [1-9]')
        self.assertNotIn(CI_KEY, metrics)

    def test_grpc_unauthenticated_permission_denied_and_ok(self):
        port = PUBLIC.grpc_port
        infer = h2().model_infer_request("simple")
        self.assertEqual(h2().unary_call(port, "ServerLive")["status"], 0)  # open
        self.assertEqual(h2().unary_call(port, "ServerReady")["status"], 0)
        self.assertEqual(h2().unary_call(port, "ModelInfer", infer)["status"], 16)
        r = h2().unary_call(port, "ModelInfer", infer,
                            extra_headers=[("authorization", "Bearer wrong")])
        self.assertEqual(r["status"], 16, r)
        r = h2().unary_call(port, "ModelInfer", infer,
                            extra_headers=[("authorization", "Bearer " + CI_KEY)])
        self.assertEqual(r["status"], 0, r)
        r = h2().unary_call(port, "RepositoryModelUnload", b"",
                            extra_headers=[("authorization", "Bearer " + CI_KEY)])
        self.assertEqual(r["status"], 7, r)  # PERMISSION_DENIED

    def test_a_keys_rate_limit_holds_for_each_request_of_a_grpc_stream(self):
        # streamer: 2 requests at once, then one each 10 s. The stream's opening took the
        # first token (Precheck) for its first request; each later request takes its own, and
        # the ones past the limit are refused in-band while the stream goes on.
        s = InferStream(PUBLIC.grpc_port, STREAMER_KEY)
        try:
            for i in range(5):
                s.send(end=i == 4)
            self.assertTrue(s.wait(lambda: s.status() is not None), s.answers())
            answers = s.answers()
            self.assertEqual(s.status(), 0)
            self.assertEqual([ok for ok, _ in answers].count(True), 2, answers)
            refused = [body for ok, body in answers if not ok]
            self.assertEqual(len(refused), 3, answers)
            for body in refused:
                self.assertIn(b"rate limit for API key 'streamer' exceeded", body)
        finally:
            s.close()

    def test_a_revoked_key_stops_serving_an_open_grpc_stream(self):
        s = InferStream(PUBLIC.grpc_port, REVOKED_KEY)
        try:
            s.send()
            self.assertTrue(s.wait(lambda: len(s.answers()) == 1), "no first answer")
            self.assertTrue(s.answers()[0][0], s.answers())
            # The key leaves the file while the stream stays open.
            write_atomically(PUBLIC.key_path,
                             key_file([k for k in FIRST_KEYS if k["id"] != "revoked"]))
            gone = s.wait(lambda: request(PUBLIC.port, "GET", "/v2/models/simple",
                                          bearer(REVOKED_KEY))[0] == 401, timeout=15)
            self.assertTrue(gone, "the key file was not read again within 15 s")
            s.send()
            self.assertTrue(s.wait(lambda: s.status() is not None), s.answers())
            self.assertEqual(s.status(), 16, s.answers())  # UNAUTHENTICATED
            self.assertEqual(len(s.answers()), 1, "a request was served after the revocation")
        finally:
            s.close()
            write_atomically(PUBLIC.key_path, key_file(FIRST_KEYS))
            s.wait(lambda: request(PUBLIC.port, "GET", "/v2/models/simple",
                                   bearer(REVOKED_KEY))[0] == 200, timeout=15)

    def test_zz_keys_rotate_when_the_file_changes(self):
        """Runs last (zz): it replaces the keys the other tests use."""
        write_atomically(PUBLIC.key_path, key_file([
            {"id": "rotated", "sha256": sha(ROTATED_KEY), "scopes": ["metadata"]}]))
        deadline = time.time() + 15
        status = None
        while time.time() < deadline:
            status, _, _ = request(PUBLIC.port, "GET", "/v2/models/simple", bearer(ROTATED_KEY))
            if status == 200:
                break
            time.sleep(0.2)
        self.assertEqual(status, 200, "the new key was not taken within 15 s")
        self.assertEqual(request(PUBLIC.port, "GET", "/v2/models/simple", bearer(CI_KEY))[0], 401)
        # A file that does not parse keeps the keys in force, and the log says why.
        write_atomically(PUBLIC.key_path, '{"keys": [{"id": "x", "sha256": "zz"')
        deadline = time.time() + 15
        while time.time() < deadline and "is not used, the previous keys stay" not in PUBLIC.log_text():
            time.sleep(0.2)
        self.assertIn("is not used, the previous keys stay", PUBLIC.log_text())
        self.assertEqual(
            request(PUBLIC.port, "GET", "/v2/models/simple", bearer(ROTATED_KEY))[0], 200)


class LockedSetUpTest(unittest.TestCase):
    """--metrics-require-key and Triton's restricted APIs on top of the keys."""

    def test_metrics_need_a_key_with_the_metrics_scope(self):
        self.assertEqual(request(LOCKED.metrics_port, "GET", "/metrics")[0], 401)
        self.assertEqual(request(LOCKED.metrics_port, "GET", "/metrics", bearer(CI_KEY))[0], 403)
        status, _, body = request(LOCKED.metrics_port, "GET", "/metrics", bearer(OPS_KEY))
        self.assertEqual(status, 200)
        self.assertIn(b"harrier_auth_refusals_total", body)

    def test_a_restricted_api_needs_its_header_as_well_as_the_key(self):
        path = "/v2/repository/index"
        self.assertEqual(request(LOCKED.port, "POST", path, bearer(OPS_KEY))[0], 403)
        self.assertEqual(request(LOCKED.port, "POST", path,
                                 dict(bearer(OPS_KEY), **{"Admin-Key": "wrong"}))[0], 403)
        status, _, body = request(LOCKED.port, "POST", path,
                                  dict(bearer(OPS_KEY), **{"Admin-Key": ADMIN_HEADER_VALUE}))
        self.assertEqual(status, 200, body)
        # Other groups are not restricted: the key alone does.
        self.assertEqual(request(LOCKED.port, "GET", "/v2/models/simple", bearer(CI_KEY))[0], 200)

    def test_a_restricted_grpc_protocol(self):
        port = LOCKED.grpc_port
        auth = [("authorization", "Bearer " + OPS_KEY)]
        self.assertEqual(h2().unary_call(port, "RepositoryIndex", b"", extra_headers=auth)["status"], 7)
        r = h2().unary_call(port, "RepositoryIndex", b"",
                            extra_headers=auth + [("admin-key", ADMIN_HEADER_VALUE)])
        self.assertEqual(r["status"], 7, r)  # gRPC wants Triton's prefixed name
        self.assertIn("expecting header 'triton-grpc-protocol-admin-key'", r["message"])
        r = h2().unary_call(port, "RepositoryIndex", b"",
                            extra_headers=auth + [("triton-grpc-protocol-admin-key",
                                                   ADMIN_HEADER_VALUE)])
        self.assertEqual(r["status"], 0, r)


class StartupTest(unittest.TestCase):
    def run_harrier(self, *args):
        return subprocess.run([ARGS.harrier, "serve", "--model-repository", ARGS.repo,
                               "--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
                              + list(args), capture_output=True, text=True, timeout=120)

    def test_a_key_file_that_does_not_parse_stops_the_start(self):
        bad = os.path.join(ARGS.work_dir, "bad-keys.json")
        with open(bad, "w") as f:
            f.write(key_file([{"id": "a", "sha256": sha("k"), "scopes": ["everything"]}]))
        r = self.run_harrier("--api-key-file", bad)
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertIn("unknown scope 'everything'", r.stderr)

    def test_a_bad_restriction_stops_the_start(self):
        r = self.run_harrier("--http-restricted-api", "inference")
        self.assertEqual(r.returncode, 1, r.stderr[-2000:])
        self.assertIn("--http-restricted-api 'inference'", r.stderr)


def main():
    global ARGS, PUBLIC, LOCKED
    ARGS = harness.parse_args(__doc__)
    ARGS.repo = os.path.join(os.path.abspath(ARGS.source_dir), "examples", "models")
    loader = unittest.defaultTestLoader
    suite = unittest.TestSuite()
    for case in (PublicSetUpTest, LockedSetUpTest, StartupTest):
        suite.addTests(loader.loadTestsFromTestCase(case))

    def start():
        global PUBLIC, LOCKED
        servers = Servers()
        public_keys = os.path.join(ARGS.work_dir, "public-keys.json")
        write_atomically(public_keys, key_file(FIRST_KEYS))
        PUBLIC = harness.Harrier(ARGS.harrier, ARGS.repo,
                                 os.path.join(ARGS.work_dir, "public-harrier.log"),
                                 ["--api-key-file", public_keys, "--access-log", "on"])
        PUBLIC.key_path = public_keys
        servers.servers.append(PUBLIC)
        servers.log_path = PUBLIC.log_path
        locked_keys = os.path.join(ARGS.work_dir, "locked-keys.json")
        write_atomically(locked_keys, key_file(FIRST_KEYS))
        restriction = "model-repository:admin-key=" + ADMIN_HEADER_VALUE
        try:
            LOCKED = harness.Harrier(ARGS.harrier, ARGS.repo,
                                     os.path.join(ARGS.work_dir, "locked-harrier.log"),
                                     ["--api-key-file", locked_keys, "--metrics-require-key",
                                      "--http-restricted-api", restriction,
                                      "--grpc-restricted-protocol", restriction])
        except Exception:
            PUBLIC.terminate()
            raise
        servers.servers.append(LOCKED)
        if PUBLIC.grpc_port is None or LOCKED.grpc_port is None:
            servers.terminate()
            raise RuntimeError("no gRPC port in the log")
        return servers

    sys.exit(harness.run_suite(suite, start, ARGS.verbose))


if __name__ == "__main__":
    main()
