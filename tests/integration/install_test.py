#!/usr/bin/python3
"""`make install PREFIX=...`, end to end: the installed binary runs as an unprivileged user.

usage: /usr/bin/python3 tests/integration/install_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Installs the build (cmake --install BUILD --prefix, what `make install` runs), under umask 077,
into a fresh prefix under /tmp and checks what it holds: directories 0755, files 0644, bin/ 0755
whatever the umask; bin/harrier with the run path $ORIGIN/../lib and nothing
pointing into the builder's home, lib/libonnxruntime.so.1, and no other library needed from
outside Debian's (llama.cpp is linked in statically). Then runs PREFIX/bin/harrier serve as the
user nobody (setpriv; as the current user when the test is not run as root, which is then
unprivileged already) over a repository it can only read, and checks that /v2/health/ready
answers 200, an inference answers, and SIGTERM exits 0. The systemd unit example
(deploy/systemd/harrier.service) is checked with `systemd-analyze verify` against the installed
binary. Python stdlib only. The last line is "N passed, N failed".
"""
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks

ARGS = None
PREFIX = None
REPO = None


def make_world_readable(top):
    """Directories a+rx, files a+r: the test's repository, which any user may read."""
    for root, dirs, files in os.walk(top):
        os.chmod(root, 0o755)
        for name in files:
            path = os.path.join(root, name)
            mode = os.stat(path).st_mode
            os.chmod(path, mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


class InstallTest(unittest.TestCase):
    def test_layout_and_run_path(self):
        binary = os.path.join(PREFIX, "bin", "harrier")
        ort = os.path.join(PREFIX, "lib", "libonnxruntime.so.1")
        self.assertTrue(os.access(binary, os.X_OK))
        self.assertTrue(os.path.isfile(ort) and not os.path.islink(ort))
        self.assertTrue(os.path.isfile(os.path.join(PREFIX, "share", "doc", "harrier",
                                                    "server.md")))
        self.assertTrue(os.path.isfile(os.path.join(PREFIX, "share", "harrier", "systemd",
                                                    "harrier.service")))
        dynamic = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                                 check=True).stdout
        runpath = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library \w+: \[(.*)\]", dynamic)
        self.assertEqual(runpath, ["$ORIGIN/../lib"], dynamic)
        self.assertNotIn(os.path.expanduser("~"), dynamic)
        # Every library resolves; the only one from outside the system's directories is the
        # prefix's ONNX Runtime (llama.cpp is static: no libllama / libggml).
        ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
        self.assertNotIn("not found", ldd)
        self.assertNotRegex(ldd, r"libllama|libggml")
        outside = [line.split("=>")[1].split("(")[0].strip() for line in ldd.splitlines()
                   if "=>" in line and not re.search(r"=> /(usr/)?lib/", line)]
        self.assertEqual([os.path.realpath(p) for p in outside], [os.path.realpath(ort)], ldd)

    def test_an_install_under_a_private_umask_is_open_to_every_user(self):
        """The install ran under umask 077 (an administrator's shell, a hardened CI): what it
        made must still be readable by the service's user, as README.md promises."""
        for root, dirs, files in os.walk(PREFIX):
            self.assertEqual(stat.S_IMODE(os.stat(root).st_mode), 0o755, root)
            for name in files:
                path = os.path.join(root, name)
                want = 0o755 if os.path.basename(root) == "bin" else 0o644
                self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), want, path)

    def test_runs_as_an_unprivileged_user(self):
        prefix_cmd = []
        if os.geteuid() == 0:
            nobody = pwd.getpwnam("nobody")
            prefix_cmd = ["setpriv", "--reuid=%d" % nobody.pw_uid, "--regid=%d" % nobody.pw_gid,
                          "--clear-groups", "--"]
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}  # nothing from the builder
        p = harness.Harrier(os.path.join(PREFIX, "bin", "harrier"), REPO,
                            os.path.join(ARGS.work_dir, "installed-harrier.log"),
                            prefix=prefix_cmd, env=env)
        try:
            with open("/proc/%d/status" % p.proc.pid) as f:
                uid = int(re.search(r"^Uid:\s+(\d+)", f.read(), re.M).group(1))
            self.assertNotEqual(uid, 0, "the installed server runs as root")
            self.assertEqual(harness.http_call(p.port, "GET", "/v2/health/ready")[0], 200)
            body = json.dumps({"inputs": [
                {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16},
                {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [2] * 16}]})
            status, answer = harness.http_call(p.port, "POST", "/v2/models/simple/infer", body)
            self.assertEqual(status, 200, answer)
            self.assertEqual(json.loads(answer)["outputs"][0]["data"], [3] * 16)
        finally:
            rc = p.terminate()
        self.assertEqual(rc, 0, p.log_text() if not p.log.closed else open(p.log_path).read())

    def test_systemd_unit_verifies(self):
        unit_src = os.path.join(ARGS.source_dir, "deploy", "systemd", "harrier.service")
        with open(unit_src) as f:
            unit = f.read()
        # The example's paths, pointed at this prefix and repository.
        unit = unit.replace("/opt/harrier", PREFIX).replace("/var/lib/harrier/models", REPO)
        self.assertIn("Restart=on-failure", unit)
        self.assertRegex(unit, r"(?m)^User=\S+")
        self.assertNotRegex(unit, r"(?m)^User=root")
        # TimeoutStopSec covers the drain: shutdown delay + exit timeout, with room to spare.
        delay = float(re.search(r"--shutdown-delay-secs[ =]([0-9.]+)", unit).group(1))
        exit_timeout = float(re.search(r"--exit-timeout-secs[ =]([0-9.]+)", unit).group(1))
        stop = float(re.search(r"(?m)^TimeoutStopSec=(\d+)", unit).group(1))
        self.assertGreater(stop, delay + exit_timeout)
        unit_dir = tempfile.mkdtemp(dir=ARGS.work_dir)
        path = os.path.join(unit_dir, "harrier.service")
        with open(path, "w") as f:
            f.write(unit)
        out = subprocess.run(["systemd-analyze", "verify", "--man=no", path],
                             capture_output=True, text=True)
        # Complaints about this machine (no systemd running, a user the unit names that does
        # not exist here) are not the unit's; anything naming the unit file's own lines is.
        problems = [line for line in (out.stdout + out.stderr).splitlines()
                    if "harrier.service" in line and "User" not in line]
        self.assertEqual(problems, [], out.stdout + out.stderr)


def main():
    global ARGS, PREFIX, REPO
    ARGS = harness.parse_args(__doc__)
    build_dir = os.path.dirname(ARGS.harrier)
    top = tempfile.mkdtemp(prefix="harrier-install-")
    try:
        PREFIX = os.path.join(top, "prefix")
        # Under a private umask, as an administrator may have it: the install's own modes
        # must make it usable by others, nothing chmods it afterwards.
        old_umask = os.umask(0o077)
        try:
            subprocess.run(["cmake", "--install", build_dir, "--prefix", PREFIX], check=True,
                           stdout=subprocess.DEVNULL)
        finally:
            os.umask(old_umask)
        os.chmod(top, 0o755)  # mkdtemp's own 0700; the prefix in it is left as installed
        REPO = os.path.join(top, "models")
        harness.generate_repository(ARGS.source_dir, REPO)
        for name in os.listdir(REPO):
            if name != "simple":
                shutil.rmtree(os.path.join(REPO, name))
        make_world_readable(REPO)
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(InstallTest)
        result = unittest.TextTestRunner(stream=sys.stdout,
                                         verbosity=2 if ARGS.verbose else 1).run(suite)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    passed, failed = harness.summarize(result, None)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
