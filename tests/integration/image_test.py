#!/usr/bin/python3
"""`make image`, end to end: the OCI image built by tools/image.sh, and its binary serving.

usage: /usr/bin/python3 tests/integration/image_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Builds the image with buildah (--storage-driver vfs) under a name of its own, checks its
configuration (a non-root user, the entry point, the example repository as the command, the
ports, the OCI labels), then mounts it (`buildah mount`) and runs its entry point with its
command under chroot as the image's user, in a mount namespace where the image's root is
read-only (only /proc is mounted in, as a runtime would): /v2/health/ready must answer 200, an
inference must answer, SIGTERM must exit 0. Podman is not installed here, so the image is not
run by a container runtime. The image and its container are removed afterwards.
Python stdlib only (plus buildah). The last line is "N passed, N failed".
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

ARGS = None
BUILDAH = ["buildah", "--storage-driver", "vfs"]
IMAGE = "localhost/harrier-image-test:%d" % os.getpid()


def buildah(*args):
    return subprocess.run(BUILDAH + list(args), capture_output=True, text=True, check=True).stdout


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.container = None
        models = os.path.join(ARGS.work_dir, "models")
        shutil.rmtree(models, ignore_errors=True)
        subprocess.run(["/usr/bin/python3", os.path.join(ARGS.source_dir, "tools",
                                                          "make_example_models.py"), models],
                       check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, MODELS=models)
        subprocess.run(["bash", os.path.join(ARGS.source_dir, "tools", "image.sh"),
                        os.path.dirname(ARGS.harrier), IMAGE], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        cls.config = json.loads(buildah("inspect", "--type", "image", IMAGE))["OCIv1"]["config"]

    @classmethod
    def tearDownClass(cls):
        if cls.container:
            subprocess.run(BUILDAH + ["umount", cls.container], capture_output=True)
            subprocess.run(BUILDAH + ["rm", cls.container], capture_output=True)
        subprocess.run(BUILDAH + ["rmi", IMAGE], capture_output=True)

    def test_configuration(self):
        c = self.config
        self.assertEqual(c["User"], "65532:65532")
        self.assertEqual(c["Entrypoint"], ["/opt/harrier/bin/harrier"])
        self.assertEqual(c["Cmd"], ["serve", "--model-repository", "/opt/harrier/models"])
        self.assertEqual(set(c["ExposedPorts"]), {"8000/tcp", "8001/tcp", "8002/tcp"})
        labels = c["Labels"]
        for key in ("title", "version", "revision", "created", "description"):
            self.assertTrue(labels.get("org.opencontainers.image." + key), key)
        version = subprocess.run([ARGS.harrier, "--version"], capture_output=True,
                                 text=True).stdout.split()[1]
        self.assertEqual(labels["org.opencontainers.image.version"], version)

    def test_serves_from_a_read_only_root_as_its_user(self):
        if os.geteuid() != 0 or subprocess.run(["unshare", "-m", "true"],
                                               capture_output=True).returncode != 0:
            self.skipTest(harness.MOUNT_FORBIDDEN)
        type(self).container = buildah("from", IMAGE).strip()
        root = buildah("mount", self.container).strip()
        c = self.config
        port, grpc, metrics = harness.free_port(), harness.free_port(), harness.free_port()
        command = c["Entrypoint"] + c["Cmd"] + ["--http-port", str(port), "--grpc-port", str(grpc),
                                                "--metrics-port", str(metrics)]
        script = ('mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && '
                  'mount --rbind /proc "$1/proc" && root=$1 user=$2 && shift 2 && '
                  'exec chroot --userspec="$user" "$root" "$@"')
        log_path = os.path.join(ARGS.work_dir, "image-harrier.log")
        with open(log_path, "wb") as log:
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent"}
            proc = subprocess.Popen(["unshare", "-m", "sh", "-c", script, "sh", root, c["User"]]
                                    + command, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if harness.http_call(port, "GET", "/v2/health/ready")[0] == 200:
                        break
                except OSError:
                    pass
                self.assertIsNone(proc.poll(), open(log_path).read()[-2000:])
                self.assertLess(time.monotonic(), deadline, open(log_path).read()[-2000:])
                time.sleep(0.1)
            with open("/proc/%d/status" % proc.pid) as f:
                self.assertRegex(f.read(), r"(?m)^Uid:\s+65532\s")
            body = json.dumps({"inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [2] * 16}]})
            status, answer = harness.http_call(port, "POST", "/v2/models/simple/infer", body)
            self.assertEqual(status, 200, answer)
            self.assertEqual(json.loads(answer)["outputs"][0]["data"], [3] * 16)
            # Nothing in it could write to its root, and it needed to write nothing.
            log = open(log_path).read()
            self.assertNotRegex(log, re.compile("read-only file system", re.I))
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = proc.wait()
        self.assertEqual(rc, 0, open(log_path).read()[-2000:])


def main():
    global ARGS
    ARGS = harness.parse_args(__doc__)
    return harness.run_cases(ImageTest, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
