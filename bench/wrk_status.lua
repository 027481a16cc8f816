-- wrk script for bench/overload_closed.sh: POST the body in $BODY (binary, $IHCL as
-- Inference-Header-Content-Length) and print one RESULT line that keeps the refusals (HTTP
-- status > 399) apart from the socket errors, so that goodput is (requests - non_2xx) / seconds.
local f = assert(io.open(os.getenv("BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/octet-stream"
wrk.headers["Inference-Header-Content-Length"] = os.getenv("IHCL")

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d non_2xx=%d connect=%d read=%d write=%d timeout=%d seconds=%.2f p50_us=%d p99_us=%d\n",
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99)))
end
