#!/bin/bash
# Another model's latency while one reloads in a loop (issue 12): the kit's tiny model under
# steady load (wrk, the kit's post.lua and binary body, CONNS connections) for DUR seconds with
# no reload, then DUR seconds while RELOAD (resnet50) is reloaded back to back through the load
# API, alternated ROUNDS times in one server (a quiet run starts after the last reload has
# finished). Prints wrk's RESULT line per run, the reloads done and the p99 ratio (reloading /
# quiet) per round. With HOG=1 (the default) each round also runs DUR seconds beside a control:
# one single-threaded busy loop in another process at the lifecycle thread's nice +10, which is
# what any other core of work costs the tiny model on this machine; the round then prints the
# ratios (hog / quiet) and (reloading / hog) as well. RELOAD_EVERY=S starts a reload every S
# seconds (or at once when the last took longer) instead of back to back, so that builds whose
# reloads take different times are compared at the same number of reloads.
#   bench/lifecycle_p99.sh [BUILD_DIR]   env: DUR (10), ROUNDS (2), CONNS (1), RELOAD (resnet50),
#                                        HOG (1), RELOAD_EVERY (0: back to back), HARRIER_FLAGS
set -euo pipefail
B=${1:-build}
BH=${BENCH_HOME:-$HOME/.cache/harrier-bench}
DUR=${DUR:-10}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-1}
RELOAD=${RELOAD:-resnet50}
HOG=${HOG:-1}
RELOAD_EVERY=${RELOAD_EVERY:-0}
PORT=${PORT:-19850}
POST_LUA=$(dirname "${BASH_SOURCE[0]}")/../../shared/peers/post.lua
# shellcheck disable=SC2086
"$B/harrier" serve --model-repository "$BH/repo" --http-port "$PORT" --grpc-port $((PORT + 1)) \
  --metrics-port $((PORT + 2)) --model-control-mode explicit --load-model '*' \
  ${HARRIER_FLAGS:-} >"$BH/logs/lifecycle_p99.log" 2>&1 &
PID=$!
RELOADER=""
HOGGER=""
cleanup() {
  [[ -n $RELOADER ]] && kill "$RELOADER" 2>/dev/null
  [[ -n $HOGGER ]] && kill "$HOGGER" 2>/dev/null
  kill "$PID" 2>/dev/null
  wait 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 600); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
  sleep 0.1
done
export BODY=$BH/bodies/tiny.bin CTYPE=application/octet-stream IHCL
IHCL=$(cat "$BH/bodies/tiny.bin.ihcl")
url=http://127.0.0.1:$PORT/v2/models/tiny/infer
run() { wrk -t1 -c"$CONNS" -d"${DUR}s" --timeout 10s -s "$POST_LUA" "$url" | grep '^RESULT'; }
p99() { sed 's/.*p99_us=\([0-9]*\).*/\1/' <<<"$1"; }
wrk -t1 -c"$CONNS" -d2s -s "$POST_LUA" "$url" >/dev/null
for round in $(seq "$ROUNDS"); do
  quiet=$(run)
  echo "round $round quiet     $quiet"
  reloads=$(mktemp)
  stop=$reloads.stop
  # One long-lived client at nice +19 asks for the reloads: a curl per reload (fork, exec, a
  # new connection, at normal priority) delayed the measured model's threads where the
  # server's own reload work did not (perf sched, session 14).
  nice -n 19 /usr/bin/python3 - "$PORT" "$RELOAD" "$RELOAD_EVERY" "$stop" "$reloads" <<'PY' &
import http.client, os, sys, time
port, model, every, stop, out = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
done = 0
while not os.path.exists(stop):
    start = time.monotonic()
    conn.request("POST", "/v2/repository/models/%s/load" % model, body=b"")
    answer = conn.getresponse()
    answer.read()
    done += answer.status == 200
    time.sleep(max(0.0, start + every - time.monotonic()))
with open(out, "w") as f:
    f.write("%d\n" % done)
PY
  RELOADER=$!
  busy=$(run)
  # The load in flight finishes before the next quiet run (killing the loop would leave it
  # running in the server, under the next "quiet" figures).
  touch "$stop"; wait "$RELOADER" 2>/dev/null || true
  RELOADER=""
  rm -f "$stop"
  echo "round $round reloading $busy reloads=$(cat "$reloads")"
  rm -f "$reloads"
  awk -v q="$(p99 "$quiet")" -v b="$(p99 "$busy")" -v r="$round" \
    'BEGIN { printf "round %d p99 ratio (reloading / quiet) %.2f\n", r, b / q }'
  if [[ $HOG == 1 ]]; then
    nice -n 10 awk 'BEGIN { while (1) x++ }' &
    HOGGER=$!
    hogged=$(run)
    kill "$HOGGER"; wait "$HOGGER" 2>/dev/null || true
    HOGGER=""
    echo "round $round hog       $hogged"
    awk -v q="$(p99 "$quiet")" -v b="$(p99 "$busy")" -v h="$(p99 "$hogged")" -v r="$round" \
      'BEGIN { printf "round %d p99 ratio (hog / quiet) %.2f (reloading / hog) %.2f\n", r, h / q, b / h }'
  fi
done
errors=$(grep -c ' E ' "$BH/logs/lifecycle_p99.log" || true)
echo "server error lines: $errors"
