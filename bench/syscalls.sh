#!/usr/bin/env bash
# System calls, context switches and CPU per request, Harrier's threads against nginx's fixed
# answer (the kit's floor), under the same wrk load (docs/benchmarks.md, "System calls per
# request"). Counts, not times: they repeat from run to run on this shared machine where
# throughput does not, and they show what the kernel side of a request costs, which callgrind
# (bench/instructions.sh) cannot see.
#
#   bench/syscalls.sh [BUILD_DIR]   (needs perf, wrk, nginx and the shared kit's bodies)
#   env: MODEL (tiny), CONNS (16), DUR (6 s counted), PORT (18970; nginx PORT+10),
#        FLAGS (extra server flags, space-separated), FLOOR (1: also count nginx; 0: not)
#
# Each server gets a 2 s warm-up, then `perf stat --per-thread -p PID` over one wrk run. Printed:
# the run's RESULT line, then per thread (name-tid) each event divided by the requests answered.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
MODEL=${MODEL:-tiny}
CONNS=${CONNS:-16}
DUR=${DUR:-6}
PORT=${PORT:-18970}
FLAGS=${FLAGS:-}
FLOOR=${FLOOR:-1}
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 1; }
EVENTS=task-clock,context-switches,raw_syscalls:sys_enter
for s in sendmsg sendto writev write recvfrom recvmsg read readv epoll_wait futex; do
  EVENTS+=",syscalls:sys_enter_$s"
done
work=$(mktemp -d /tmp/harrier-syscalls.XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$work"' EXIT
use_kit_body "$MODEL"

# count LABEL PID URL: one counted wrk run against PID's server, events per request per thread.
count() {
  wrk -t1 -c"$CONNS" -d2s -s "$POST_LUA" "$3" >/dev/null
  perf stat --per-thread -e "$EVENTS" -p "$2" -o "$work/$1.perf" -- sleep "$DUR" &
  local stat=$!
  local result
  result=$(wrk -t1 -c"$CONNS" -d"${DUR}s" --timeout 10s -s "$POST_LUA" "$3" | grep RESULT)
  wait "$stat"
  echo "$1 c=$CONNS: $result"
  local n
  n=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$result")
  # perf's per-thread lines: "  name-tid   value   event ..."; task-clock's value is in ms.
  awk -v n="$n" 'NF >= 3 && $2 ~ /^[0-9.,]+$/ {
      v = $2; gsub(",", "", v); if (v + 0 == 0) next
      ev = $3; if (ev == "msec") { ev = "cpu_us"; v *= 1000 }
      sub("syscalls:sys_enter_", "", ev); sub("raw_syscalls:sys_enter", "syscalls", ev)
      per[$1] = per[$1] sprintf(" %s=%.3f", ev, v / n); total[ev] += v / n
    }
    END {
      for (t in per) printf "  %-24s%s\n", t, per[t]
      printf "  %-24s", "all threads"
      for (e in total) printf " %s=%.3f", e, total[e]
      printf "\n"
    }' "$work/$1.perf"
}

mkdir -p "$work/repo/$MODEL/1"
ln -s "$BH/models/$MODEL.onnx" "$work/repo/$MODEL/1/model.onnx"
# shellcheck disable=SC2086
ORT_DISABLE_TELEMETRY=1 "$B/harrier" serve --model-repository "$work/repo" --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) $FLAGS >"$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
  kill -0 "${pids[0]}" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.2
done
count harrier "${pids[0]}" "http://127.0.0.1:$PORT/v2/models/$MODEL/infer"

if [[ $FLOOR == 1 ]]; then
  mkdir -p "$work/nginx"
  sed "s/PORT/$((PORT + 10))/" "$(dirname "$0")/../../shared/peers/nginx-floor.conf" \
    >"$work/nginx/nginx.conf"
  nginx -c "$work/nginx/nginx.conf" -p "$work/nginx" -g 'daemon off;' &
  pids+=($!)
  sleep 1
  worker=$(pgrep -P "${pids[1]}" | head -1)
  count nginx "$worker" "http://127.0.0.1:$((PORT + 10))/v2/models/$MODEL/infer"
fi
