"""A small OTLP/HTTP JSON trace receiver for integration tests and manual use.

    with OtlpReceiver() as receiver:           # 127.0.0.1, a free port, a daemon thread
        start_harrier("--trace-endpoint", receiver.url)
        ...
        spans = receiver.wait_for(lambda spans: any(s["name"] == "send" for s in spans))

It accepts POST /v1/traces with Content-Type application/json (an ExportTraceServiceRequest in
the OTLP JSON encoding: hex ids, times as decimal strings of Unix nanoseconds) and keeps every
parsed body; spans() flattens them. fail_with(status) makes the following POSTs answer that
status instead (None: 200 again), to test the sender's retries and drop accounting.

Standalone: python3 otlp_receiver.py --port 4318   (prints each span as it arrives)
Self-test:  python3 otlp_receiver.py --self-test
"""

import argparse
import http.server
import inspect
import json
import sys
import threading
import time

TRACES_PATH = "/v1/traces"


def _value(v):
    """An OTLP AnyValue as a Python value (intValue is a decimal string in JSON)."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return _attributes(v["kvlistValue"].get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def _attributes(items):
    return {a["key"]: _value(a.get("value", {})) for a in items or []}


def flatten(body):
    """The spans of one ExportTraceServiceRequest (parsed JSON) as flat dicts."""
    out = []
    for rs in body.get("resourceSpans", []):
        resource = _attributes(rs.get("resource", {}).get("attributes"))
        for ss in rs.get("scopeSpans", []):
            for s in ss.get("spans", []):
                status = s.get("status") or {}
                out.append({
                    "trace_id": s.get("traceId", ""),
                    "span_id": s.get("spanId", ""),
                    "parent_span_id": s.get("parentSpanId", "") or "",
                    "name": s.get("name", ""),
                    "kind": s.get("kind", 0),
                    "start": int(s.get("startTimeUnixNano", 0)),
                    "end": int(s.get("endTimeUnixNano", 0)),
                    "attributes": _attributes(s.get("attributes")),
                    "links": [(l.get("traceId", ""), l.get("spanId", ""))
                              for l in s.get("links", [])],
                    "trace_state": s.get("traceState", "") or "",
                    "status_code": int(status.get("code", 0)),
                    "status_message": status.get("message", ""),
                    "resource": resource,
                })
    return out


def format_span(s):
    duration_us = (s["end"] - s["start"]) / 1000.0
    parent = s["parent_span_id"] or "-" * 16
    attrs = " ".join("%s=%s" % kv for kv in sorted(s["attributes"].items()))
    links = " links=" + ",".join("%s/%s" % l for l in s["links"]) if s["links"] else ""
    status = " status=%d:%s" % (s["status_code"], s["status_message"]) if s["status_code"] else ""
    return "%s %s <- %s %-32s kind=%s %10.1f us %s%s%s" % (
        s["trace_id"], s["span_id"], parent, s["name"], s["kind"], duration_us, attrs, links,
        status)


class OtlpReceiver:
    """The receiver; a context manager (start on enter, stop on exit). Thread safe."""

    def __init__(self, host="127.0.0.1", port=0, echo=False):
        self._lock = threading.Lock()
        self._bodies = []
        self._requests = 0
        self._fail_status = None
        self._echo = echo
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the exporter expects

            def log_message(self, *args):
                pass

            def _answer(self, status, body=b"{}"):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else b""
                with receiver._lock:
                    receiver._requests += 1
                    fail = receiver._fail_status
                if self.path.split("?")[0] != TRACES_PATH:
                    return self._answer(404, b'{"error":"not found"}')
                content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if content_type != "application/json":
                    return self._answer(415, b'{"error":"expected application/json"}')
                if fail is not None:
                    return self._answer(fail, b'{"error":"failing on purpose"}')
                try:
                    body = json.loads(data)
                except ValueError as e:
                    return self._answer(400, json.dumps({"error": str(e)}).encode())
                with receiver._lock:
                    receiver._bodies.append(body)
                if receiver._echo:
                    for s in flatten(body):
                        print(format_span(s), flush=True)
                self._answer(200, b'{"partialSuccess":{}}')

            def do_GET(self):
                self._answer(405, b'{"error":"POST only"}')

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.url = "http://%s:%d%s" % (host, self.port, TRACES_PATH)
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

    @property
    def requests(self):
        """POSTs received, whatever their answer."""
        with self._lock:
            return self._requests

    def bodies(self):
        with self._lock:
            return list(self._bodies)

    def spans(self):
        """Every span received so far, flattened (see flatten())."""
        out = []
        for body in self.bodies():
            out.extend(flatten(body))
        return out

    def clear(self):
        with self._lock:
            self._bodies.clear()

    def fail_with(self, status):
        """Answer the following POSTs with `status` (e.g. 503); None: accept them again."""
        with self._lock:
            self._fail_status = status

    def wait_for(self, predicate, timeout=10):
        """Polls until predicate(spans) (or predicate(), if it takes no argument) is truthy;
        returns the spans, or raises AssertionError saying what arrived."""
        try:
            takes_spans = len(inspect.signature(predicate).parameters) > 0
        except (TypeError, ValueError):
            takes_spans = True
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if predicate(spans) if takes_spans else predicate():
                return spans
            if time.monotonic() >= deadline:
                names = sorted({(s["trace_id"], s["name"]) for s in spans})
                raise AssertionError("condition not met within %ss: %d spans in %d requests: %s"
                                     % (timeout, len(spans), self.requests, names[:40]))
            time.sleep(0.05)


class SelfTestFailure(Exception):
    pass


def _self_test():
    """Exercises the receiver and flatten() with a known body; raises (exit status 1) on the
    first thing that is not as expected. Explicit checks, not `assert`, so that it still checks
    under python3 -O. Run by CTest (integration_otlp_receiver_selftest)."""
    import urllib.error
    import urllib.request

    def check(condition, what="self-test check failed"):
        if not condition:
            raise SelfTestFailure(what)

    def post(url, payload, content_type="application/json"):
        req = urllib.request.Request(url, data=payload, method="POST",
                                     headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    body = {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "harrier"}}]},
        "scopeSpans": [{"scope": {"name": "harrier"}, "spans": [
            {"traceId": "11" * 16, "spanId": "22" * 8, "name": "POST /v2/models/{model}/infer",
             "kind": 2, "startTimeUnixNano": "1000", "endTimeUnixNano": "5000",
             "traceState": "a=b", "status": {"code": 2, "message": "boom"},
             "attributes": [{"key": "http.response.status_code", "value": {"intValue": "500"}},
                            {"key": "ok", "value": {"boolValue": False}},
                            {"key": "ratio", "value": {"doubleValue": 0.5}}]},
            {"traceId": "11" * 16, "spanId": "33" * 8, "parentSpanId": "22" * 8,
             "name": "batch", "kind": 1, "startTimeUnixNano": "2000", "endTimeUnixNano": "3000",
             "links": [{"traceId": "44" * 16, "spanId": "55" * 8}]},
        ]}]}]}
    with OtlpReceiver() as r:
        check(r.url == "http://127.0.0.1:%d/v1/traces" % r.port, r.url)
        check(r.spans() == [] and r.requests == 0, "a new receiver holds nothing")
        check(post(r.url, json.dumps(body).encode()) == 200)
        spans = r.wait_for(lambda spans: len(spans) == 2, timeout=5)
        server, batch = spans
        check(server["kind"] == 2 and server["parent_span_id"] == "", server)
        check(server["start"] == 1000 and server["end"] == 5000, server)
        check(server["attributes"] == {"http.response.status_code": 500, "ok": False,
                                       "ratio": 0.5}, server)
        check(server["trace_state"] == "a=b" and server["status_code"] == 2, server)
        check(server["status_message"] == "boom" and server["resource"] == {
            "service.name": "harrier"}, server)
        check(batch["parent_span_id"] == "22" * 8 and batch["links"] == [("44" * 16, "55" * 8)],
              batch)
        check(batch["status_code"] == 0 and batch["trace_state"] == "", batch)
        check(r.wait_for(lambda: True) == spans, "a predicate without arguments")
        check(post(r.url, b"{}", "text/plain") == 415)
        check(post(r.url.replace("/v1/traces", "/v1/metrics"), b"{}") == 404)
        r.fail_with(503)
        check(post(r.url, json.dumps(body).encode()) == 503)
        r.fail_with(None)
        check(post(r.url, json.dumps(body).encode()) == 200)
        check(r.requests == 5, r.requests)
        check(len(r.spans()) == 4)
        try:
            r.wait_for(lambda spans: len(spans) > 4, timeout=0.2)
            raise SelfTestFailure("wait_for did not time out")
        except AssertionError as e:
            check("4 spans" in str(e), e)
    print("otlp_receiver self-test: ok")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=4318)
    args = parser.parse_args()
    receiver = OtlpReceiver(args.host, args.port, echo=True)
    print("OTLP/HTTP JSON receiver on %s" % receiver.url, flush=True)
    receiver.start()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        receiver.stop()


if __name__ == "__main__" and "--self-test" in sys.argv:
    _self_test()
elif __name__ == "__main__":
    main()
