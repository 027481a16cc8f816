#!/bin/bash
# Memory across model swaps (issue 12): N load/unload cycles of one model in explicit mode,
# the server's RSS (VmRSS from /proc) after the first load and after every 10th cycle.
#   bench/lifecycle_rss.sh [BUILD_DIR]     env: MODEL (resnet50), CYCLES (100), HARRIER_FLAGS
# Uses the shared kit's repository (../shared/bench: $BENCH_HOME/repo, ~/.cache/harrier-bench);
# prints "cycle N rss_mib M" lines and the final ratio, then, SETTLE seconds (35) later, the RSS
# once the server has given back what its loads kept (--model-load-retain-mb is given back after
# 30 s without a load) and that ratio. The server runs with the process's default allocator
# (glibc malloc) unless HARRIER_FLAGS / LD_PRELOAD say otherwise.
set -euo pipefail
B=${1:-build}
BH=${BENCH_HOME:-$HOME/.cache/harrier-bench}
MODEL=${MODEL:-resnet50}
CYCLES=${CYCLES:-100}
SETTLE=${SETTLE:-35}
PORT=${PORT:-19800}
# shellcheck disable=SC2086
"$B/harrier" serve --model-repository "$BH/repo" --http-port "$PORT" --grpc-port $((PORT + 1)) \
  --metrics-port $((PORT + 2)) --model-control-mode explicit --load-model "$MODEL" \
  ${HARRIER_FLAGS:-} >"$BH/logs/lifecycle_rss.log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/models/$MODEL/ready" && break
  sleep 0.1
done
rss() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$PID/status"; }
start=$(rss)
echo "cycle 0 rss_mib $start"
for i in $(seq 1 "$CYCLES"); do
  curl -sf -o /dev/null -X POST "http://127.0.0.1:$PORT/v2/repository/models/$MODEL/unload"
  # Unload answers once the version is out of rotation; wait until it is freed.
  for _ in $(seq 300); do
    curl -s -X POST "http://127.0.0.1:$PORT/v2/repository/index" | grep -q '"reason":"unloaded"' && break
    sleep 0.05
  done
  curl -sf -o /dev/null -X POST "http://127.0.0.1:$PORT/v2/repository/models/$MODEL/load"
  if (( i % 10 == 0 )); then echo "cycle $i rss_mib $(rss)"; fi
done
end=$(rss)
sleep "$SETTLE"
settled=$(rss)
awk -v s="$start" -v e="$end" -v d="$settled" 'BEGIN {
  printf "RESULT start_mib=%.1f end_mib=%.1f ratio=%.3f settled_mib=%.1f settled_ratio=%.3f\n",
    s, e, e / s, d, d / s }'
