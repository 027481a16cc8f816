#!/usr/bin/env bash
# Tiny-model throughput with the access log off and on (docs/benchmarks.md, "Access log
# (issue 5)").
#
# usage: bench/access_log.sh BUILD_DIR [SECONDS] [ROUNDS]
#
# Serves examples/models (the `simple` model: two INT32 [1,16] inputs) and, per round, starts
# harrier with --access-log off, then on (--log-format json, lines to a file in a temp dir, so
# that the terminal is not the bottleneck), each time a 2 s warm-up and SECONDS (default 10)
# of wrk at 16 connections, 1 thread, a prepared JSON body. ROUNDS (default 2) alternations.
# Prints one RESULT line per run, and for the "on" runs the lines the access log got during the
# measured part (which includes the few requests wrk had in flight when it stopped).
set -euo pipefail
build=${1:?usage: bench/access_log.sh BUILD_DIR [SECONDS] [ROUNDS]}
DUR=${2:-10}
ROUNDS=${3:-2}
src=$(cd "$(dirname "$0")/.." && pwd)
peers=$(cd "$src/../shared/peers" && pwd)
work=$(mktemp -d)
PID=
trap '[[ -n $PID ]] && kill $PID 2>/dev/null; [[ -n $PID ]] && wait $PID 2>/dev/null; rm -rf "$work"' EXIT

python3 - "$work/simple.json" <<'PY'
import json, sys
json.dump({"inputs": [
    {"name": "INPUT0", "shape": [1, 16], "datatype": "INT32", "data": list(range(16))},
    {"name": "INPUT1", "shape": [1, 16], "datatype": "INT32", "data": [1] * 16}]},
    open(sys.argv[1], "w"))
PY

run() { # off|on
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local file=()
  [ "$1" = on ] && file=(--access-log-file "$work/access.log")  # a usage error with it off
  "$build/harrier" serve --model-repository "$src/examples/models" --http-port "$port" \
    --grpc-port 0 --metrics-port 0 --log-format json --access-log "$1" \
    "${file[@]}" ${HARRIER_ARGS:-} >"$work/harrier.log" 2>&1 &
  PID=$!
  for _ in $(seq 200); do
    curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null && break
    sleep 0.2
  done
  local url=http://127.0.0.1:$port/v2/models/simple/infer r
  BODY=$work/simple.json CTYPE=application/json wrk -t1 -c16 -d2s -s "$peers/post.lua" \
    "$url" >/dev/null 2>&1 || true
  local before=0
  [[ -f $work/access.log ]] && before=$(wc -l <"$work/access.log")
  r=$(BODY=$work/simple.json CTYPE=application/json wrk -t1 -c16 -d"${DUR}s" --timeout 10s \
    -s "$peers/post.lua" "$url" | grep '^RESULT')
  kill $PID; wait $PID || true
  PID=
  local lines=""
  [[ $1 == on ]] && lines=" access_lines=$(($(wc -l <"$work/access.log") - before))"
  echo "access-log=$1 ${r#RESULT }$lines"
}

for _ in $(seq "$ROUNDS"); do
  run off
  run on
done
