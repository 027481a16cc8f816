#!/usr/bin/python3
"""Time to first token with and without prompt-prefix reuse (issue 13): one Harrier serving a
GGUF with one sequence, requests whose prompts share a long prefix with the previous request's
(reused from the sequence's KV cache) alternated with requests whose prompts are as long but
share nothing with what is cached (decoded whole).

usage: bench/prefix_reuse.py HARRIER_BINARY MODEL.gguf [--rounds 8] [--threads 2]
           [--prefix-words 300]

Prints each request's TTFT and one line:
  RESULT prefix_words=300 reused_ttft_p50_ms=... fresh_ttft_p50_ms=... ratio=...
plus the server's harrier_prompt_tokens_reused_total, which says the reuse happened. Stdlib
only. The server is stopped by its PID on every path.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = ("river stone market letter garden window engine summer bridge candle forest "
         "harbor silver winter doctor island music paper valley castle").split()


def text(seed, n):
    """n words, a different sequence for each seed (no shared prefix across seeds)."""
    return " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] for i in range(n))


def ttft(port, prompt):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = json.dumps({"model": "m", "prompt": prompt, "max_tokens": 1, "temperature": 0,
                       "stream": True})
    start = time.monotonic()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    first = None
    for line in r:
        if line.startswith(b"data: ") and b'"text":"' in line and first is None:
            first = time.monotonic() - start
    conn.close()
    return first


def main():
    p = argparse.ArgumentParser()
    p.add_argument("harrier")
    p.add_argument("model")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--prefix-words", type=int, default=300)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="prefix-reuse-")
    proc = None
    try:
        os.makedirs(os.path.join(work, "repo", "m", "1"))
        os.symlink(os.path.abspath(args.model), os.path.join(work, "repo", "m", "1", "model.gguf"))
        with open(os.path.join(work, "repo", "m", "config.pbtxt"), "w") as f:
            f.write('backend: "llama.cpp"\n'
                    'parameters { key: "parallel_sequences" value { string_value: "2" } }\n'
                    'parameters { key: "context_size" value { string_value: "2048" } }\n'
                    'parameters { key: "threads" value { string_value: "%d" } }\n' % args.threads)
        log = open(os.path.join(work, "harrier.log"), "wb")
        proc = subprocess.Popen([args.harrier, "serve", "--model-repository",
                                 os.path.join(work, "repo"), "--http-port", "0", "--grpc-port",
                                 "0", "--metrics-port", "0"], stdout=log, stderr=subprocess.STDOUT)
        port = metrics = None
        for _ in range(1200):
            with open(log.name, "rb") as f:
                t = f.read().decode("utf-8", "replace")
            m1 = re.search(r"listening on HTTP [^ ]+:(\d+)", t)
            m2 = re.search(r"listening on metrics [^ ]+:(\d+)", t)
            if m1 and m2:
                port, metrics = int(m1.group(1)), int(m2.group(1))
                break
            time.sleep(0.1)
        if port is None:
            sys.exit("harrier did not start:\n" + t[-2000:])
        reused, fresh = [], []
        prefix = text(1, args.prefix_words)
        ttft(port, prefix + " first")  # puts the prefix in a sequence's cache
        for i in range(args.rounds):
            r = ttft(port, prefix + " and then " + text(100 + i, 3))
            # Led by a word of its own, so that not even its first tokens match a cached prompt.
            f = ttft(port, "Case %d: " % i + text(200 + i, args.prefix_words) + " and then " +
                     text(100 + i, 3))
            reused.append(r)
            fresh.append(f)
            print("round %d: reused %.1f ms, fresh %.1f ms" % (i, r * 1e3, f * 1e3))
            ttft(port, prefix + " again")  # the prefix back in the cache the fresh one took
        conn = http.client.HTTPConnection("127.0.0.1", metrics, timeout=10)
        conn.request("GET", "/metrics")
        scrape = conn.getresponse().read().decode()
        reused_tokens = [line.split()[-1] for line in scrape.splitlines()
                         if line.startswith("harrier_prompt_tokens_reused_total{")]
        rp, fp = statistics.median(reused), statistics.median(fresh)
        print("RESULT prefix_words=%d threads=%d rounds=%d reused_ttft_p50_ms=%.1f "
              "fresh_ttft_p50_ms=%.1f ratio=%.2f prompt_tokens_reused_total=%s"
              % (args.prefix_words, args.threads, args.rounds, rp * 1e3, fp * 1e3, rp / fp,
                 ",".join(reused_tokens)))
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
