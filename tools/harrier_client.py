#!/usr/bin/python3
"""A tiny KServe v2 (Open Inference Protocol) REST client for Harrier: stdlib + numpy.

Library:

    from harrier_client import Client
    c = Client("127.0.0.1", 8000)
    c.live()                                   # True / False
    r = c.infer("simple", {"INPUT0": np.arange(16, dtype=np.int32).reshape(1, 16),
                           "INPUT1": np.ones((1, 16), np.int32)},
                binary_input=True, binary_output=True)
    r.status, r.json, r.outputs["OUTPUT0"]     # numpy arrays, decoded from JSON or binary

Data types map to numpy as KServe's do: BOOL bool_, UINTn/INTn, FP16 float16, FP32 float32,
FP64 float64, BYTES object arrays of bytes. numpy has no bfloat16: BF16 tensors are passed and
returned as float32 arrays (rounded towards zero to bfloat16 on the way out).

CLI (for poking a server by hand):

    harrier_client.py [--url HOST:PORT] live|ready|metadata [MODEL]|config MODEL|index|stats
    harrier_client.py [--url HOST:PORT] infer MODEL --input NAME:DTYPE:SHAPE:V1,V2,...
                      [--input ...] [--output NAME] [--binary]
        e.g. infer simple --input INPUT0:INT32:1x16:0,1,...,15 --input INPUT1:INT32:1x16:1,...
"""
import argparse
import http.client
import json
import struct
import sys

import numpy as np

NUMPY_TYPES = {
    "BOOL": np.bool_, "UINT8": np.uint8, "UINT16": np.uint16, "UINT32": np.uint32,
    "UINT64": np.uint64, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
    "INT64": np.int64, "FP16": np.float16, "FP32": np.float32, "FP64": np.float64,
    "BYTES": np.object_, "BF16": np.float32,
}


def datatype_of(array):
    """The KServe datatype name for a numpy array (BF16 must be asked for explicitly)."""
    if array.dtype == np.object_ or array.dtype.kind in "SU":
        return "BYTES"
    for name, t in NUMPY_TYPES.items():
        if name not in ("BYTES", "BF16") and array.dtype == np.dtype(t):
            return name
    raise ValueError("no KServe datatype for numpy dtype %s" % array.dtype)


def _as_bytes(v):
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


def to_raw(array, datatype):
    """Row-major little-endian bytes of `array`, as the binary tensor extension sends them."""
    if datatype == "BYTES":
        out = bytearray()
        for v in array.reshape(-1):
            b = _as_bytes(v)
            out += struct.pack("<I", len(b)) + b
        return bytes(out)
    if datatype == "BF16":
        bits = np.ascontiguousarray(array, dtype="<f4").view("<u4") >> 16
        return bits.astype("<u2").tobytes()
    if datatype == "BOOL":
        return np.ascontiguousarray(array, dtype=np.bool_).astype(np.uint8).tobytes()
    t = np.dtype(NUMPY_TYPES[datatype]).newbyteorder("<")
    return np.ascontiguousarray(array, dtype=t).tobytes()


def from_raw(raw, datatype, shape):
    """Inverse of to_raw."""
    shape = [int(d) for d in shape]
    if datatype == "BYTES":
        items, pos = [], 0
        while pos < len(raw):
            (n,) = struct.unpack_from("<I", raw, pos)
            items.append(bytes(raw[pos + 4:pos + 4 + n]))
            pos += 4 + n
        arr = np.empty(len(items), dtype=np.object_)
        arr[:] = items
        return arr.reshape(shape)
    if datatype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype("<u4") << 16
        return bits.view("<f4").astype(np.float32).reshape(shape)
    if datatype == "BOOL":
        return np.frombuffer(raw, dtype=np.uint8).astype(np.bool_).reshape(shape)
    t = np.dtype(NUMPY_TYPES[datatype]).newbyteorder("<")
    return np.frombuffer(raw, dtype=t).astype(NUMPY_TYPES[datatype]).reshape(shape)


def to_json_data(array, datatype, nested=False):
    """The `data` member for JSON: flat (default) or nested like the shape."""
    if datatype == "BYTES":
        conv = [_as_bytes(v).decode("utf-8") for v in array.reshape(-1)]
        flat = conv
    elif datatype == "BOOL":
        flat = [bool(v) for v in array.reshape(-1)]
    elif datatype in ("FP16", "FP32", "FP64", "BF16"):
        flat = [float(v) for v in array.reshape(-1)]
    else:
        flat = [int(v) for v in array.reshape(-1)]
    if not nested or array.ndim <= 1:
        return flat
    return np.array(flat, dtype=object).reshape(array.shape).tolist()


def from_json_data(data, datatype, shape):
    def flatten(x):
        if isinstance(x, list):
            for y in x:
                yield from flatten(y)
        else:
            yield x
    flat = list(flatten(data))
    if datatype == "BYTES":
        arr = np.empty(len(flat), dtype=np.object_)
        arr[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in flat]
        return arr.reshape([int(d) for d in shape])
    return np.array(flat, dtype=NUMPY_TYPES[datatype]).reshape([int(d) for d in shape])


def encode_infer_request(inputs, outputs=None, binary_input=False, binary_output=False,
                         nested=False, request_id=None, parameters=None):
    """Builds an infer body. `inputs`: {name: array} or {name: (array, datatype)}.
    `outputs`: None (all), or a list of names or of dicts ({"name", "parameters"}).
    Returns (body bytes, extra headers dict)."""
    header = {"inputs": []}
    if request_id is not None:
        header["id"] = request_id
    params = dict(parameters or {})
    if binary_output and outputs is None:
        params["binary_data_output"] = True
    if params:
        header["parameters"] = params
    raw_parts = []
    for name, value in inputs.items():
        array, datatype = value if isinstance(value, tuple) else (value, None)
        array = np.asarray(array) if not isinstance(array, np.ndarray) else array
        datatype = datatype or datatype_of(array)
        entry = {"name": name, "shape": list(array.shape), "datatype": datatype}
        if binary_input:
            raw = to_raw(array, datatype)
            entry["parameters"] = {"binary_data_size": len(raw)}
            raw_parts.append(raw)
        else:
            entry["data"] = to_json_data(array, datatype, nested)
        header["inputs"].append(entry)
    if outputs is not None:
        header["outputs"] = []
        for o in outputs:
            entry = {"name": o} if isinstance(o, str) else dict(o)
            if binary_output:
                entry.setdefault("parameters", {})["binary_data"] = True
            header["outputs"].append(entry)
    json_bytes = json.dumps(header).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if raw_parts:
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(json_bytes))}
    return json_bytes + b"".join(raw_parts), headers


class InferResult:
    """status, headers (lower-cased names), json (the JSON part, or None), outputs {name: array},
    error (the "error" message, or None), raw (the body)."""

    def __init__(self, status, headers, body):
        self.status, self.headers, self.raw = status, headers, body
        self.json, self.outputs, self.error = None, {}, None
        n = headers.get("inference-header-content-length")
        json_len = int(n) if n is not None else len(body)
        try:
            self.json = json.loads(body[:json_len].decode("utf-8")) if json_len else None
        except (UnicodeDecodeError, ValueError):
            self.json = None
        if isinstance(self.json, dict):
            self.error = self.json.get("error")
            pos = json_len
            for o in self.json.get("outputs", []):
                size = (o.get("parameters") or {}).get("binary_data_size")
                if size is not None:
                    self.outputs[o["name"]] = from_raw(body[pos:pos + size], o["datatype"],
                                                       o["shape"])
                    pos += size
                elif "data" in o:
                    self.outputs[o["name"]] = from_json_data(o["data"], o["datatype"], o["shape"])


class Client:
    """One keep-alive HTTP/1.1 connection (reopened when the server closes it)."""

    def __init__(self, host="127.0.0.1", port=8000, timeout=30.0):
        self.host, self.port, self.timeout = host, port, timeout
        self._conn = None

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method, path, body=None, headers=None):
        """Returns (status, {lower-cased header: value}, body bytes)."""
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=headers or {})
                resp = self._conn.getresponse()
                data = resp.read()
                hdrs = {k.lower(): v for k, v in resp.getheaders()}
                if resp.will_close:
                    self.close()
                return resp.status, hdrs, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()  # a keep-alive connection the server closed: retry once
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get_json(self, path, method="GET", body=None):
        status, _, data = self.request(method, path, body=body)
        return status, (json.loads(data) if data else None)

    def live(self):
        return self.request("GET", "/v2/health/live")[0] == 200

    def ready(self):
        return self.request("GET", "/v2/health/ready")[0] == 200

    @staticmethod
    def model_path(model, version=None):
        return "/v2/models/%s%s" % (model, "" if version is None else "/versions/%s" % version)

    def server_metadata(self):
        return self.get_json("/v2")

    def model_metadata(self, model, version=None):
        return self.get_json(self.model_path(model, version))

    def model_config(self, model, version=None):
        return self.get_json(self.model_path(model, version) + "/config")

    def model_ready(self, model, version=None):
        return self.request("GET", self.model_path(model, version) + "/ready")[0]

    def model_stats(self, model=None, version=None):
        path = "/v2/models/stats" if model is None else self.model_path(model, version) + "/stats"
        return self.get_json(path)

    def repository_index(self):
        return self.get_json("/v2/repository/index", method="POST", body=b"{}")

    def infer(self, model, inputs, outputs=None, version=None, binary_input=False,
              binary_output=False, nested=False, request_id=None, parameters=None,
              timeout_us=None, client_id=None):
        """`parameters` may hold `priority` and `timeout` (µs); `timeout_us` sets the
        X-Request-Timeout-Us deadline header, `client_id` the X-Client-Id header."""
        body, headers = encode_infer_request(inputs, outputs, binary_input, binary_output,
                                             nested, request_id, parameters)
        if timeout_us is not None:
            headers["X-Request-Timeout-Us"] = str(int(timeout_us))
        if client_id is not None:
            headers["X-Client-Id"] = client_id
        status, hdrs, data = self.request("POST", self.model_path(model, version) + "/infer",
                                          body=body, headers=headers)
        return InferResult(status, hdrs, data)


def _parse_input(spec):
    name, datatype, shape, values = spec.split(":", 3)
    shape = [int(d) for d in shape.split("x")] if shape else []
    items = values.split(",") if values else []
    if datatype == "BYTES":
        arr = np.empty(len(items), dtype=np.object_)
        arr[:] = [v.encode() for v in items]
    elif datatype == "BOOL":
        arr = np.array([v.lower() in ("1", "true") for v in items])
    else:
        arr = np.array([float(v) if datatype.startswith(("FP", "BF")) else int(v) for v in items],
                       dtype=NUMPY_TYPES[datatype])
    return name, (arr.reshape(shape), datatype)


def main(argv):
    p = argparse.ArgumentParser(description="KServe v2 REST client for Harrier")
    p.add_argument("--url", default="127.0.0.1:8000", help="HOST:PORT")
    p.add_argument("command", choices=["live", "ready", "metadata", "config", "index", "stats",
                                       "infer"])
    p.add_argument("model", nargs="?")
    p.add_argument("--input", action="append", default=[], help="NAME:DTYPE:SHAPE:V1,V2,...")
    p.add_argument("--output", action="append", default=None, help="output name to return")
    p.add_argument("--binary", action="store_true", help="binary tensors both ways")
    p.add_argument("--priority", type=int, help="request parameter priority (1 = most urgent)")
    p.add_argument("--timeout-us", type=int, help="deadline: X-Request-Timeout-Us header (µs)")
    p.add_argument("--client-id", help="X-Client-Id header (per-client rate limits)")
    a = p.parse_args(argv)
    host, _, port = a.url.rpartition(":")
    c = Client(host or "127.0.0.1", int(port))
    if a.command in ("live", "ready"):
        ok = c.live() if a.command == "live" else c.ready()
        print("true" if ok else "false")
        return 0 if ok else 1
    if a.command == "infer":
        inputs = dict(_parse_input(s) for s in a.input)
        params = {"priority": a.priority} if a.priority is not None else None
        r = c.infer(a.model, inputs, outputs=a.output, binary_input=a.binary,
                    binary_output=a.binary, parameters=params, timeout_us=a.timeout_us,
                    client_id=a.client_id)
        if r.status != 200:
            print("HTTP %d: %s" % (r.status, r.error), file=sys.stderr)
            return 1
        for name, arr in r.outputs.items():
            print("%s %s %s" % (name, list(arr.shape), arr.reshape(-1).tolist()))
        return 0
    if a.command == "metadata":
        status, doc = c.model_metadata(a.model) if a.model else c.server_metadata()
    elif a.command == "config":
        status, doc = c.model_config(a.model)
    elif a.command == "stats":
        status, doc = c.model_stats(a.model)
    else:
        status, doc = c.repository_index()
    print(json.dumps(doc, indent=2))
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
