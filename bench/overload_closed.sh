#!/usr/bin/env bash
# Overload from clients that do not back off (issue 10): ResNet-50 (the kit's model and binary
# body, ~600 KB), default flags, closed-loop clients that resend as soon as they are answered,
# 429 or not — what wrk, k6 and naive retry loops do. In one run, against one server:
#   - unloaded: wrk at 1 connection (p50/p99), the reference for admitted latency;
#   - capacity: wrk at 2 connections (200s per second), the reference for goodput;
#   - wrk at 16 and 64 connections: goodput (200s per second), refusals, socket errors;
#   - bench/overload.py --closed-loop 32 (Python, http.client): goodput and the admitted and
#     refused latencies apart;
# and the server's CPU per answered request and RSS.
#   bench/overload_closed.sh BUILD_DIR [SECONDS] [extra harrier flags...]
# NICE=-10 (default) runs server and clients at a higher priority than the rest of the machine
# (a shared machine's builds then take what they leave); NICE=0 to run plainly. Needs the kit's
# resnet50 model and bodies in BENCH_HOME (../shared/bench/compare.sh, or make_resnet50.py and
# make_bodies.py).
set -euo pipefail
build=$(realpath "${1:-build}")
seconds=${2:-10}
shift 2 || shift $#
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
port=${BENCH_PORT:-18960}
nice_=${NICE:--10}
work=$(mktemp -d)
pid=""
trap 'if [[ -n $pid ]]; then kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; fi; rm -rf "$work"' EXIT

[[ -e $BH/models/resnet50.onnx ]] || { echo "no $BH/models/resnet50.onnx (make_resnet50.py)" >&2; exit 1; }
mkdir -p "$work/repo/resnet50/1"
ln -s "$BH/models/resnet50.onnx" "$work/repo/resnet50/1/model.onnx"
use_kit_body resnet50
url=http://127.0.0.1:$port/v2/models/resnet50/infer

nice -n "$nice_" "$build/harrier" serve --model-repository "$work/repo" --http-port "$port" \
  --grpc-port 0 --metrics-port 0 "$@" >"$work/harrier.log" 2>&1 &
pid=$!
for _ in $(seq 150); do curl -sf -o /dev/null "localhost:$port/v2/health/ready" && break; sleep 0.2; done
curl -sf -o /dev/null "localhost:$port/v2/health/ready" || { cat "$work/harrier.log" >&2; exit 1; }

echo "machine: $(nproc) cores; $(uptime); flags: ${*:-(defaults)}; nice $nice_"
run_wrk() { # CONNECTIONS -> "RESULT ... cpu_us_per_answer=N"
  local t0 r
  t0=$(cpu_ticks "$pid")
  r=$(nice -n "$nice_" wrk -t1 -c"$1" -d"${seconds}s" --timeout 10s -s "$here/wrk_status.lua" "$url" |
    grep '^RESULT')
  echo "$r cpu_us_per_answer=$(us_per_request $(($(cpu_ticks "$pid") - t0)) "$r")"
}
goodput() { # RESULT line -> 200s per second
  awk '{for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%.1f", (v["requests"] - v["non_2xx"]) / v["seconds"]}' <<<"$1"
}
field() { sed -E "s/.* $1=([0-9.]+).*/\\1/" <<<"$2"; }

nice -n "$nice_" wrk -t1 -c2 -d3s -s "$here/wrk_status.lua" "$url" >/dev/null  # warm-up
one=$(run_wrk 1)
echo "1 connection:   $one"
two=$(run_wrk 2)
capacity=$(goodput "$two")
echo "2 connections:  $two -> capacity $capacity req/s"
for c in 16 64; do
  r=$(run_wrk $c)
  g=$(goodput "$r")
  echo "$c connections: $r"
  echo "  goodput $g req/s = $(awk -v g="$g" -v c="$capacity" 'BEGIN{printf "%.2f", g / c}')x capacity"
done
t0=$(cpu_ticks "$pid")
out=$(nice -n "$nice_" /usr/bin/python3 "$here/overload.py" --url "$url" --body "$BODY" \
  --ihcl "$IHCL" --pid "$pid" --closed-loop 32 --seconds "$seconds")
echo "python $out"
g=$(sed -E 's/.*goodput ([0-9.]+) req.*/\1/' <<<"$out")
ap99=$(sed -E 's/.*admitted n=[0-9]+ p50_us=[0-9]+ p99_us=([0-9]+).*/\1/' <<<"$out")
rp99=$(sed -E 's/.*refused n=[0-9]+ p50_us=[0-9]+ p99_us=([0-9a-z]+).*/\1/' <<<"$out")
echo "  goodput $(awk -v g="$g" -v c="$capacity" 'BEGIN{printf "%.2f", g / c}')x capacity;" \
  "admitted p99 $(awk -v a="$ap99" -v u="$(field p99_us "$one")" 'BEGIN{printf "%.2f", a / u}')x" \
  "the 1-connection p99; refused p99 ${rp99} us; server CPU $(( ($(cpu_ticks "$pid") - t0) * 1000 / TCK )) ms"
echo "after: $(uptime); server RSS $(awk '/VmRSS/{print $2}' "/proc/$pid/status") KiB"
