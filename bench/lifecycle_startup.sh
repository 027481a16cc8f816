#!/bin/bash
# Start-up time to ready with parallel loads (issue 12): a repository of COPIES copies of one
# model (hard links to the kit's file), the server started with --model-load-thread-count N for
# each N of COUNTS, ROUNDS rounds with the counts alternated; the seconds from the process's
# start to the first 200 on /v2/health/ready.
#   bench/lifecycle_startup.sh [BUILD_DIR]   env: MODEL (resnet50), COPIES (4), COUNTS ("1 2 4"),
#                                            ROUNDS (3), HARRIER_FLAGS
# Uses the shared kit's model file ($BENCH_HOME/models/$MODEL.onnx, ~/.cache/harrier-bench);
# prints "round R threads N ready_s S" lines, then each count's median.
set -euo pipefail
B=${1:-build}
BH=${BENCH_HOME:-$HOME/.cache/harrier-bench}
MODEL=${MODEL:-resnet50}
COPIES=${COPIES:-4}
COUNTS=${COUNTS:-1 2 4}
ROUNDS=${ROUNDS:-3}
PORT=${PORT:-19810}
REPO=$(mktemp -d "${TMPDIR:-/tmp}/harrier-startup-XXXXXX")
PID=
cleanup() {
  if [[ -n $PID ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$REPO"
}
trap cleanup EXIT
for i in $(seq 1 "$COPIES"); do
  mkdir -p "$REPO/$MODEL$i/1"
  ln "$BH/models/$MODEL.onnx" "$REPO/$MODEL$i/1/model.onnx" 2>/dev/null ||
    cp "$BH/models/$MODEL.onnx" "$REPO/$MODEL$i/1/model.onnx"
done
mkdir -p "$BH/logs"
RESULTS=$(mktemp)
for r in $(seq 1 "$ROUNDS"); do
  for n in $COUNTS; do
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$B/harrier" serve --model-repository "$REPO" --http-port "$PORT" --grpc-port $((PORT + 1)) \
      --metrics-port $((PORT + 2)) --model-load-thread-count "$n" ${HARRIER_FLAGS:-} \
      >"$BH/logs/lifecycle_startup.log" 2>&1 &
    PID=$!
    for _ in $(seq 6000); do
      curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
      sleep 0.02
    done
    end=$(date +%s.%N)
    kill "$PID"
    wait "$PID" || true
    PID=
    s=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    echo "round $r threads $n ready_s $s"
    echo "$n $s" >>"$RESULTS"
  done
done
for n in $COUNTS; do
  awk -v n="$n" '$1 == n { print $2 }' "$RESULTS" | sort -n | awk -v n="$n" '{ v[++c] = $1 } END {
    m = (c % 2) ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
    printf "RESULT threads=%s median_ready_s=%.2f runs=%d\n", n, m, c }'
done
rm -f "$RESULTS"
