#!/usr/bin/env bash
# The gRPC server's callback API (harrier serve) against the async completion-queue prototype
# (bench/grpc_async_infer_proto), tiny model, one run (docs/benchmarks.md, "gRPC (issue 4)").
#
#   bench/grpc_api.sh [BUILD_DIR]      env: DUR (8 s), PORT (18100..18111)
#
# Both servers run side by side on the kit's repository (~/.cache/harrier-bench/repo) and
# bench/grpc_load alternates between them: a 2 s warm-up run, then DUR s; one outstanding call
# per connection, 1 and 16 connections, two rounds. Each line is grpc_load's RESULT plus the
# server's CPU time per request (utime + stime from /proc over the measured run).
set -u
B=${1:-build}
BH=${BENCH_HOME:-$HOME/.cache/harrier-bench}
DUR=${DUR:-8}
PORT=${PORT:-18100}
LOG_CB=$(mktemp /tmp/harrier-grpc-api-cb.XXXXXX.log)
LOG_ASYNC=$(mktemp /tmp/harrier-grpc-api-async.XXXXXX.log)
tck=$(getconf CLK_TCK)
run_one() { # label pid port conns
  local pid=$2 port=$3 c=$4
  $B/bench/grpc_load --target 127.0.0.1:$port --model tiny --input INPUT0:FP32:1x16 --connections $c --duration 2 --warmup 0 >/dev/null
  local t0; t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  local r; r=$($B/bench/grpc_load --target 127.0.0.1:$port --model tiny --input INPUT0:FP32:1x16 --connections $c --duration $DUR --warmup 0 | grep RESULT)
  local t1; t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  local n; n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$r")
  echo "$1 c=$c ${r#RESULT } server_cpu_us_per_req=$(( (t1 - t0) * 1000000 / tck / n ))"
}
$B/harrier serve --model-repository $BH/repo --http-port $PORT --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) > $LOG_CB 2>&1 &
P1=$!
$B/bench/grpc_async_infer_proto --model-repository $BH/repo --port $((PORT + 11)) --threads 2 > $LOG_ASYNC 2>&1 &
P2=$!
trap 'kill -TERM $P1 $P2 2>/dev/null; wait $P1 $P2 2>/dev/null; rm -f "$LOG_CB" "$LOG_ASYNC"' EXIT
for i in $(seq 1 600); do grep -q "listening on gRPC" $LOG_CB && grep -q "listening on gRPC" $LOG_ASYNC && break; sleep 0.1; done
for round in 1 2; do
  for c in 1 16; do
    run_one "round$round callback" $P1 $((PORT + 1)) $c
    run_one "round$round async-cq" $P2 $((PORT + 11)) $c
  done
done
