#!/usr/bin/python3
"""Streaming load for OpenAI-style servers: N concurrent streaming /v1/completions requests.

    /usr/bin/python3 bench/stream_load.py --url http://127.0.0.1:PORT --model NAME
        [--streams 4 --requests 8 --max-tokens 128 --pid PID --system harrier
         --engine-threads REGEX --warmup 1]

Each of --streams workers keeps one HTTP/1.1 connection (opened again when the server closes
it: llama-server does after each stream; `connections` in the output counts them) and sends
--requests requests one after another: {"prompt", "max_tokens", "temperature": 0, "stream": true,
"stream_options": {"include_usage": true}}, a fixed prompt each (PROMPTS, the same list and
order for every server, so that two servers compared read the same tokens), led by a tag
("Run 4.2.0:", streams.worker.request) that keeps the prompts of a server's runs apart, so that
no server's prompt cache answers one from an earlier request's. No
"ignore_eos": Harrier has no such field, so each server generates until max_tokens or its
model's end of text, and the tokens counted are those actually generated.

Measured per request: the time to first token (from sending the request to the first event
whose text is not empty), the tokens (the usage's completion_tokens, or the text events'
count where a server sends no usage), the end (data: [DONE]). Per run (all workers started
together, the clock from their start to the last one's end): total tokens/s and the time to
first token's p50 and p99 (nearest rank).

With --pid, the server's CPU over the run from /proc/PID/task/*/schedstat (the scheduler's own
count of nanoseconds on a CPU, exact where the clock ticks of /proc/PID/task/*/stat would round
a thread's few milliseconds to 0 or 10), summed by thread name from /proc/PID/task/*/comm.
cpu_us_per_token is the whole process's CPU (/proc/PID/stat's utime + stime, in clock ticks,
which also counts threads that ended during the run) per token; with
--engine-threads REGEX, server_us_per_token is the CPU of the threads whose name does not match
it (the main thread always counts as the server's), per token. For Harrier the engine's
threads are llama.cpp's: the engine thread, named "llama-engine", and ggml's pool workers, which
inherit that name, so generation.sh passes --engine-threads llama-engine.

Prints `RESULT system=S streams=N ...` (one line, key=value) and `THREADS system=S streams=N
name=ms ...` (the CPU per thread name, largest first, the main thread as name(main)). Stdlib
only.
"""
import argparse
import http.client
import json
import os
import re
import select
import sys
import threading
import time
import urllib.parse

PROMPTS = [
    "The history of the lighthouse on the northern cape begins with",
    "Write a short story about a cartographer who discovers an island that",
    "In a small village at the foot of the mountains, the baker woke before dawn and",
    "Explain to a new engineer why a server should bound the memory each client can hold:",
    "The committee's report on the river's flooding concluded that",
    "Once the last train had left the station, the night porter",
    "A recipe for bread that needs no kneading: first,",
    "The letter arrived on a Tuesday, addressed in a hand she had not seen for years,",
    "Describe the migration of the arctic tern from one pole to the other.",
    "Our quarterly planning meeting covered three topics. The first was",
    "When the orchestra tuned, the oboe gave the A, and then",
    "The museum's new wing, designed to let daylight reach the sculptures,",
    "He opened the toolbox and found, beneath the spanners, a notebook that",
    "The rules of the card game are simple: each player is dealt seven cards and",
    "At the edge of the forest the path divided, and the travellers argued about",
    "A guide to repairing a bicycle's rear derailleur, step by step:",
]


def percentile(values, fraction):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil(n * fraction), at least 1
    return ordered[int(rank) - 1]


def thread_cpu_ns(pid):
    """{tid: (name, nanoseconds on a CPU)} for the process's live threads."""
    out = {}
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"{task}/{tid}/schedstat") as f:
                run_ns = int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended between listdir and open
            continue
        out[int(tid)] = (name, run_ns)
    return out


def process_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


class Request:
    """One streaming request's measurements (seconds from the run's start)."""

    def __init__(self):
        self.sent = self.first_token = self.end = None
        self.tokens = 0          # usage.completion_tokens when the server sent it
        self.text_events = 0     # events carrying non-empty text
        self.error = None


class Connection:
    """One worker's keep-alive HTTP/1.1 connection, opened again when the server has closed it.

    llama-server (v0.4.0) closes the connection after every streamed answer without saying so
    (no Connection: close), while Harrier keeps it open. Like curl, a connection is checked
    before it is reused: an idle one that is readable has been closed by the server. A request
    that finds the connection closed anyway, before any byte of its answer, is sent once more on
    a new one. Both costs fall in the request's time to first token, as they would for any
    client; `opened` counts the connections."""

    def __init__(self, host, port, timeout):
        self.conn = http.client.HTTPConnection(host, port, timeout=timeout)
        self.opened = 0

    def post(self, path, body):
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        for attempt in range(2):
            sock = self.conn.sock
            if sock is not None and select.select([sock], [], [], 0)[0]:
                self.conn.close()
            reused = self.conn.sock is not None
            if not reused:
                self.opened += 1
            try:
                self.conn.request("POST", path, body=body, headers=headers)
                return self.conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                if not reused or attempt:
                    raise

    def close(self):
        self.conn.close()


def stream_one(conn, path, body, started):
    """Sends one streaming request on conn and reads its events to data: [DONE]."""
    r = Request()
    r.sent = time.monotonic() - started
    resp = conn.post(path, body)
    if resp.status != 200:
        r.error = f"HTTP {resp.status}: {resp.read()[:200]!r}"
        return r
    usage = None
    while True:
        line = resp.readline()
        if not line:
            r.error = "the stream ended before data: [DONE]"
            break
        line = line.rstrip(b"\r\n")
        if not line.startswith(b"data:"):
            continue  # id:, event:, comments (: ping) and the blank line ending each event
        data = line[5:].strip()
        if data == b"[DONE]":
            break
        event = json.loads(data)
        if "error" in event:
            r.error = f"error event: {event['error']}"
        for choice in event.get("choices") or []:
            if choice.get("text"):
                r.text_events += 1
                if r.first_token is None:
                    r.first_token = time.monotonic() - started
        if event.get("usage"):
            usage = event["usage"]
    r.end = time.monotonic() - started
    resp.read()  # the chunked body's end, so the connection can carry the next request
    r.tokens = usage["completion_tokens"] if usage else r.text_events
    return r


def worker(index, args, barrier, started, results, connections):
    url = urllib.parse.urlsplit(args.url)
    conn = Connection(url.hostname, url.port, args.timeout)
    barrier.wait()
    for i in range(args.requests):
        # The tag first makes every prompt of a run, and of the runs before it on the same
        # server, differ from the third token or so: neither server's prompt-prefix cache
        # (Harrier reuses 16 tokens or more, llama-server any prefix) then skips more than a
        # few tokens of a prompt, and the time to first token includes the prompt's decoding
        # on both alike.
        tag = f"{args.tag} {args.streams}.{index}.{i}:"
        prompt = f"{tag} {PROMPTS[(index + i * args.streams) % len(PROMPTS)]}"
        body = json.dumps({"model": args.model, "prompt": prompt, "max_tokens": args.max_tokens,
                           "temperature": 0, "stream": True,
                           "stream_options": {"include_usage": True}})
        try:
            results.append(stream_one(conn, "/v1/completions", body, started[0]))
        except (OSError, http.client.HTTPException, ValueError) as e:
            r = Request()
            r.error = f"{type(e).__name__}: {e}"
            results.append(r)
            conn.close()
    conn.close()
    connections.append(conn.opened)


def run(args):
    """One run of --streams workers; returns (results, seconds, connections opened)."""
    barrier = threading.Barrier(args.streams + 1)
    started = [0.0]
    results = []
    connections = []
    threads = [threading.Thread(target=worker,
                                args=(i, args, barrier, started, results, connections))
               for i in range(args.streams)]
    for t in threads:
        t.start()
    started[0] = time.monotonic()
    barrier.wait()
    for t in threads:
        t.join()
    return results, time.monotonic() - started[0], sum(connections)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", required=True, help="the server's base URL, http://HOST:PORT")
    p.add_argument("--model", required=True, help="the request's model field")
    p.add_argument("--streams", type=int, default=4, help="concurrent streams")
    p.add_argument("--requests", type=int, default=8, help="requests per stream, one at a time")
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=0,
                   help="unmeasured requests (one stream, 8 tokens) before the run")
    p.add_argument("--pid", type=int, default=0, help="the server's PID, for its CPU time")
    p.add_argument("--engine-threads", default="",
                   help="regex (full match) of the engine's thread names, for server_us_per_token")
    p.add_argument("--system", default="server", help="the name in the output lines")
    p.add_argument("--timeout", type=float, default=600, help="socket timeout, seconds")
    p.add_argument("--tag", default="Run", help=argparse.SUPPRESS)  # the warm-up's is its own
    args = p.parse_args()

    if args.warmup:
        warm = argparse.Namespace(**vars(args))
        warm.streams, warm.requests, warm.max_tokens, warm.tag = 1, args.warmup, 8, "Warm-up"
        results, _, _ = run(warm)
        failed = [r.error for r in results if r.error]
        if failed:
            sys.exit(f"stream_load: warm-up failed: {failed[0]}")

    tck = os.sysconf("SC_CLK_TCK")
    before = thread_cpu_ns(args.pid) if args.pid else {}
    before_total = process_ticks(args.pid) if args.pid else 0
    results, seconds, connections = run(args)
    after = thread_cpu_ns(args.pid) if args.pid else {}
    after_total = process_ticks(args.pid) if args.pid else 0

    ok = [r for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    tokens = sum(r.tokens for r in ok)
    ttft = [(r.first_token - r.sent) * 1000 for r in ok if r.first_token is not None]
    e2e = [(r.end - r.sent) * 1000 for r in ok]
    fields = {
        "system": args.system, "streams": args.streams, "requests": len(results),
        "errors": len(errors), "connections": connections, "tokens": tokens,
        "tokens_per_request": f"{tokens / len(ok):.1f}" if ok else "na",
        "seconds": f"{seconds:.2f}",
        "tokens_per_s": f"{tokens / seconds:.1f}",
        "ttft_p50_ms": f"{percentile(ttft, 0.5):.1f}" if ttft else "na",
        "ttft_p99_ms": f"{percentile(ttft, 0.99):.1f}" if ttft else "na",
        "e2e_p50_ms": f"{percentile(e2e, 0.5):.1f}" if e2e else "na",
    }
    by_name = {}
    if args.pid:
        engine = re.compile(args.engine_threads) if args.engine_threads else None
        server_ns = 0
        for tid, (name, ns) in after.items():
            spent = ns - before.get(tid, (name, 0))[1]
            label = name + "(main)" if tid == args.pid else name
            by_name[label] = by_name.get(label, 0) + spent
            if engine is None or tid == args.pid or not engine.fullmatch(name):
                server_ns += spent
        per_token = 1 / max(tokens, 1)
        fields["cpu_us_per_token"] = f"{(after_total - before_total) * 1e6 / tck * per_token:.1f}"
        fields["server_us_per_token"] = f"{server_ns / 1000 * per_token:.2f}" if engine else "na"
        fields["server_cpu_ms"] = f"{server_ns / 1e6:.1f}" if engine else "na"
    print("RESULT " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)
    if by_name:
        spent = sorted(by_name.items(), key=lambda kv: -kv[1])
        print(f"THREADS system={args.system} streams={args.streams} " +
              " ".join(f"{name.replace(' ', '_')}={ns / 1e6:.1f}ms"
                       for name, ns in spent if ns))
    for e in errors[:3]:
        print(f"stream_load: {args.system}: {e}", file=sys.stderr)
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
