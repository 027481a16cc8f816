#!/usr/bin/env bash
# Inline execution on and off (docs/benchmarks.md, "Inline execution (issue 4)"), A/B in one run.
#
#   bench/inline_execution.sh [BUILD_DIR]   (needs harrier and bench/grpc_load built)
#   env: MODEL (tiny), INPUT (INPUT0:FP32:1x16), CONNS ("1 16"), PROTOS ("rest grpc"),
#        DUR (5 s), ROUNDS (3), PORT (18100; the n-th server uses PORT+10n),
#        CONFIGS: space-separated LABEL=BINARY:FLAGS, flags comma-separated
#        (default "off=BUILD_DIR/harrier:--inline-execution,off
#                  on=BUILD_DIR/harrier:--inline-execution,all": REST and gRPC both inline, so
#                  that both protocols' lines compare; the server's default is `grpc`)
#
# One server per config, all on the shared kit's repository (~/.cache/harrier-bench/repo). For
# every round, protocol and connection count the same load runs against each server in turn
# (the order rotates by round), so drift on a shared machine hits all of them. Each line: the
# load generator's RESULT plus the server's CPU time per request (utime + stime from
# /proc/PID/stat over the measured run). REST is binary with wrk and the kit's post.lua; gRPC
# raw with bench/grpc_load. 1 s warm-up before each measured run.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
DUR=${DUR:-5}
ROUNDS=${ROUNDS:-3}
MODEL=${MODEL:-tiny}
INPUT=${INPUT:-INPUT0:FP32:1x16}
CONNS=${CONNS:-1 16}
PROTOS=${PROTOS:-rest grpc}
PORT=${PORT:-18100}
CONFIGS=${CONFIGS:-off=$B/harrier:--inline-execution,off on=$B/harrier:--inline-execution,all}
labels=() pids=() ports=() logs=()
i=0
for cfg in $CONFIGS; do
  label=${cfg%%=*} rest=${cfg#*=}
  bin=${rest%%:*} flags=${rest#*:}
  port=$((PORT + 10 * i))
  log=$(mktemp /tmp/harrier-inline-bench.XXXXXX.log)
  logs+=("$log")
  # shellcheck disable=SC2046
  "$bin" serve --model-repository "$BH/repo" --http-port "$port" --grpc-port $((port + 1)) \
    --metrics-port $((port + 2)) $(tr ',' ' ' <<<"$flags") >"$log" 2>&1 &
  pids+=($!) labels+=("$label") ports+=("$port")
  for _ in $(seq 1 600); do grep -q "listening on gRPC" "$log" && break; sleep 0.1; done
  i=$((i + 1))
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; rm -f "${logs[@]}"' EXIT
use_kit_body "$MODEL"
lua=$POST_LUA
load() { # proto port conns dur
  if [ "$1" = rest ]; then
    wrk -t1 -c"$3" -d"${4}s" --timeout 10s -s "$lua" "http://127.0.0.1:$2/v2/models/$MODEL/infer" |
      grep RESULT
  else
    "$B/bench/grpc_load" --target "127.0.0.1:$(($2 + 1))" --model "$MODEL" --input "$INPUT" \
      --connections "$3" --duration "$4" --warmup 0 | grep RESULT
  fi
}
n=${#pids[@]}
for round in $(seq 1 "$ROUNDS"); do
  for p in $PROTOS; do
    for c in $CONNS; do
      for k in $(seq 0 $((n - 1))); do
        j=$(((k + round - 1) % n))
        load "$p" "${ports[$j]}" "$c" 1 >/dev/null
        t0=$(cpu_ticks "${pids[$j]}")
        r=$(load "$p" "${ports[$j]}" "$c" "$DUR")
        cpu=$(us_per_request $(($(cpu_ticks "${pids[$j]}") - t0)) "$r")
        echo "round$round $MODEL $p c=$c ${labels[$j]} ${r#RESULT } server_cpu_us_per_req=$cpu"
      done
    done
  done
done
