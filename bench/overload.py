#!/usr/bin/python3
"""Overload run: open-loop arrivals at a multiple of a model's capacity against a running Harrier.

Measures, in one run: unloaded latency (one request at a time), then Poisson arrivals at
--factor x capacity for --seconds with --workers connections: admitted (200) latency
percentiles, rejection (429) latency percentiles, the share rejected, and the server's resident
memory before and after (from /proc/PID/status). Capacity is measured first: requests per
second at batch 1 with --workers closed-loop connections for a few seconds, overload protection
deciding nothing yet... (it is whatever the server completes).

usage: bench/overload.py --url http://127.0.0.1:PORT/v2/models/M/infer --body FILE [--ihcl N]
                         --pid PID [--factor 4] [--seconds 60] [--workers 64]
"""
import argparse
import http.client
import queue
import random
import threading
import time
import urllib.parse


def percentile(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


class Client:
    def __init__(self, url, body, ihcl):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.path = u.hostname, u.port, u.path
        self.body = body
        self.headers = {"Content-Type": "application/octet-stream" if ihcl else "application/json"}
        if ihcl:
            self.headers["Inference-Header-Content-Length"] = str(ihcl)
        self.conn = None

    def send(self):
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
                t0 = time.perf_counter()
                self.conn.request("POST", self.path, body=self.body, headers=self.headers)
                r = self.conn.getresponse()
                r.read()
                return r.status, time.perf_counter() - t0
            except (ConnectionError, http.client.HTTPException, OSError):
                self.conn = None
                if attempt:
                    return -1, 0.0
        return -1, 0.0


def closed_loop(args, body, seconds, workers):
    done = []
    stop = time.perf_counter() + seconds
    lock = threading.Lock()

    def run():
        c = Client(args.url, body, args.ihcl)
        while time.perf_counter() < stop:
            s, dt = c.send()
            with lock:
                done.append((s, dt))

    ts = [threading.Thread(target=run) for _ in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return done


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--body", required=True)
    ap.add_argument("--ihcl", type=int, default=0)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--factor", type=float, default=4.0)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--workers", type=int, default=64)
    args = ap.parse_args()
    body = open(args.body, "rb").read()

    # Unloaded: one request at a time.
    unloaded = closed_loop(args, body, 8, 1)
    ok = [dt for s, dt in unloaded if s == 200]
    capacity_probe = closed_loop(args, body, 5, 4)
    capacity = sum(1 for s, _ in capacity_probe if s == 200) / 5
    rate = capacity * args.factor
    print(f"unloaded: n={len(ok)} p50_us={percentile(ok, 50) * 1e6:.0f} p99_us={percentile(ok, 99) * 1e6:.0f}")
    print(f"capacity (4 closed-loop connections): {capacity:.1f} req/s; offering {rate:.1f} req/s "
          f"({args.factor}x) for {args.seconds:.0f} s with {args.workers} connections")
    rss_before = rss_kib(args.pid)

    work = queue.Queue()
    results = []
    lock = threading.Lock()

    def worker():
        c = Client(args.url, body, args.ihcl)
        while True:
            item = work.get()
            if item is None:
                return
            s, dt = c.send()
            with lock:
                results.append((s, dt, time.perf_counter() - item))

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(args.workers)]
    for t in ts:
        t.start()
    rng = random.Random(7)
    start = time.perf_counter()
    next_at = start
    offered = 0
    while next_at < start + args.seconds:
        now = time.perf_counter()
        if next_at > now:
            time.sleep(next_at - now)
        work.put(time.perf_counter())
        offered += 1
        next_at += rng.expovariate(rate)
    for _ in ts:
        work.put(None)
    for t in ts:
        t.join(timeout=120)
    rss_after = rss_kib(args.pid)

    admitted = [dt for s, dt, _ in results if s == 200]
    rejected = [dt for s, dt, _ in results if s == 429]
    other = [s for s, _, _ in results if s not in (200, 429)]
    waited = [w - dt for s, dt, w in results if s in (200, 429)]
    print(f"offered={offered} answered={len(results)} admitted={len(admitted)} rejected_429={len(rejected)} "
          f"other={len(other)} ({sorted(set(other))})")
    print(f"admitted: p50_us={percentile(admitted, 50) * 1e6:.0f} p90_us={percentile(admitted, 90) * 1e6:.0f} "
          f"p99_us={percentile(admitted, 99) * 1e6:.0f}; admitted throughput {len(admitted) / args.seconds:.1f} req/s")
    print(f"rejected: p50_us={percentile(rejected, 50) * 1e6:.0f} p99_us={percentile(rejected, 99) * 1e6:.0f}")
    print(f"client-side wait for a free connection: p99_us={percentile(waited, 99) * 1e6:.0f}")
    print(f"server RSS: before={rss_before} KiB after={rss_after} KiB")


if __name__ == "__main__":
    main()
