#!/usr/bin/python3
"""Harrier phones nobody and leaves no files: ONNX Runtime's telemetry is off.

usage: /usr/bin/python3 tests/integration/telemetry_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Runs the real binary under `strace -f` on the example models, with HOME and TMPDIR pointing at
fresh empty directories, sends inferences, keeps it up past the moment ONNX Runtime's telemetry
uploader first resolves its collector (about 10 s after start), stops it with SIGTERM, and
checks that the process (every thread) made no connect() except to its own loopback listeners,
created no file anywhere, and left HOME, TMPDIR and /tmp without ONNX Runtime's files
(~/.cache/Microsoft, mat-debug-<pid>.log). Without ptrace (a container that forbids it) the
strace checks are skipped and the file checks still run: the one skip harness.ALLOWED_SKIPS
lets pass. Python stdlib only; needs strace (tools/deps.sh): without it, or when strace fails
for any reason but "Operation not permitted", the suite fails. The last line is
"N passed, N failed".
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks, and the suite runner

ARGS = None
RUN = None
# ONNX Runtime's uploader first resolves its collector's name about 10 s after the environment
# is created; the server stays up longer than that so that the connect() check can catch it.
SERVE_SECONDS = 15
# System calls that reach out or create a file.
TRACED = ("connect,open,openat,openat2,creat,mkdir,mkdirat,rename,renameat,renameat2,link,"
          "linkat,symlink,symlinkat")


def strace_works():
    """True when strace traces a child here, False when this machine forbids ptrace (a
    container's seccomp or Yama policy: EPERM). Raises when strace is missing (tools/deps.sh
    installs it) or fails otherwise: a broken set-up fails the suite, it does not skip."""
    if shutil.which("strace") is None:
        raise RuntimeError("strace is not installed (tools/deps.sh installs it)")
    done = subprocess.run(["strace", "-f", "-o", os.devnull, "/bin/true"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          check=False)
    if done.returncode == 0:
        return True
    if "Operation not permitted" in done.stderr:
        return False
    raise RuntimeError("strace -f /bin/true exited %s: %s" % (done.returncode, done.stderr))


def children_of(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


class TracedHarrier(harness.Harrier):
    """harness.Harrier whose process may be strace: stopping signals harrier itself (strace
    ignores SIGTERM while it traces), and a harrier that outlives strace is killed."""

    def harrier_pid(self):
        kids = children_of(self.proc.pid)
        return kids[0] if kids else self.proc.pid

    def terminate(self):
        pid = self.harrier_pid()
        if self.proc.poll() is None:
            os.kill(pid, signal.SIGTERM)
        rc = super().terminate()  # waits (strace exits with harrier's status), kills after 60 s
        if pid != self.proc.pid:
            try:
                os.kill(pid, signal.SIGKILL)  # only if strace was killed and harrier lives on
            except ProcessLookupError:
                pass
        return rc


class Run:
    """One run: the server's pid and ports, its exit status, and what strace saw."""

    def __init__(self, traced):
        self.traced = traced
        self.work = ARGS.work_dir
        self.home = os.path.join(self.work, "home")
        self.tmpdir = os.path.join(self.work, "tmp")
        for d in (self.home, self.tmpdir):
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
        self.strace_path = os.path.join(self.work, "strace.txt")
        self.log_path = os.path.join(self.work, "telemetry-harrier.log")
        self.tmp_before = set(os.listdir("/tmp"))
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("XDG_") and not k.startswith("ORT_")}
        env.update(HOME=self.home, TMPDIR=self.tmpdir)
        prefix = (["strace", "-f", "-qq", "-o", self.strace_path, "-e", "trace=" + TRACED]
                  if traced else [])
        started = time.monotonic()
        self.server = TracedHarrier(ARGS.harrier,
                                    os.path.join(ARGS.source_dir, "examples", "models"),
                                    self.log_path, prefix=prefix, env=env)
        try:
            self.pid = self.server.harrier_pid()
            self.ports = {self.server.port, self.server.metrics_port, self.server.grpc_port}
            self.inference_statuses = [self.infer() for _ in range(5)]
            time.sleep(max(0.0, SERVE_SECONDS - (time.monotonic() - started)))
        finally:
            self.returncode = self.server.terminate()
        self.tmp_after = set(os.listdir("/tmp"))
        self.log_path = self.server.log_path  # for harness.run_suite's report

    def infer(self):
        body = json.dumps({"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [1, 16], "data": list(range(16))},
            {"name": "INPUT1", "datatype": "INT32", "shape": [1, 16], "data": [1] * 16}]})
        req = urllib.request.Request(
            "http://127.0.0.1:%d/v2/models/simple/infer" % self.server.port,
            data=body.encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status

    def terminate(self):  # for harness.run_suite: the server has stopped already
        return self.returncode

    def strace_lines(self):
        with open(self.strace_path, errors="replace") as f:
            return f.read().splitlines()


def files_under(root):
    return sorted(os.path.relpath(os.path.join(d, n), root)
                  for d, dirs, names in os.walk(root) for n in names + dirs)


class TelemetryTests(unittest.TestCase):
    maxDiff = None

    def test_inferences_were_served(self):
        self.assertEqual(RUN.inference_statuses, [200] * 5)
        self.assertEqual(RUN.returncode, 0, "exit status on SIGTERM")

    def test_no_connect_but_to_its_own_listeners(self):
        if not RUN.traced:
            self.skipTest(harness.PTRACE_FORBIDDEN)
        bad = []
        for line in RUN.strace_lines():
            if " connect(" not in line:
                continue
            inet = re.search(r'sin6?_port=htons\((\d+)\).*(?:inet_addr\("([^"]+)"\)|'
                             r'inet_pton\(AF_INET6, "([^"]+)")', line)
            if inet:
                port, addr = int(inet.group(1)), inet.group(2) or inet.group(3)
                if addr in ("127.0.0.1", "::1") and port in RUN.ports:
                    continue
            bad.append(line)
        self.assertEqual(bad, [], "connect() calls other than to the server's own ports")

    def test_no_file_created(self):
        if not RUN.traced:
            self.skipTest(harness.PTRACE_FORBIDDEN)
        creating = re.compile(r"O_CREAT|\b(?:creat|mkdir|mkdirat|rename|renameat|renameat2|link|"
                              r"linkat|symlink|symlinkat)\(")
        bad = [line for line in RUN.strace_lines() if creating.search(line)]
        self.assertEqual(bad, [], "system calls that create files")

    def test_home_and_tmpdir_stay_empty(self):
        self.assertEqual(files_under(RUN.home), [], "under the temporary HOME")
        self.assertFalse(os.path.exists(os.path.join(RUN.home, ".cache", "Microsoft")))
        self.assertEqual(files_under(RUN.tmpdir), [], "under the temporary TMPDIR")

    def test_nothing_in_slash_tmp(self):
        self.assertFalse(os.path.exists("/tmp/mat-debug-%d.log" % RUN.pid))
        # Other programs may write to /tmp meanwhile; ONNX Runtime's names are specific.
        new = sorted(n for n in RUN.tmp_after - RUN.tmp_before
                     if n.startswith("mat-debug-") or n == ".ses")
        self.assertEqual(new, [], "ONNX Runtime's files in /tmp")


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)

    def start():
        global RUN
        traced = strace_works()
        if not traced:
            print("strace cannot trace a child here: the connect() and file-creation checks "
                  "are skipped")
        RUN = Run(traced)
        return RUN

    suite = unittest.TestLoader().loadTestsFromTestCase(TelemetryTests)
    return harness.run_suite(suite, start, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
