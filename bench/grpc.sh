#!/usr/bin/env bash
# gRPC against REST binary on the same server, in one run (docs/benchmarks.md, "gRPC (issue 4)").
#
#   bench/grpc.sh [BUILD_DIR]          (BUILD_DIR: default build; needs bench/grpc_load built)
#   env: MODEL (tiny), INPUT (INPUT0:FP32:1x16), CONNS ("1 16"), DUR (10 s), ROUNDS (2),
#        PORT (18000: HTTP; PORT+1 gRPC; PORT+2 metrics)
#
# Serves the shared kit's repository (~/.cache/harrier-bench/repo, made by
# ../shared/bench/compare.sh) with default flags. For each connection count: REST binary with wrk
# and the kit's post.lua and body (2 s warm-up, then DUR s), then gRPC raw with bench/grpc_load
# (2 s warm-up run, then DUR s), one outstanding request per connection for both. Each line is
# wrk's RESULT plus the server's CPU time per request (utime + stime from /proc over the
# measured run), which the client's own CPU use on a shared 2-core machine does not distort.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
DUR=${DUR:-10}
ROUNDS=${ROUNDS:-2}
MODEL=${MODEL:-tiny}
INPUT=${INPUT:-INPUT0:FP32:1x16}
CONNS=${CONNS:-1 16}
PORT=${PORT:-18000}
LOG=$(mktemp /tmp/harrier-grpc-bench.XXXXXX.log)
"$B/harrier" serve --model-repository "$BH/repo" --http-port "$PORT" --grpc-port $((PORT + 1)) \
  --metrics-port $((PORT + 2)) >"$LOG" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID; rm -f "$LOG"' EXIT
for _ in $(seq 1 600); do grep -q "listening on gRPC" "$LOG" && break; sleep 0.1; done
report() { # label result-line cpu-ticks
  echo "$1 ${2#RESULT } server_cpu_us_per_req=$(us_per_request "$3" "$2")"
}
use_kit_body "$MODEL"
url=http://127.0.0.1:$PORT/v2/models/$MODEL/infer
lua=$POST_LUA
for round in $(seq 1 "$ROUNDS"); do
  for c in $CONNS; do
    wrk -t1 -c"$c" -d2s -s "$lua" "$url" >/dev/null 2>&1
    t0=$(cpu_ticks $PID)
    r=$(wrk -t1 -c"$c" -d"${DUR}s" --timeout 10s -s "$lua" "$url" | grep RESULT)
    report "round$round $MODEL rest-bin c=$c" "$r" $(($(cpu_ticks $PID) - t0))
    "$B/bench/grpc_load" --target "127.0.0.1:$((PORT + 1))" --model "$MODEL" --input "$INPUT" \
      --connections "$c" --duration 2 --warmup 0 >/dev/null
    t0=$(cpu_ticks $PID)
    r=$("$B/bench/grpc_load" --target "127.0.0.1:$((PORT + 1))" --model "$MODEL" --input "$INPUT" \
      --connections "$c" --duration "$DUR" --warmup 0 | grep RESULT)
    report "round$round $MODEL grpc-raw c=$c" "$r" $(($(cpu_ticks $PID) - t0))
  done
done
