#!/usr/bin/python3
"""Text generation end to end: GGUF models on llama.cpp behind the OpenAI API and Triton's
generate extension, with the real binary.

usage: /usr/bin/python3 tests/integration/generation_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

The repository holds ../shared/models/llama-2-tiny-random.gguf twice: as "tiny-llama" (no
config: model.gguf alone makes it a llama.cpp model; 4 sequences) and as "single" (a config with
parallel_sequences 1). Checks: /v1/models and the model's metadata; greedy determinism and
max_tokens; a stream's numbered events carry the same text as the answer without streaming; 16
concurrent streams each equal to its own single run; a client that disconnects mid-stream frees
its sequence at once (the next request on the one-sequence model does not wait for the
abandoned generation); resumption with GET /v1/streams/{id} and Last-Event-ID, after the end and
after a disconnect within --generation-disconnect-grace-secs, with nothing generated twice;
heartbeats on a stream that waits for a sequence; completions' logprobs (legacy layout, whole and
streamed); streaming over HTTP/2 (nghttp); Triton's
generate and generate_stream; bad input in OpenAI's error shape, and the KServe infer endpoint on
a generative model pointing at these; an unload in explicit mode ends the generations waiting
for a sequence at once while the running one streams on; a gRPC client that reads nothing has
its generation stopped past the stream buffer (raw HTTP/2 frames: tools/h2_attacks.py, which
needs Debian's python3-hpack); streams still running when the exit timeout nears end with an
error event and their proper end. Python stdlib and nghttp only. The last line is
"N passed, N failed".
"""
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
SERVER = None  # the suite's server (default flags but a short heartbeat)


def gguf_path():
    return os.path.join(os.path.abspath(ARGS.source_dir), "..", "shared", "models",
                        "llama-2-tiny-random.gguf")


def make_repository():
    repo = os.path.join(ARGS.work_dir, "repo")
    shutil.rmtree(repo, ignore_errors=True)
    for name in ("tiny-llama", "single"):
        os.makedirs(os.path.join(repo, name, "1"))
        shutil.copy(gguf_path(), os.path.join(repo, name, "1", "model.gguf"))
    with open(os.path.join(repo, "single", "config.pbtxt"), "w") as f:
        f.write('backend: "llama.cpp"\n'
                'parameters { key: "parallel_sequences" value { string_value: "1" } }\n'
                'parameters { key: "context_size" value { string_value: "2048" } }\n'
                'dynamic_batching { priority_levels: 2 default_priority_level: 2 }\n')
    return repo


def call(port, method, path, body=None, headers=None):
    """(status, headers dict lower-cased, body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    h = {"Content-Type": "application/json"} if body is not None else {}
    h.update(headers or {})
    conn.request(method, path, body=json.dumps(body) if isinstance(body, dict) else body,
                 headers=h)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data


def events_of(text):
    """[(id or None, data)] of an SSE body; comments are counted apart: (events, comments)."""
    events, comments = [], 0
    for block in text.split("\n\n"):
        if not block:
            continue
        if block.startswith(":"):
            comments += 1
            continue
        eid, data = None, []
        for line in block.split("\n"):
            if line.startswith("id: "):
                eid = int(line[4:])
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((eid, "\n".join(data)))
    return events, comments


def completion(port, prompt, max_tokens, model="tiny-llama", **extra):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    body.update(extra)
    return call(port, "POST", "/v1/completions", body)


def streamed_text(events):
    text = ""
    for _, data in events:
        if data == "[DONE]":
            continue
        for c in json.loads(data)["choices"]:
            text += c.get("text", "")
    return text


class RawStream:
    """A streamed request on a socket of its own: the head, then events as they come."""

    def __init__(self, port, path, body, headers=""):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        payload = json.dumps(body).encode()
        self.sock.sendall(("POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                           "Content-Length: %d\r\n%s\r\n" % (path, len(payload), headers)).encode()
                          + payload)
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode().split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
        self.body = b""  # de-chunked

    def _recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError("closed")
        return data

    def read_events(self, n):
        """Reads until at least n events (not comments) have arrived; returns them all."""
        while True:
            events, _ = events_of(self.body.decode("utf-8", "replace"))
            if len(events) >= n:
                return events
            self._dechunk_more()

    def read_to_end(self):
        try:
            while True:
                if self._dechunk_more():
                    break
        except EOFError:
            pass
        return self.body.decode("utf-8", "replace")

    def _dechunk_more(self):
        """One chunk into self.body; True at the last chunk."""
        while b"\r\n" not in self.buf:
            self.buf += self._recv()
        size_line, rest = self.buf.split(b"\r\n", 1)
        size = int(size_line, 16)
        while len(rest) < size + 2:
            rest += self._recv()
        self.body += rest[:size]
        self.buf = rest[size + 2:]
        return size == 0

    def close(self):
        self.sock.close()


class GenerationTests(unittest.TestCase):
    port = None

    @classmethod
    def setUpClass(cls):
        cls.port = SERVER.port

    def test_models_list_and_metadata(self):
        status, _, body = call(self.port, "GET", "/v1/models")
        self.assertEqual(status, 200, body)
        ids = sorted(m["id"] for m in json.loads(body)["data"])
        self.assertEqual(ids, ["single", "tiny-llama"])
        status, _, body = call(self.port, "GET", "/v2/models/tiny-llama")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["platform"], "llama.cpp")
        # Triton's decoupled models: many responses per request. Clients that pick streaming
        # from the config (perf_analyzer, tritonclient's examples) read it here.
        status, _, body = call(self.port, "GET", "/v2/models/tiny-llama/config")
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["model_transaction_policy"], {"decoupled": True})
        # The version policy in force is written out too, as for tensor models (probe 79).
        self.assertEqual(json.loads(body)["version_policy"], {"latest": {"num_versions": 1}})
        status, _, body = call(self.port, "POST", "/v2/repository/index", {})
        self.assertIn({"name": "tiny-llama", "version": "1", "state": "READY"}, json.loads(body))

    def test_greedy_is_deterministic_and_max_tokens_is_exact(self):
        answers = []
        for _ in range(2):
            status, headers, body = completion(self.port, "The quick brown fox", 12)
            self.assertEqual(status, 200, body)
            self.assertTrue(headers.get("x-request-id"))
            answers.append(json.loads(body))
        self.assertEqual(answers[0]["choices"][0]["text"], answers[1]["choices"][0]["text"])
        self.assertEqual(answers[0]["usage"]["completion_tokens"], 12)
        self.assertEqual(answers[0]["choices"][0]["finish_reason"], "length")
        self.assertGreater(len(answers[0]["choices"][0]["text"]), 0)
        # The second one's prompt was in the KV cache (shared from the first's slot), all of it
        # but the last token, which is decoded for the first output token's logits.
        usage = answers[1]["usage"]
        self.assertEqual(usage["prompt_tokens_details"]["cached_tokens"], usage["prompt_tokens"] - 1)

    def assert_close(self, got, want):
        self.assertEqual(len(got), len(want))
        for g, w in zip(got, want):
            self.assertAlmostEqual(g, w, delta=1e-4)

    def test_completion_logprobs_in_the_legacy_layout_whole_and_streamed(self):
        status, _, body = completion(self.port, "The quick brown fox", 6, logprobs=3)
        self.assertEqual(status, 200, body)
        choice = json.loads(body)["choices"][0]
        lp = choice["logprobs"]
        self.assertEqual(choice["finish_reason"], "length")
        self.assertEqual(len(lp["tokens"]), 6)
        self.assertEqual(len(lp["token_logprobs"]), 6)
        self.assertEqual(len(lp["text_offset"]), 6)
        self.assertEqual(lp["text_offset"][0], 0)
        for token, logprob, top in zip(lp["tokens"], lp["token_logprobs"], lp["top_logprobs"]):
            self.assertLessEqual(logprob, 0)
            self.assertLessEqual(len(top), 3)  # equal texts share a key
            # Greedy: the chosen token is the likeliest.
            self.assertEqual(max(top.values()), logprob)
            self.assertIn(token, top)
        status, _, data = completion(self.port, "The quick brown fox", 6, logprobs=3, stream=True)
        self.assertEqual(status, 200, data)
        events, _ = events_of(data.decode())
        streamed = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for _, d in events:
            if d == "[DONE]":
                continue
            for c in json.loads(d)["choices"]:
                for key in streamed:
                    streamed[key] += (c["logprobs"] or {}).get(key, [])
        # The same tokens; their log-probabilities equal to float precision only: a prompt read
        # again from another slot's cache is decoded in a batch of another shape, and llama.cpp's
        # sums run in another order.
        self.assertEqual(streamed["tokens"], lp["tokens"])
        self.assertEqual(streamed["text_offset"], lp["text_offset"])
        self.assert_close(streamed["token_logprobs"], lp["token_logprobs"])
        self.assertEqual([sorted(t) for t in streamed["top_logprobs"]],
                         [sorted(t) for t in lp["top_logprobs"]])
        for got, want in zip(streamed["top_logprobs"], lp["top_logprobs"]):
            self.assert_close([got[k] for k in sorted(got)], [want[k] for k in sorted(want)])
        # logprobs 0: the chosen tokens, null alternatives; not sent: null.
        _, _, body = completion(self.port, "The quick brown fox", 3, logprobs=0)
        lp0 = json.loads(body)["choices"][0]["logprobs"]
        self.assertEqual(lp0["top_logprobs"], [None, None, None])
        self.assert_close(lp0["token_logprobs"], lp["token_logprobs"][:3])
        _, _, body = completion(self.port, "The quick brown fox", 3)
        self.assertIsNone(json.loads(body)["choices"][0]["logprobs"])

    def test_chat_stream_events_are_numbered_and_match_the_answer(self):
        body = {"model": "tiny-llama", "messages": [{"role": "user", "content": "Hello"}],
                "max_tokens": 10, "temperature": 0}
        status, _, plain = call(self.port, "POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, plain)
        expected = json.loads(plain)["choices"][0]["message"]["content"]
        body.update(stream=True, stream_options={"include_usage": True})
        status, headers, data = call(self.port, "POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, data)
        self.assertEqual(headers["content-type"], "text/event-stream")
        self.assertEqual(len(headers["x-request-id"]), 32)
        events, _ = events_of(data.decode())
        self.assertEqual([e[0] for e in events], list(range(1, len(events) + 1)))
        self.assertEqual(events[-1][1], "[DONE]")
        usage = json.loads(events[-2][1])["usage"]
        self.assertEqual(usage["completion_tokens"], 10)
        text = "".join(json.loads(d)["choices"][0]["delta"].get("content", "")
                       for _, d in events[:-2] if json.loads(d)["choices"])
        self.assertEqual(text, expected)

    def test_a_messages_control_token_text_is_read_as_text(self):
        # "</s>" is Llama-2's end-of-sequence token. In a message it is text (OpenAI's reading):
        # spelled out in several tokens each, where the same prompt sent whole as a completion
        # (whose control tokens are the client's to write) has one token for each.
        content = "hi </s></s></s> there"
        body = {"model": "tiny-llama", "messages": [{"role": "user", "content": content}],
                "max_tokens": 1, "temperature": 0}
        status, _, chat = call(self.port, "POST", "/v1/chat/completions", body)
        self.assertEqual(status, 200, chat)
        rendered = f"<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n"  # ChatML
        status, _, whole = completion(self.port, rendered, 1)
        self.assertEqual(status, 200, whole)
        self.assertGreater(json.loads(chat)["usage"]["prompt_tokens"],
                           json.loads(whole)["usage"]["prompt_tokens"])

    def test_a_missing_version_asked_for_by_header_is_named_and_a_nul_refused(self):
        body = {"model": "tiny-llama", "prompt": "x", "max_tokens": 1}
        status, _, answer = call(self.port, "POST", "/v1/completions", body,
                                 {"X-Harrier-Model-Version": "7"})
        self.assertEqual(status, 404, answer)
        error = json.loads(answer)["error"]
        self.assertIn("version 7", error["message"])  # the model exists; the version does not
        self.assertEqual(error["code"], "model_not_found")
        # llama.cpp's templates stop at a NUL: the rest of the content would be lost unseen.
        body = {"model": "tiny-llama", "max_tokens": 1,
                "messages": [{"role": "system", "content": "keep\u0000these rules"}]}
        status, _, answer = call(self.port, "POST", "/v1/chat/completions", json.dumps(body))
        self.assertEqual(status, 400, answer)
        error = json.loads(answer)["error"]
        self.assertIn("NUL", error["message"])
        self.assertEqual(error["param"], "messages")

    def test_sixteen_concurrent_streams_each_equal_their_single_run(self):
        prompts = ["Story number %d begins" % i for i in range(16)]
        single = {}
        for p in prompts:
            status, _, body = completion(self.port, p, 16)
            self.assertEqual(status, 200, body)
            single[p] = json.loads(body)["choices"][0]["text"]
        results = {}

        def run(p):
            status, _, data = completion(self.port, p, 16, stream=True)
            results[p] = (status, streamed_text(events_of(data.decode())[0]))

        threads = [threading.Thread(target=run, args=(p,)) for p in prompts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        for p in prompts:
            self.assertEqual(results[p][0], 200)
            self.assertEqual(results[p][1], single[p], p)

    def test_a_client_that_disconnects_frees_its_sequence_at_once(self):
        # The time a long generation takes on the one-sequence model, alone (shorter under
        # a sanitizer, tools/sanitized_run.sh: ThreadSanitizer slows each step tenfold).
        tokens = 150 if harness.SANITIZER else 1500
        start = time.monotonic()
        status, _, body = completion(self.port, "Long", tokens, model="single")
        full = time.monotonic() - start
        self.assertEqual(status, 200, body)
        self.assertEqual(json.loads(body)["usage"]["completion_tokens"], tokens)
        # The same generation, streamed; the client leaves after two events.
        s = RawStream(self.port, "/v1/completions",
                      {"model": "single", "prompt": "Long", "max_tokens": tokens, "stream": True,
                       "temperature": 0})
        s.read_events(2)
        s.close()
        start = time.monotonic()
        status, _, body = completion(self.port, "Next", 1, model="single")
        waited = time.monotonic() - start
        self.assertEqual(status, 200, body)
        if ARGS.verbose:
            print("%d tokens alone: %.3f s; next request after a disconnect: %.3f s"
                  % (tokens, full, waited))
        self.assertLess(waited, full / 3, "the abandoned generation kept its sequence "
                        "(%.3f s for one token, %.3f s for the whole generation)" % (waited, full))

    def test_resume_after_the_end_gives_exactly_the_events_after_the_id(self):
        status, headers, data = completion(self.port, "Resume me", 8, stream=True)
        self.assertEqual(status, 200)
        events, _ = events_of(data.decode())
        stream_id = headers["x-request-id"]
        status, _, again = call(self.port, "GET", "/v1/streams/" + stream_id,
                                headers={"Last-Event-ID": "3"})
        self.assertEqual(status, 200, again)
        self.assertEqual(events_of(again.decode())[0], events[3:])
        status, _, body = call(self.port, "GET", "/v1/streams/" + "0" * 32)
        self.assertEqual(status, 404, body)
        self.assertIn("error", json.loads(body))

    def test_a_broken_stream_resumes_to_its_cut_short_end_at_default_flags(self):
        """No grace (the default): the generation stops when its client leaves, and a client
        that comes back gets the events after its last one, numbered on without a gap, up to
        the error event that says the stream was cut short (README.md, docs/generation.md)."""
        body = {"model": "tiny-llama", "prompt": "Cut me short", "max_tokens": 1000,
                "stream": True, "temperature": 0}
        s = RawStream(self.port, "/v1/completions", body)
        stream_id = s.headers["x-request-id"]
        first = s.read_events(3)[:3]
        s.close()
        # Those stored, then the live rest until the stream ends (its sequence stopped).
        status, _, rest = call(self.port, "GET", "/v1/streams/" + stream_id,
                               headers={"Last-Event-ID": str(first[-1][0])})
        self.assertEqual(status, 200, rest)
        events = first + events_of(rest.decode())[0]
        self.assertEqual([e[0] for e in events], list(range(1, len(events) + 1)),
                         "an event was lost or sent twice")
        self.assertLess(len(events), 1000, "the generation ran on without its client")
        if events[-1][1] == "[DONE]":  # the API's own end follows the error event
            events.pop()
        self.assertIn("error", json.loads(events[-1][1]), events[-3:])

    def test_the_readmes_curl_example_streams(self):
        """README.md's example as written: curl -d (a form content type), stream: true."""
        r = subprocess.run(
            ["curl", "-sS", "--max-time", "60", "127.0.0.1:%d/v1/chat/completions" % self.port,
             "-d", '{"model": "tiny-llama", "max_tokens": 16, '
                   '"messages": [{"role": "user", "content": "Hello"}], "stream": true}'],
            capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stderr)
        events, _ = events_of(r.stdout)
        self.assertGreater(len(events), 2, r.stdout[:500])
        self.assertEqual(events[-1][1], "[DONE]")
        chunks = [json.loads(data) for _, data in events[:-1]]
        self.assertEqual(chunks[0]["object"], "chat.completion.chunk")
        self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant")
        self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")

    def test_a_waiting_stream_gets_heartbeats(self):
        busy = threading.Thread(target=completion, args=(self.port, "Busy", 3000),
                                kwargs={"model": "single"})
        busy.start()
        time.sleep(0.05)
        s = RawStream(self.port, "/v1/completions",
                      {"model": "single", "prompt": "Wait", "max_tokens": 2, "stream": True})
        self.assertEqual(s.status, 200)
        text = s.read_to_end()
        s.close()
        busy.join(120)
        events, comments = events_of(text)
        self.assertEqual(events[-1][1], "[DONE]")
        self.assertGreater(comments, 0, "no ': ping' while the stream waited: %r" % text[:300])

    def test_http2_streaming(self):
        body_file = os.path.join(ARGS.work_dir, "h2_body.json")
        with open(body_file, "w") as f:
            json.dump({"model": "tiny-llama", "prompt": "Over HTTP/2", "max_tokens": 48,
                       "stream": True, "temperature": 0}, f)
        out = subprocess.run(["nghttp", "-v", "-d", body_file, "-H", "content-type: application/json",
                              "http://127.0.0.1:%d/v1/completions" % self.port],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("data: [DONE]", out.stdout)
        # Events go out as they come; those that come while the transport is still sending (or
        # within one decode step) share a DATA frame. 48 tokens take long enough that even a
        # loaded machine's transport cannot lag behind all of them.
        data_frames = out.stdout.count("recv DATA frame")
        self.assertGreaterEqual(data_frames, 3, "events were not sent as they came")
        _, _, plain = completion(self.port, "Over HTTP/2", 48)
        text = json.loads(plain)["choices"][0]["text"]
        # The body without nghttp's frame log (lines from "[  0.012] recv ..." and their indented
        # continuations), which -v interleaves with it: a log line before a ": ping" would
        # otherwise make the heartbeat's block look like an event without data.
        body = "\n".join(line for line in out.stdout.split("\n")
                         if not line.startswith("[") and not line.startswith(" "))
        body = body[body.find("id: 1"):]
        self.assertEqual(streamed_text(events_of(body[:body.find("data: [DONE]") + 12] + "\n\n")[0]),
                         text)

    def test_the_access_line_of_a_generation_has_its_tokens_and_first_token_time(self):
        _, headers, _ = completion(self.port, "Logged", 3, stream=True)
        request_id = headers["x-request-id"]
        pattern = re.compile(r"request_id=%s .*target=/v1/completions status=200 .*"
                             r"prompt_tokens=(\d+) completion_tokens=3 ttft_us=(\d+) total_us=\d+"
                             % request_id)
        found = []
        deadline = time.monotonic() + 10  # the access log writes in the background
        while not found and time.monotonic() < deadline:
            found = pattern.findall(SERVER.log_text())
            time.sleep(0.05)
        self.assertTrue(found, "no access line with the token counts for " + request_id)
        self.assertGreater(int(found[0][0]), 0)
        self.assertGreater(int(found[0][1]), 0)

    def test_triton_generate_and_generate_stream(self):
        status, _, body = call(self.port, "POST", "/v2/models/tiny-llama/generate",
                               {"text_input": "Triton says", "parameters": {"max_tokens": 5,
                                                                            "temperature": 0}})
        self.assertEqual(status, 200, body)
        answer = json.loads(body)
        self.assertEqual(answer["model_name"], "tiny-llama")
        _, _, plain = completion(self.port, "Triton says", 5)
        self.assertEqual(answer["text_output"], json.loads(plain)["choices"][0]["text"])
        status, headers, data = call(self.port, "POST", "/v2/models/tiny-llama/generate_stream",
                                     {"text_input": "Triton says",
                                      "parameters": {"max_tokens": 5, "temperature": 0}})
        self.assertEqual(status, 200, data)
        events, _ = events_of(data.decode())
        self.assertEqual("".join(json.loads(d)["text_output"] for _, d in events),
                         answer["text_output"])

    def test_generation_metrics(self):
        completion(self.port, "Count me", 5)
        status, _, body = call(SERVER.metrics_port, "GET", "/metrics")
        self.assertEqual(status, 200)
        text = body.decode()
        labels = '{model="tiny-llama",version="1"}'

        def value(name, lab=labels):
            for line in text.splitlines():
                if line.startswith(name + lab + " "):
                    return float(line.split()[-1])
            self.fail("no %s%s in /metrics" % (name, lab))

        self.assertGreaterEqual(value("harrier_time_to_first_token_seconds_count"), 1)
        self.assertGreaterEqual(value("harrier_time_per_output_token_seconds_count"), 1)
        self.assertGreaterEqual(value("harrier_generated_tokens_total"), 5)
        self.assertGreaterEqual(value("harrier_prompt_tokens_total"), 1)
        self.assertEqual(value("harrier_kv_cache_cells",
                               '{model="tiny-llama",version="1",state="total"}'), 4096)
        # Of the cells used, those free sequences keep as a prefix cache: what "used" holds when
        # nothing generates (probe 34 read it as stuck).
        cached = value("harrier_kv_cache_cells", '{model="tiny-llama",version="1",state="cached"}')
        used = value("harrier_kv_cache_cells", '{model="tiny-llama",version="1",state="used"}')
        self.assertGreater(cached, 0)
        self.assertLessEqual(cached, used)
        self.assertGreaterEqual(value("harrier_request_success_total"), 1)
        # Triton's nv_inference_* names break promtool's naming lints on purpose (metrics_test.py
        # checks them); Harrier's own families, the generation ones among them, break none.
        harrier_only = "\n".join(line for line in text.splitlines()
                                  if "nv_inference_" not in line) + "\n"
        checked = subprocess.run(["/usr/bin/promtool", "check", "metrics"],
                                 input=harrier_only.encode(), capture_output=True, timeout=60)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)

    def test_bad_input_is_refused_in_openais_shape(self):
        status, _, body = completion(self.port, "x", 4, model="nope")
        self.assertEqual(status, 404)
        self.assertEqual(json.loads(body)["error"]["code"], "model_not_found")
        status, _, body = call(self.port, "POST", "/v1/completions", b"{not json")
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["type"], "invalid_request_error")
        status, _, body = completion(self.port, "x", -4)
        self.assertEqual(status, 400)
        self.assertEqual(json.loads(body)["error"]["param"], "max_tokens")
        status, _, body = completion(self.port, "word " * 5000, 4)
        self.assertEqual(status, 400, body)
        error = json.loads(body)["error"]
        self.assertIn("context", error["message"])
        # OpenAI's code for it, and the field that holds the prompt.
        self.assertEqual(error["code"], "context_length_exceeded", error)
        self.assertEqual(error["param"], "prompt", error)
        status, _, body = call(self.port, "POST", "/v1/chat/completions",
                               {"model": "tiny-llama", "max_tokens": 1,
                                "messages": [{"role": "user", "content": "word " * 5000}]})
        self.assertEqual(status, 400, body)
        self.assertEqual(json.loads(body)["error"]["param"], "messages", body)
        status, _, body = call(self.port, "POST", "/v2/models/tiny-llama/infer",
                               {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32",
                                            "data": [1]}]})
        self.assertEqual(status, 400, body)
        self.assertIn("/v1/chat/completions", json.loads(body)["error"])
        # Refused by the transport before the handler saw it, still in OpenAI's shape, which its
        # SDKs read: a body over --max-body-bytes, and a request line longer than the header
        # limit (probe 31).
        for request, status, says in (
                (b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: "
                 b"application/json\r\nContent-Length: 99999999999\r\n\r\n", b"413",
                 "maximum allowed"),
                (b"GET /v1/models?x=" + b"x" * (128 << 10) + b" HTTP/1.1\r\nHost: t\r\n\r\n",
                 b"431", "larger than the server's limit")):
            with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
                raw.sendall(request)
                answer = b""
                while b"}}" not in answer:
                    chunk = raw.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            self.assertTrue(head.startswith(b"HTTP/1.1 " + status), answer)
            error = json.loads(body)["error"]
            self.assertEqual(error["type"], "invalid_request_error", error)
            self.assertIn(says, error["message"])

    def test_a_prompt_too_long_to_fit_is_refused_before_it_is_read_through(self):
        # llama.cpp's tokenizer is quadratic over bytes it spells out one by one (newlines in
        # Llama's vocabulary): 1 MiB of them took 57 s on an I/O thread before this check.
        started = time.monotonic()
        status, _, body = completion(self.port, "\n" * (1 << 20), 1)
        self.assertEqual(status, 400, body)
        self.assertIn("bytes: more than the model's context of",
                      json.loads(body)["error"]["message"])
        self.assertLess(time.monotonic() - started, 5)
        # Under that bound but over the context in tokens, streamed: read off the I/O thread,
        # still refused as a plain error, not a stream.
        status, headers, body = completion(self.port, "\n" * 24000, 1, stream=True)
        self.assertEqual(status, 400, body)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertIn("context", json.loads(body)["error"]["message"])
        status, _, _ = call(self.port, "GET", "/v2/health/ready")
        self.assertEqual(status, 200)


class OwnServerTests(unittest.TestCase):
    """Tests against a server of their own, on the suite's repository with the class's FLAGS,
    logging to LOG in the work directory; its exit status on SIGTERM must be 0."""
    FLAGS = []
    LOG = "own.log"

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Harrier(ARGS.harrier, SERVER.repo,
                                     os.path.join(ARGS.work_dir, cls.LOG), cls.FLAGS)

    @classmethod
    def tearDownClass(cls):
        rc = cls.server.terminate()
        if rc != 0:
            raise AssertionError("%s exited with %s on SIGTERM (expected 0)" % (cls.LOG, rc))


class GraceTests(OwnServerTests):
    """A server of its own with --generation-disconnect-grace-secs 10."""
    FLAGS = ["--generation-disconnect-grace-secs", "10"]
    LOG = "grace.log"

    def test_a_client_that_reconnects_within_the_grace_loses_nothing(self):
        port = self.server.port
        body = {"model": "tiny-llama", "prompt": "Keep going", "max_tokens": 300,
                "stream": True, "temperature": 0}
        s = RawStream(port, "/v1/completions", body)
        stream_id = s.headers["x-request-id"]
        first = s.read_events(3)[:3]
        s.close()
        status, _, rest = call(port, "GET", "/v1/streams/" + stream_id,
                               headers={"Last-Event-ID": str(first[-1][0])})
        self.assertEqual(status, 200, rest)
        events = first + events_of(rest.decode())[0]
        self.assertEqual([e[0] for e in events], list(range(1, len(events) + 1)),
                         "an event was lost or sent twice")
        self.assertEqual(events[-1][1], "[DONE]")
        _, _, plain = call(port, "POST", "/v1/completions", dict(body, stream=False))
        self.assertEqual(streamed_text(events), json.loads(plain)["choices"][0]["text"])


class KeyTests(OwnServerTests):
    """A server of its own with API keys: a stream is resumed only with the key that opened it."""
    KEYS = {"alice": "alice-3f2e1d0c9b8a7f6e5d4c", "bob": "bob-0a1b2c3d4e5f60718293"}
    LOG = "keys.log"

    @classmethod
    def setUpClass(cls):
        path = os.path.join(ARGS.work_dir, "keys.json")
        with open(path, "w") as f:
            json.dump({"keys": [{"id": name, "sha256": hashlib.sha256(key.encode()).hexdigest(),
                                 "scopes": ["inference"]} for name, key in cls.KEYS.items()]}, f)
        cls.FLAGS = ["--api-key-file", path]
        super().setUpClass()

    def test_only_the_key_that_opened_a_stream_resumes_it(self):
        port = self.server.port
        alice = {"Authorization": "Bearer " + self.KEYS["alice"]}
        bob = {"Authorization": "Bearer " + self.KEYS["bob"]}
        status, headers, data = call(port, "POST", "/v1/completions",
                                     {"model": "tiny-llama", "prompt": "Mine", "max_tokens": 4,
                                      "stream": True}, alice)
        self.assertEqual(status, 200, data)
        stream_id = headers["x-request-id"]
        # Another key with the same scope and the id: as unknown as a stream that never was.
        status, _, body = call(port, "GET", "/v1/streams/" + stream_id, headers=bob)
        self.assertEqual(status, 404, body)
        status, _, unknown = call(port, "GET", "/v1/streams/" + "0" * 32, headers=bob)
        self.assertEqual(status, 404, unknown)
        self.assertEqual(json.loads(body)["error"]["message"].replace(stream_id, "0" * 32),
                         json.loads(unknown)["error"]["message"])
        status, _, again = call(port, "GET", "/v1/streams/" + stream_id,
                                headers=dict(alice, **{"Last-Event-ID": "1"}))
        self.assertEqual(status, 200, again)
        self.assertEqual(events_of(again.decode())[0], events_of(data.decode())[0][1:])


class AdmissionTests(OwnServerTests):
    """A server of its own with a per-client rate limit: generations are admitted like any
    request, and wait for a sequence by priority."""
    FLAGS = ["--rate-limit-per-client", "0.01:2"]
    LOG = "admission.log"

    def test_a_client_over_its_rate_limit_gets_429_with_retry_after(self):
        port = self.server.port
        for _ in range(2):
            status, _, body = call(port, "POST", "/v1/completions",
                                   {"model": "tiny-llama", "prompt": "x", "max_tokens": 1},
                                   {"X-Client-Id": "limited"})
            self.assertEqual(status, 200, body)
        status, headers, body = call(port, "POST", "/v1/completions",
                                     {"model": "tiny-llama", "prompt": "x", "max_tokens": 1},
                                     {"X-Client-Id": "limited"})
        self.assertEqual(status, 429, body)
        self.assertGreaterEqual(int(headers["retry-after"]), 1)
        error = json.loads(body)["error"]
        self.assertIn("rate limit", error["message"])
        status, _, body = call(port, "POST", "/v2/models/tiny-llama/generate",
                               {"text_input": "x", "max_tokens": 1}, {"X-Client-Id": "limited"})
        self.assertEqual(status, 429, body)
        self.assertIn("rate limit", json.loads(body)["error"])
        status, _, body = call(port, "POST", "/v1/completions",
                               {"model": "tiny-llama", "prompt": "x", "max_tokens": 1},
                               {"X-Client-Id": "another"})
        self.assertEqual(status, 200, body)
        _, _, metrics = call(self.server.metrics_port, "GET", "/metrics")
        self.assertRegex(metrics.decode(), r'harrier_request_failure_total\{[^}]*model="tiny-llama"'
                         r'[^}]*reason="rejected"[^}]*\} 2')

    def test_waiting_generations_get_the_sequence_most_urgent_first(self):
        port = self.server.port
        # The one sequence of "single" is busy with a stream until the blocker leaves.
        blocker = RawStream(port, "/v1/completions",
                            {"model": "single", "prompt": "Hold", "max_tokens": 3000,
                             "stream": True, "temperature": 0}, "X-Client-Id: blocker\r\n")
        blocker.read_events(1)
        finished = []
        lock = threading.Lock()

        def send(name, priority):
            status, _, body = call(port, "POST", "/v1/completions",
                                   {"model": "single", "prompt": "Waiting " + name,
                                    "max_tokens": 40, "temperature": 0, "priority": priority},
                                   {"X-Client-Id": name})
            with lock:
                finished.append((name, status))

        threads = []
        for name, priority in (("default", 0), ("low", 2), ("urgent", 1)):
            t = threading.Thread(target=send, args=(name, priority))
            t.start()
            threads.append(t)
            time.sleep(0.2)  # each waits behind the blocker before the next arrives
        blocker.close()
        for t in threads:
            t.join(120)
        self.assertEqual([n for n, _ in finished], ["urgent", "default", "low"], finished)
        self.assertTrue(all(s == 200 for _, s in finished), finished)



def gguf_repository(directory, model, parameters):
    """A repository (in the work directory, made once) of the tiny GGUF as `model`, with the
    llama.cpp `parameters` (name -> value) in its config."""
    repo = os.path.join(ARGS.work_dir, directory)
    if not os.path.exists(os.path.join(repo, model, "config.pbtxt")):
        os.makedirs(os.path.join(repo, model, "1"), exist_ok=True)
        shutil.copy(gguf_path(), os.path.join(repo, model, "1", "model.gguf"))
        with open(os.path.join(repo, model, "config.pbtxt"), "w") as f:
            f.write('backend: "llama.cpp"\n' + "".join(
                'parameters { key: "%s" value { string_value: "%s" } }\n' % (k, v)
                for k, v in parameters.items()))
    return repo


def long_repository():
    """A repository of "long": one sequence and a context of 131072 tokens, so that a
    generation runs for seconds (the tiny model generates thousands of tokens a second)."""
    return gguf_repository("long-repo", "long",
                           {"parallel_sequences": "1", "context_size": "131072"})


class UnloadTests(OwnServerTests):
    """A server of its own in explicit mode, on a repository of its own: "long", one sequence
    and a context of 131072 tokens, so that a generation runs for seconds. An unload ends the
    generations that wait for the sequence at once, with its reason; the running one goes on."""
    LOG = "unload.log"

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Harrier(ARGS.harrier, long_repository(),
                                     os.path.join(ARGS.work_dir, cls.LOG),
                                     ["--model-control-mode", "explicit", "--load-model", "long"])

    def test_an_unload_ends_waiting_generations_at_once_and_the_running_one_goes_on(self):
        port = self.server.port
        # The one sequence is busy for seconds; the second stream waits for it.
        running = RawStream(port, "/v1/completions",
                            {"model": "long", "prompt": "Hold", "max_tokens": 130000,
                             "stream": True, "temperature": 0})
        running.read_events(1)
        waiting = RawStream(port, "/v1/completions",
                            {"model": "long", "prompt": "Wait", "max_tokens": 4,
                             "stream": True, "temperature": 0})
        self.assertEqual((running.status, waiting.status), (200, 200))
        status, _, body = call(port, "POST", "/v2/repository/models/long/unload", {})
        self.assertEqual(status, 200, body)
        # Before, it waited for the running one or the 30 s bound, whichever came first.
        waiting.sock.settimeout(10)
        text = waiting.read_to_end()
        events = events_of(text)[0]
        self.assertEqual(json.loads(events[0][1])["error"]["message"],
                         "model 'long' version 1 was unloaded", text)
        # The running one still streams after the unload, then the client leaves.
        seen = len(running.read_events(1))
        self.assertGreater(len(running.read_events(seen + 3)), seen)
        running.close()
        deadline = time.time() + 30
        while time.time() < deadline:
            _, _, index = call(port, "POST", "/v2/repository/index", {})
            rows = [r for r in json.loads(index) if r["name"] == "long"]
            if rows and rows[0].get("state") == "UNAVAILABLE":
                break
            time.sleep(0.1)
        self.assertEqual(rows[0].get("reason"), "unloaded", rows)



class GrpcSlowReaderTests(OwnServerTests):
    """A server of its own on the "long" repository with a 4 KiB stream buffer: a gRPC client
    that reads nothing has its generation stopped once more than that waits for it, as an SSE
    client has (before, it went on for nobody until the 30 s write timeout, every response
    queued)."""
    LOG = "grpc-slow.log"

    @classmethod
    def setUpClass(cls):
        cls.server = harness.Harrier(ARGS.harrier, long_repository(),
                                     os.path.join(ARGS.work_dir, cls.LOG),
                                     ["--generation-stream-buffer-bytes", "4096"])

    def gauge(self, family):
        _, _, metrics = call(self.server.metrics_port, "GET", "/metrics")
        m = re.search(r'^%s\{[^}]*model="long"[^}]*\} (\S+)$' % family, metrics.decode(), re.M)
        return float(m.group(1)) if m else 0.0

    def test_a_grpc_client_that_reads_nothing_has_its_generation_stopped(self):
        sys.path.insert(0, os.path.join(os.path.abspath(ARGS.source_dir), "tools"))
        import h2_attacks as h2  # Debian's hpack: run with /usr/bin/python3
        prompt = b"Once upon a time"
        text_input = (h2.pb_bytes(1, b"text_input") + h2.pb_bytes(2, b"BYTES")
                      + h2.pb_bytes(3, h2.varint(1)))
        param = lambda key, value: h2.pb_bytes(4, h2.pb_bytes(1, key) + h2.pb_bytes(2, value))
        request = (h2.pb_bytes(1, b"long") + h2.pb_bytes(3, b"r1")
                   + param(b"max_tokens", h2.varint(2 << 3) + h2.varint(130000))
                   + param(b"temperature", bytes([4 << 3 | 1]) + struct.pack("<d", 0.0))
                   + h2.pb_bytes(5, text_input)
                   + h2.pb_bytes(7, struct.pack("<I", len(prompt)) + prompt))
        # Reads nothing, and gives the server's streams no window at all (SETTINGS
        # INITIAL_WINDOW_SIZE 0): every response waits from the first, whatever the kernel's
        # buffers and the machine's speed.
        c = h2.Conn(self.server.grpc_port, read=False, settings=struct.pack(">HI", 4, 0))
        try:
            c.send(h2.frame(h2.HEADERS, h2.END_HEADERS, 1,
                            c.encoder.encode(h2.call_headers("ModelStreamInfer", c.authority))))
            c.send(h2.frame(h2.DATA, 0, 1, h2.grpc_message(request)))
            # 4 KiB of responses: tens of tokens (it may end before a scrape sees it run), well
            # inside the 30 s write timeout that was the only bound before; unbounded, the
            # generation runs on to its 130000 tokens.
            generated = lambda: self.gauge("harrier_generated_tokens_total")
            active = lambda: self.gauge("harrier_generation_active_sequences")
            deadline = time.time() + 20
            while time.time() < deadline and not (generated() > 0 and active() == 0):
                time.sleep(0.1)
            self.assertGreater(generated(), 0, "the generation never started")
            self.assertEqual(active(), 0, "still generating for a client that reads nothing")
            stopped_at = generated()
            time.sleep(0.5)
            self.assertEqual(generated(), stopped_at)
            self.assertLess(stopped_at, 100000)
        finally:
            c.close()


class OneCoreTests(OwnServerTests):
    """A server of its own pinned to one core (taskset), serving "pinned" with `threads` 2: two
    ggml threads that meet at a spinning barrier after every operation on one core, the way a
    busy machine's other work makes them meet. The engine gives its steps one thread once it
    sees its thread kept off the core (thread_governor.h); before, every token waited out time
    slices at each barrier."""
    LOG = "one-core.log"

    @classmethod
    def setUpClass(cls):
        repo = gguf_repository("one-core-repo", "pinned",
                               {"parallel_sequences": "1", "threads": "2"})
        core = str(min(os.sched_getaffinity(0)))
        cls.server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, cls.LOG),
                                     prefix=("taskset", "-c", core))

    def compute_threads(self):
        _, _, metrics = call(self.server.metrics_port, "GET", "/metrics")
        m = re.search(r'^harrier_generation_compute_threads\{[^}]*model="pinned"[^}]*\} (\S+)$',
                      metrics.decode(), re.M)
        self.assertIsNotNone(m, "no harrier_generation_compute_threads for pinned")
        return float(m.group(1))

    def test_two_threads_on_one_core_are_given_one(self):
        seen = []
        # A try of two threads again (a window of 25 ms each second or more) may be under way
        # when a generation ends: three chances to see the count the engine settles on.
        for _ in range(3):
            status, _, body = call(self.server.port, "POST", "/v1/completions",
                                   {"model": "pinned", "prompt": "Once", "max_tokens": 300,
                                    "temperature": 0})
            self.assertEqual(status, 200, body)
            seen.append(self.compute_threads())
            if seen[-1] == 1:
                break
        self.assertEqual(seen[-1], 1, seen)


class ExitTimeoutTests(unittest.TestCase):
    """A server of its own with --exit-timeout-secs 1 and a model whose generations run for
    seconds (one sequence, a 16k context), stopped while streams run."""

    def test_streams_running_at_the_exit_timeout_end_with_an_error_event_and_their_end(self):
        # They were cut mid-body when the transport gave up on them: a client could not tell a
        # shutdown from a network fault (probe 44).
        repo = os.path.join(ARGS.work_dir, "repo-exit")
        shutil.rmtree(repo, ignore_errors=True)
        os.makedirs(os.path.join(repo, "long", "1"))
        shutil.copy(gguf_path(), os.path.join(repo, "long", "1", "model.gguf"))
        with open(os.path.join(repo, "long", "config.pbtxt"), "w") as f:
            f.write('backend: "llama.cpp"\n'
                    'parameters { key: "parallel_sequences" value { string_value: "2" } }\n'
                    'parameters { key: "context_size" value { string_value: "32768" } }\n')
        server = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "exit.log"),
                                 ["--exit-timeout-secs", "1"])
        try:
            body = {"model": "long", "prompt": "Keep going", "max_tokens": 16000, "stream": True,
                    "temperature": 0}
            streams = [RawStream(server.port, "/v1/completions", body) for _ in range(2)]
            for s in streams:
                s.read_events(2)
            started = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            for s in streams:
                ended = False
                try:
                    while not ended:
                        ended = s._dechunk_more()
                except EOFError:
                    pass
                text = s.body.decode("utf-8", "replace")
                self.assertTrue(ended, "cut before its last chunk: " + text[-500:])
                events, _ = events_of(text)
                self.assertEqual(events[-1][1], "[DONE]")
                error = json.loads(events[-2][1])["error"]
                self.assertIn("exit timeout (--exit-timeout-secs 1) ended the generation",
                              error["message"])
                self.assertEqual(error["type"], "server_error")
            self.assertEqual(server.proc.wait(30), 0)
            # Ended at three quarters of the timeout, not at its end nor after it.
            self.assertLess(time.monotonic() - started, 5)
            self.assertRegex(server.log_text(), r"ending [12] generation\(s\) still running")
        finally:
            server.terminate()


def main():
    global ARGS, SERVER
    ARGS = harness.parse_args(__doc__)
    if not os.path.exists(gguf_path()):
        print("setup failed: no %s" % gguf_path())
        print("0 passed, 1 failed")
        return 1
    repo = make_repository()

    def start():
        global SERVER
        SERVER = harness.Harrier(ARGS.harrier, repo, os.path.join(ARGS.work_dir, "harrier.log"),
                                 ["--generation-heartbeat-secs", "0.05", "--access-log", "on"])
        SERVER.repo = repo
        return SERVER

    loader = unittest.TestLoader()
    suite = unittest.TestSuite([loader.loadTestsFromTestCase(GenerationTests),
                                loader.loadTestsFromTestCase(GraceTests),
                                loader.loadTestsFromTestCase(AdmissionTests),
                                loader.loadTestsFromTestCase(KeyTests),
                                loader.loadTestsFromTestCase(UnloadTests),
                                loader.loadTestsFromTestCase(GrpcSlowReaderTests),
                                loader.loadTestsFromTestCase(OneCoreTests),
                                loader.loadTestsFromTestCase(ExitTimeoutTests)])
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
