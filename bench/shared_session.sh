#!/usr/bin/env bash
# One ONNX Runtime session per instance, or one per version (share_session_between_instances):
# memory and speed of a kit model with COUNT instances (docs/benchmarks.md, "Instances that share
# one session").
#   bench/shared_session.sh [BUILD_DIR]    env: MODEL (resnet50; or tiny), COUNT (2),
#                                          CONNS ("1 2 4"), DUR (8 s), ROUNDS (2)
# For each round, each setting in turn (the order alternates by round): a server on a
# repository of its own holding the kit's MODEL with `instance_group [{ count: COUNT }]`
# and the setting; RSS once it is ready (after the warm-up runs) and after the load; for each
# connection count, wrk (the kit's binary body) for DUR seconds: requests per second, p50, p99,
# and the server's CPU per request. Needs the kit's model and bodies in BENCH_HOME.
set -euo pipefail
B=$(realpath "${1:-build}")
here=$(cd "$(dirname "$0")" && pwd)
source "$here/lib.sh"
MODEL=${MODEL:-resnet50}
COUNT=${COUNT:-2}
CONNS=${CONNS:-1 2 4}
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-2}
port=${BENCH_PORT:-18980}
[[ -e $BH/models/$MODEL.onnx ]] || { echo "no $BH/models/$MODEL.onnx (the kit's make_*.py)" >&2; exit 1; }
work=$(mktemp -d)
pid=""
trap 'if [[ -n $pid ]]; then kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; fi; rm -rf "$work"' EXIT
for setting in separate shared; do
  mkdir -p "$work/$setting/$MODEL/1"
  ln -s "$BH/models/$MODEL.onnx" "$work/$setting/$MODEL/1/model.onnx"
  {
    echo "instance_group [{ count: $COUNT kind: KIND_CPU }]"
    [[ $setting == shared ]] &&
      echo 'parameters { key: "share_session_between_instances" value: { string_value: "true" } }'
  } >"$work/$setting/$MODEL/config.pbtxt"
done
use_kit_body "$MODEL"
url=http://127.0.0.1:$port/v2/models/$MODEL/infer
rss() { awk '/^VmRSS/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status"; }

echo "machine: $(nproc) cores; $(uptime); MODEL=$MODEL COUNT=$COUNT"
for round in $(seq 1 "$ROUNDS"); do
  order="separate shared"
  ((round % 2 == 0)) && order="shared separate"
  for setting in $order; do
    "$B/harrier" serve --model-repository "$work/$setting" --http-port "$port" --grpc-port 0 \
      --metrics-port 0 >"$work/harrier.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do curl -sf -o /dev/null "localhost:$port/v2/health/ready" && break; sleep 0.2; done
    curl -sf -o /dev/null "localhost:$port/v2/health/ready" || { cat "$work/harrier.log" >&2; exit 1; }
    echo "round$round $setting ready_rss_mib=$(rss)"
    wrk -t1 -c2 -d2s -s "$POST_LUA" "$url" >/dev/null
    for c in $CONNS; do
      t0=$(cpu_ticks "$pid")
      r=$(wrk -t1 -c"$c" -d"${DUR}s" --timeout 10s -s "$POST_LUA" "$url" | grep '^RESULT')
      echo "round$round $setting c=$c ${r#RESULT } server_cpu_us_per_req=$(us_per_request $(($(cpu_ticks "$pid") - t0)) "$r") rss_mib=$(rss)"
    done
    kill "$pid"
    wait "$pid" || true
    pid=""
  done
done
