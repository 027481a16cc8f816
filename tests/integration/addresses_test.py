#!/usr/bin/python3
"""The address flags, end to end: --http-address, --grpc-address and --metrics-address each bind
their own port to the address given, and no other.

usage: /usr/bin/python3 tests/integration/addresses_test.py --harrier BUILD/harrier \
           --source-dir SRC --work-dir DIR [-v]

Linux routes all of 127.0.0.0/8 to the loopback interface, so three loopback addresses stand for
three interfaces: a port bound to 127.0.0.1 answers there and refuses 127.0.0.2, and the kernel's
listening-socket table (/proc/net/tcp) shows each port on its own address. Without the two new
flags, gRPC and metrics follow --http-address, as before they existed (Triton's rule for
--metrics-address; docs/server.md). Python stdlib only. The last line is "N passed, N failed".
"""
import http.client
import os
import shutil
import socket
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402 - the real binary on ports it picks

ARGS = None
REPO = None


def listening():
    """{port: address} of the IPv4 sockets in LISTEN state (/proc/net/tcp)."""
    out = {}
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state != "0A":  # TCP_LISTEN
                continue
            hex_ip, hex_port = local.split(":")
            ip = socket.inet_ntoa(bytes.fromhex(hex_ip)[::-1])  # little-endian on x86 and arm
            out.setdefault(int(hex_port, 16), set()).add(ip)
    return out


def answers(address, port, path):
    try:
        conn = http.client.HTTPConnection(address, port, timeout=5)
        conn.request("GET", path)
        status = conn.getresponse().status
        conn.close()
        return status
    except OSError:
        return None


def connects(address, port):
    try:
        socket.create_connection((address, port), timeout=2).close()
        return True
    except OSError:
        return False


class AddressesTest(unittest.TestCase):
    def serve(self, name, args):
        p = harness.Harrier(ARGS.harrier, REPO, os.path.join(ARGS.work_dir, name + ".log"), args)
        self.addCleanup(self.stop, p)
        return p

    def stop(self, p):
        rc = p.terminate()
        with open(p.log_path, "rb") as f:
            self.assertEqual(rc, 0, f.read().decode("utf-8", "replace")[-2000:])

    def test_each_port_binds_its_own_address(self):
        p = self.serve("three", ["--http-address", "127.0.0.3", "--grpc-address", "127.0.0.1",
                                 "--metrics-address", "127.0.0.2"])
        table = listening()
        self.assertEqual(table.get(p.port), {"127.0.0.3"}, table)
        self.assertEqual(table.get(p.grpc_port), {"127.0.0.1"}, table)
        self.assertEqual(table.get(p.metrics_port), {"127.0.0.2"}, table)
        self.assertEqual(answers("127.0.0.3", p.port, "/v2/health/ready"), 200)
        self.assertEqual(answers("127.0.0.2", p.metrics_port, "/metrics"), 200)
        self.assertTrue(connects("127.0.0.1", p.grpc_port))
        import h2_attacks  # tools/: a gRPC call from hand-written HTTP/2 frames (127.0.0.1)
        self.assertEqual(h2_attacks.good_call(p.grpc_port, "ServerLive"), 0)
        # Elsewhere, nothing listens.
        self.assertFalse(connects("127.0.0.2", p.grpc_port))
        self.assertFalse(connects("127.0.0.1", p.metrics_port))
        self.assertFalse(connects("127.0.0.1", p.port))
        log = p.log_text()
        self.assertIn("listening on gRPC 127.0.0.1:%d" % p.grpc_port, log)
        self.assertIn("listening on metrics 127.0.0.2:%d" % p.metrics_port, log)

    def test_grpc_and_metrics_follow_http_address_by_default(self):
        p = self.serve("default", ["--http-address", "127.0.0.1"])
        table = listening()
        for port in (p.port, p.grpc_port, p.metrics_port):
            self.assertEqual(table.get(port), {"127.0.0.1"}, (port, table))
        self.assertFalse(connects("127.0.0.2", p.grpc_port))


def main():
    global ARGS, REPO
    ARGS = harness.parse_args(__doc__)
    REPO = os.path.join(ARGS.work_dir, "repo")
    harness.generate_repository(ARGS.source_dir, REPO)
    for name in os.listdir(REPO):
        if name != "simple":
            shutil.rmtree(os.path.join(REPO, name))
    return harness.run_cases(AddressesTest, ARGS.verbose)


if __name__ == "__main__":
    sys.exit(main())
