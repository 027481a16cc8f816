#!/usr/bin/env bash
# What tracing costs the request path (docs/benchmarks.md, "Tracing (issue 5)").
#
#   bench/tracing.sh [BUILD_DIR]       (BUILD_DIR: default build)
#   env: MODEL (tiny), CONNS ("1 16"), DUR (10 s), ROUNDS (2), RATIOS ("off 0 0.01 1"),
#        PORT (18100: HTTP; PORT+1 gRPC; PORT+2 metrics; PORT+3 the OTLP sink)
#
# Serves the shared kit's repository (~/.cache/harrier-bench/repo, made by
# ../shared/bench/compare.sh) once per tracing setting — off (no --trace-endpoint), then
# --trace-sample-ratio R for each R — with an nginx OTLP sink that answers every POST 200 and
# discards it (so the receiver costs as little as it can; it shares the 2 cores). For each
# setting and connection count: REST binary with wrk and the kit's post.lua (2 s warm-up, then
# DUR s). Settings alternate within a round, so a round's lines are comparable. Each line is
# wrk's RESULT, the server's CPU time per request (utime + stime from /proc over the measured run,
# which includes the export thread) and the tracer's counters from /metrics.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
DUR=${DUR:-10}
ROUNDS=${ROUNDS:-2}
MODEL=${MODEL:-tiny}
CONNS=${CONNS:-1 16}
RATIOS=${RATIOS:-off 0 0.01 1}
PORT=${PORT:-18100}
SINK_PORT=$((PORT + 3))
TMP=$(mktemp -d /tmp/harrier-trace-bench.XXXXXX)
cat >"$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log;
events { worker_connections 256; }
http {
  access_log off;
  client_body_temp_path $TMP;
  client_max_body_size 64m;
  server {
    listen 127.0.0.1:$SINK_PORT;
    location / { return 200 '{}'; }
  }
}
EOF
nginx -c "$TMP/nginx.conf" -p "$TMP" &
SINK=$!
PID=
cleanup() {
  [[ -n $PID ]] && kill -TERM "$PID" 2>/dev/null && wait "$PID"
  kill -TERM "$SINK" 2>/dev/null
  wait "$SINK" 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
use_kit_body "$MODEL"
url=http://127.0.0.1:$PORT/v2/models/$MODEL/infer
lua=$POST_LUA
for round in $(seq 1 "$ROUNDS"); do
  for ratio in $RATIOS; do
    args=()
    [[ $ratio != off ]] && args=(--trace-endpoint "http://127.0.0.1:$SINK_PORT/v1/traces"
      --trace-sample-ratio "$ratio")
    "$B/harrier" serve --model-repository "$BH/repo" --http-port "$PORT" \
      --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) "${args[@]}" >"$TMP/harrier.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 600); do grep -q "listening on HTTP" "$TMP/harrier.log" && break; sleep 0.1; done
    for c in $CONNS; do
      wrk -t1 -c"$c" -d2s -s "$lua" "$url" >/dev/null 2>&1
      t0=$(cpu_ticks "$PID")
      r=$(wrk -t1 -c"$c" -d"${DUR}s" --timeout 10s -s "$lua" "$url" | grep RESULT)
      cpu=$(us_per_request $(($(cpu_ticks "$PID") - t0)) "$r")
      spans=$(curl -s "http://127.0.0.1:$((PORT + 2))/metrics" |
        awk '/^harrier_trace_spans_(exported|dropped)_total/ {printf "%s=%s ", $1, $2}')
      echo "round$round ratio=$ratio c=$c ${r#RESULT } server_cpu_us_per_req=$cpu $spans"
    done
    kill -TERM "$PID"
    wait "$PID"
    PID=
  done
done
