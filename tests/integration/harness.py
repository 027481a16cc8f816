"""The real `harrier` binary for an integration script: started on ports it picks itself (0),
which are read back from its log, and stopped with SIGTERM."""

import os
import re
import signal
import subprocess
import time


class Harrier:
    """`harrier serve` with --http-port/--grpc-port/--metrics-port 0 and 2 I/O threads.

    `port` and `metrics_port` are the bound ports; the whole log (stdout and stderr) goes to
    `log_path`. Raises RuntimeError if the server exits or does not listen within two minutes.
    """

    def __init__(self, binary, repo, log_path, extra_args=()):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        cmd = [binary, "serve", "--model-repository", repo, "--http-port", "0",
               "--grpc-port", "0", "--metrics-port", "0", "--http-threads", "2"] + list(extra_args)
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self.metrics_port = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("harrier exited with %s:\n%s" % (self.proc.returncode,
                                                                    self.log_text()[-3000:]))
            text = self.log_text()
            http = re.search(r"listening on HTTP [^ ]+:(\d+)", text)
            metrics = re.search(r"listening on metrics [^ ]+:(\d+)", text)
            if http and metrics:
                self.port, self.metrics_port = int(http.group(1)), int(metrics.group(1))
                return
            time.sleep(0.1)
        self.terminate()
        raise RuntimeError("no 'listening on' lines:\n" + self.log_text()[-3000:])

    def log_text(self):
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
        return self.proc.returncode
