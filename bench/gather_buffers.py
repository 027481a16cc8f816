#!/usr/bin/python3
"""What a burst of large batches leaves resident: the gather buffers' memory (issue 10's "never
grows without bound"; session 28).

usage: /usr/bin/python3 bench/gather_buffers.py BUILD/harrier [ITEM_MIB] [ROUNDS]

Makes a model (ReduceSum over [N, ITEM_MIB MiB of FP32], max_batch_size 8, a 200 ms batching
delay) in a temporary repository, serves it on a free port, and ROUNDS times (default 2) sends 8
requests at once (binary bodies), which the scheduler gathers into one batch of 8, then idles 13 s
(a worker frees its gather buffers after 10 s idle). Prints the server's VmRSS before, after each
burst, and after each idle period, and the batch sizes that ran.
"""
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

from onnx import TensorProto, helper, save


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = sys.argv[1]
    item_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    floats = item_mib << 18
    work = tempfile.mkdtemp(prefix="harrier-gather-")
    try:
        graph = helper.make_graph(
            [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1, axes=[1])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", floats])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
        model.ir_version = 8
        os.makedirs(os.path.join(work, "repo", "big", "1"))
        save(model, os.path.join(work, "repo", "big", "1", "model.onnx"))
        with open(os.path.join(work, "repo", "big", "config.pbtxt"), "w") as f:
            f.write("max_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 200000 }\n"
                    "instance_group { count: 1 kind: KIND_CPU }\n")
        port = free_port()
        server = subprocess.Popen([binary, "serve", "--model-repository", work + "/repo",
                                   "--http-port", str(port), "--grpc-port", "0",
                                   "--metrics-port", "0"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    c.request("GET", "/v2/health/ready")
                    if c.getresponse().status == 200:
                        break
                except OSError:
                    pass
                time.sleep(0.1)

            def rss():
                with open("/proc/%d/status" % server.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS"):
                            return int(line.split()[1]) / 1024

            data = struct.pack("<%df" % floats, *([1.0] * floats))
            head = json.dumps({"inputs": [{"name": "x", "shape": [1, floats], "datatype": "FP32",
                                           "parameters": {"binary_data_size": len(data)}}]})
            head = head.encode()

            def one(statuses):
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                c.request("POST", "/v2/models/big/infer", body=head + data,
                          headers={"Inference-Header-Content-Length": str(len(head)),
                                   "Content-Type": "application/octet-stream"})
                r = c.getresponse()
                r.read()
                statuses.append(r.status)

            print("VmRSS idle before: %.1f MiB" % rss())
            for _ in range(rounds):
                statuses = []
                threads = [threading.Thread(target=one, args=(statuses,)) for _ in range(8)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                print("after 8 requests of %d MiB at once (statuses %s): %.1f MiB"
                      % (item_mib, sorted(set(statuses)), rss()))
                time.sleep(13)
                print("13 s idle later: %.1f MiB" % rss())
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("GET", "/v2/models/big/stats")
            stats = json.loads(c.getresponse().read())["model_stats"][0]["batch_stats"]
            print("executions by batch size:",
                  {b["batch_size"]: b["compute_infer"]["count"] for b in stats})
        finally:
            server.terminate()
            server.wait()
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
