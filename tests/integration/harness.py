"""What the smaller integration scripts share: the real `harrier` binary started on ports it picks
itself (0), read back from its log, and stopped with SIGTERM; their command line; and running
a suite against the server with the summary line CTest reads."""

import argparse
import http.client
import mmap
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import unittest


def free_port():
    """A loopback TCP port nobody listens on now (for servers that cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_call(port, method, path, body=None, timeout=10):
    """(status, body bytes) of one HTTP/1.1 request on a connection of its own; a body is sent
    as JSON."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body,
                     headers={"Content-Type": "application/json"} if body else {})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


class Harrier:
    """`harrier serve` with --http-port/--grpc-port/--metrics-port 0 and 2 I/O threads.

    `port`, `metrics_port` and `grpc_port` are the bound ports; the whole log (stdout and stderr) goes to
    `log_path`. Raises RuntimeError if the server exits or does not listen within two minutes.
    """

    def __init__(self, binary, repo, log_path, extra_args=(), prefix=(), env=None):
        """`prefix`: a command the server runs under (strace ...), `env`: its environment
        (default: this process's)."""
        self.log_path = log_path
        self.binary = binary
        self.log = open(log_path, "wb")
        cmd = list(prefix) + [binary, "serve", "--model-repository", repo, "--http-port", "0",
                              "--grpc-port", "0", "--metrics-port", "0", "--http-threads",
                              "2"] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.port = self.metrics_port = self.grpc_port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("harrier exited with %s:\n%s" % (self.proc.returncode,
                                                                    self.log_text()[-3000:]))
            text = self.log_text()
            http = re.search(r"listening on HTTP [^ ]+:(\d+)", text)
            metrics = re.search(r"listening on metrics [^ ]+:(\d+)", text)
            grpc = re.search(r"listening on gRPC [^ ]+:(\d+)", text)
            if http and metrics:
                self.port, self.metrics_port = int(http.group(1)), int(metrics.group(1))
                self.grpc_port = int(grpc.group(1)) if grpc else None
                return
            time.sleep(0.1)
        self.terminate()
        raise RuntimeError("no 'listening on' lines:\n" + self.log_text()[-3000:])

    def log_text(self):
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def terminate(self):
        """SIGTERM, then the exit status (killed after 60 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
        report = crash_report(self.log_text(), self.binary)
        if report:
            print("the server crashed (exit status %s):\n%s" % (self.proc.returncode, report),
                  flush=True)
        return self.proc.returncode


# A frame of the binary itself in a fatal-signal report (core/fatal_signal.h), as glibc's
# backtrace_symbols_fd writes it: "/path/harrier(+0x70eca9)[0x561cc001dca9]".
_OWN_FRAME = re.compile(r"^(\S+)\(\+(0x[0-9a-f]+)\)\[0x[0-9a-f]+\]$")


def crash_report(log_text, binary):
    """The server's fatal-signal report in `log_text`, the binary's own frames followed by
    addr2line's function and line; None when the log holds none."""
    start = log_text.find("harrier: fatal signal")
    if start < 0:
        return None
    end = log_text.find("harrier: end of backtrace", start)
    lines = []
    for line in log_text[start:None if end < 0 else end].splitlines():
        m = _OWN_FRAME.match(line.strip())
        if m and os.path.realpath(m.group(1)) == os.path.realpath(binary):
            try:
                where = subprocess.run(["addr2line", "-f", "-C", "-i", "-p", "-e", binary,
                                        m.group(2)], capture_output=True, text=True,
                                       timeout=60).stdout.strip()
                line += "  " + where.replace("\n", " / ")
            except (OSError, subprocess.SubprocessError):
                pass  # the raw offset is still there to symbolize by hand
        lines.append(line)
    return "\n".join(lines)


def generate_repository(source_dir, repo, scripts=("make_test_models.py",)):
    """Makes `repo` afresh (emptied if it exists) and fills it with the models of each of the
    source tree's tools/ `scripts`, run with /usr/bin/python3 (Debian's onnx and numpy)."""
    shutil.rmtree(repo, ignore_errors=True)
    os.makedirs(repo)
    for script in scripts:
        subprocess.run(["/usr/bin/python3", os.path.join(source_dir, "tools", script), repo],
                       check=True, stdout=subprocess.DEVNULL)


def parse_args(doc, add_arguments=None):
    """--harrier, --source-dir, --work-dir (made absolute, created) and -v; `add_arguments(p)`
    adds a script's own. Puts the source tree's tools/ on sys.path for the model generators."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--harrier", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--work-dir", required=True)
    p.add_argument("-v", "--verbose", action="store_true")
    if add_arguments:
        add_arguments(p)
    args = p.parse_args()
    args.harrier = os.path.abspath(args.harrier)
    args.work_dir = os.path.abspath(args.work_dir)
    os.makedirs(args.work_dir, exist_ok=True)
    sys.path.insert(0, os.path.join(os.path.abspath(args.source_dir), "tools"))
    return args


# The skips a suite may take without failing: each says that this machine forbids something the
# check needs, never that a tool is missing (tools/deps.sh installs every tool; a missing one is a
# broken set-up) and never anything the product under test decides. Two: a container that does
# not permit ptrace, so strace cannot trace a child even when it is installed
# (telemetry_test.py checks that on /bin/true before it starts harrier, so a broken harrier cannot
# take this skip), and one below. Any other skip is counted as a failure.
PTRACE_FORBIDDEN = "strace cannot trace here (ptrace not permitted)"
# The image test (image_test.py) runs the image's binary under chroot in a mount namespace of its
# own, which needs root and CAP_SYS_ADMIN; it checks `unshare -m true` first, so a broken image
# cannot take this skip.
MOUNT_FORBIDDEN = "cannot chroot into the image here (not root, or mount namespaces not permitted)"
# The resource-limit test (limits_test.py) runs the server as another user, since the thread
# limit does not bind root; only root can start it so.
NOT_ROOT = "needs root to run the server as another user (the thread limit does not bind root)"
# Under a sanitizer (tools/sanitized_run.sh sets HARRIER_SANITIZER to "address" or "thread"): tests
# of what glibc's malloc keeps and returns, which the sanitizer's own allocator replaces. Only
# then: a run without HARRIER_SANITIZER cannot take it.
SANITIZER = os.environ.get("HARRIER_SANITIZER", "")
SANITIZER_ALLOCATOR = "what glibc's malloc keeps and returns; a sanitizer's allocator does neither"
# Under AddressSanitizer: Harrier's fault handler (core/fatal_signal.h), which ASan's own report
# replaces there (the handler is not installed).
ASAN_FAULT_HANDLER = "Harrier's fault report; AddressSanitizer reports faults itself"
ALLOWED_SKIPS = ((PTRACE_FORBIDDEN, MOUNT_FORBIDDEN, NOT_ROOT) + ((SANITIZER_ALLOCATOR,) if SANITIZER else ())
                 + ((ASAN_FAULT_HANDLER,) if SANITIZER == "address" else ()))


def summarize(result, server_rc, server_name="harrier"):
    """The failures of a finished unittest run: failures, errors, unexpected successes, every
    skip whose reason is not in ALLOWED_SKIPS, a run in which no check ran, and a SIGTERM exit
    status other than 0 (`server_rc`; None when no server was stopped). Prints why each of those
    that unittest does not print itself counts, and returns (passed, failed)."""
    failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
    allowed = 0
    for test, reason in result.skipped:
        if reason in ALLOWED_SKIPS:
            allowed += 1
            print("skipped (allowed: the machine forbids it): %s: %s" % (test.id(), reason))
        else:
            failed += 1
            print("skipped, counted as a failure (only %s may skip): %s: %s"
                  % (list(ALLOWED_SKIPS), test.id(), reason))
    passed = result.testsRun - len(result.failures) - len(result.errors) - len(result.skipped) \
        - len(result.unexpectedSuccesses)
    if passed == 0 and failed == 0:
        print("no check ran (%d tests, %d of them skipped): a suite that checks nothing fails"
              % (result.testsRun, len(result.skipped)))
        failed += 1
    if server_rc is not None and server_rc != 0:
        print("%s exited with %s on SIGTERM (expected 0)" % (server_name, server_rc))
        failed += 1
    return passed, failed


def run_suite(suite, start_server, verbose):
    """Starts the server (`start_server()` returns an object with terminate() and log_path),
    runs `suite` against it, stops it and prints the "N passed, N failed" line the CTest entries
    read; what counts as failed is summarize()'s (a skip outside ALLOWED_SKIPS, zero checks run
    and a SIGTERM exit status other than 0 among it). Returns the exit status."""
    if suite.countTestCases() == 0:
        print("setup failed: the suite holds no test")
        print("0 passed, 1 failed")
        return 1
    try:
        server = start_server()
    except Exception as e:  # noqa: BLE001 - report any setup failure as a failed run
        print("setup failed: %s" % e)
        print("0 passed, %d failed" % suite.countTestCases())
        return 1
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if verbose else 1).run(suite)
    passed, failed = summarize(result, server.terminate())
    if failed:
        print("server log: %s" % server.log_path)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


def run_cases(test_case, verbose):
    """Runs the unittest TestCase class `test_case`, whose tests start and stop their own
    servers, and prints the "N passed, N failed" line the CTest entries read (what counts as
    failed: summarize()'s). Returns the exit status."""
    suite = unittest.defaultTestLoader.loadTestsFromTestCase(test_case)
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2 if verbose else 1).run(suite)
    passed, failed = summarize(result, None)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


class ShmRegion:
    """A POSIX shared-memory object, as Triton's client utilities make one for a region: the
    file /dev/shm/NAME for the key "/NAME", `size` bytes, mapped here; destroy() unmaps and
    removes it."""

    def __init__(self, key, size):
        self.key, self.size = key, size
        self.path = "/dev/shm/" + key.lstrip("/")
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o600)
        try:
            os.ftruncate(fd, size)
            self.map = mmap.mmap(fd, size)
        finally:
            os.close(fd)

    def write(self, data, offset=0):
        self.map[offset:offset + len(data)] = data

    def read(self, size, offset=0):
        return bytes(self.map[offset:offset + size])

    def destroy(self):
        self.map.close()
        os.unlink(self.path)
