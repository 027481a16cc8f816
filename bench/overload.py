#!/usr/bin/python3
"""Overload run: open-loop arrivals at a multiple of a model's capacity against a running Harrier.

Measures, in one run: unloaded latency (one request at a time), then Poisson arrivals at
--factor x capacity for --seconds with --workers connections, --minutes times in a row: for
each, admitted (200) latency percentiles, rejection (429) latency percentiles, the share
rejected, and the server's resident memory before and after (from /proc/PID/status), so that a
second period tells growth from warm-up. Capacity is --capacity, or measured first: requests
per second completed by --capacity-workers closed-loop connections for --capacity-seconds.
--capacity-only measures it and stops (run it against a server with overload protection off
for the unprotected throughput; bench/overload.sh does).

usage: bench/overload.py --url http://127.0.0.1:PORT/v2/models/M/infer --body FILE [--ihcl N]
                         --pid PID [--factor 4] [--seconds 60] [--minutes 1] [--workers 64]
                         [--capacity RPS | --capacity-only] [--capacity-workers 4]
                         [--capacity-seconds 5]
       bench/overload.py --url ... --body FILE [--ihcl N] --pid PID --closed-loop N [--seconds S]
--closed-loop: only N closed-loop connections that ignore Retry-After (bench/overload_closed.sh).
"""
import argparse
import http.client
import json
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


def server_stats(url):
    """(successes, queue ns, compute_infer ns, executions) from the model's statistics."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", u.path.rsplit("/infer", 1)[0] + "/stats")
        s = json.loads(conn.getresponse().read())["model_stats"][0]
        i = s["inference_stats"]
        return (i["success"]["count"], i["queue"]["ns"], i["compute_infer"]["ns"],
                s["execution_count"])
    except (OSError, ValueError, KeyError, IndexError, http.client.HTTPException):
        return None
    finally:
        conn.close()


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
    ap.add_argument("--minutes", type=int, default=1, help="overload periods in a row")
    ap.add_argument("--capacity", type=float, default=0, help="req/s; 0: measure it")
    ap.add_argument("--capacity-only", action="store_true")
    ap.add_argument("--capacity-workers", type=int, default=4)
    ap.add_argument("--capacity-seconds", type=float, default=5)
    ap.add_argument("--closed-loop", type=int, default=0, metavar="N",
                    help="only this: N closed-loop connections that resend at once after a 429 "
                         "(ignoring Retry-After) for --seconds; goodput and latencies by status")
    args = ap.parse_args()
    body = open(args.body, "rb").read()
    if args.closed_loop:
        closed_loop_report(args, body)
        return

    def probe():
        done = closed_loop(args, body, args.capacity_seconds, args.capacity_workers)
        ok = [dt for s, dt in done if s == 200]
        capacity = len(ok) / args.capacity_seconds
        print(f"capacity ({args.capacity_workers} closed-loop connections, {args.capacity_seconds:.0f} s): "
              f"{capacity:.1f} req/s; p50_us={percentile(ok, 50) * 1e6:.0f} p99_us={percentile(ok, 99) * 1e6:.0f}; "
              f"non-200: {len(done) - len(ok)}")
        return capacity

    if args.capacity_only:
        probe()
        return
    # Unloaded: one request at a time.
    unloaded = closed_loop(args, body, 8, 1)
    ok = [dt for s, dt in unloaded if s == 200]
    print(f"unloaded: n={len(ok)} p50_us={percentile(ok, 50) * 1e6:.0f} p99_us={percentile(ok, 99) * 1e6:.0f}")
    capacity = args.capacity if args.capacity > 0 else probe()
    rate = capacity * args.factor
    print(f"capacity {capacity:.1f} req/s; offering {rate:.1f} req/s ({args.factor}x) for "
          f"{args.minutes} x {args.seconds:.0f} s with {args.workers} connections")
    for period in range(1, args.minutes + 1):
        overload_period(args, body, rate, period)


def closed_loop_report(args, body):
    """What a naive retry loop sees: N connections, each sending its next request as soon as
    the last one is answered, whatever the answer."""
    rss_before = rss_kib(args.pid)
    start = time.perf_counter()
    done = closed_loop(args, body, args.seconds, args.closed_loop)
    elapsed = time.perf_counter() - start
    ok = [dt for s, dt in done if s == 200]
    refused = [dt for s, dt in done if s == 429]
    other = sorted(set(s for s, _ in done if s not in (200, 429)))
    print(f"closed loop ({args.closed_loop} connections, {elapsed:.1f} s): "
          f"goodput {len(ok) / elapsed:.1f} req/s; admitted n={len(ok)} "
          f"p50_us={percentile(ok, 50) * 1e6:.0f} p99_us={percentile(ok, 99) * 1e6:.0f}; "
          f"refused n={len(refused)} p50_us={percentile(refused, 50) * 1e6:.0f} "
          f"p99_us={percentile(refused, 99) * 1e6:.0f}; other n={len(done) - len(ok) - len(refused)} "
          f"{other}; server RSS {rss_before} -> {rss_kib(args.pid)} KiB")


def overload_period(args, body, rate, period):
    rss_before = rss_kib(args.pid)
    stats_before = server_stats(args.url)

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
    rng = random.Random(7 + period)
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
    stats_after = server_stats(args.url)

    admitted = [dt for s, dt, _ in results if s == 200]
    rejected = [dt for s, dt, _ in results if s == 429]
    other = [s for s, _, _ in results if s not in (200, 429)]
    waited = [w - dt for s, dt, w in results if s in (200, 429)]
    print(f"-- period {period}")
    print(f"offered={offered} answered={len(results)} admitted={len(admitted)} rejected_429={len(rejected)} "
          f"other={len(other)} ({sorted(set(other))})")
    print(f"admitted: p50_us={percentile(admitted, 50) * 1e6:.0f} p90_us={percentile(admitted, 90) * 1e6:.0f} "
          f"p99_us={percentile(admitted, 99) * 1e6:.0f}; admitted throughput {len(admitted) / args.seconds:.1f} req/s")
    print(f"rejected: p50_us={percentile(rejected, 50) * 1e6:.0f} p99_us={percentile(rejected, 99) * 1e6:.0f}")
    print(f"client-side wait for a free connection: p99_us={percentile(waited, 99) * 1e6:.0f}")
    print(f"server RSS: before={rss_before} KiB after={rss_after} KiB")
    if stats_before and stats_after:
        n, q, run, ex = (a - b for a, b in zip(stats_after, stats_before))
        if n and ex:
            # Server side: how much of the admitted latency is queueing (what overload
            # protection controls) and how long the runs took under this load.
            print(f"server: mean queue {q / n / 1e6:.1f} ms, mean run {run / n / 1e6:.1f} ms per request, "
                  f"{n / ex:.2f} requests per execution")


if __name__ == "__main__":
    main()
