#!/usr/bin/env bash
# User-space instructions per request, counted by Valgrind's callgrind: the one figure of the
# request path's cost that does not move with the host (docs/benchmarks.md, "Instructions per
# request"). Wall-clock and CPU-time figures on this shared 2-core virtual machine spread 2-3x
# between runs; an instruction count repeats within a fraction of a percent, so it shows a
# change of a few percent in Harrier's own code that no throughput run here can.
#
#   bench/instructions.sh [BUILD_DIR]   (needs valgrind, wrk and the shared kit's bodies)
#   env: MODEL (tiny), CONNS (16), DUR (8 s of counted load), FLAGS (extra server flags,
#        space-separated), PORT (18960), OUT (where callgrind's file is kept; default a
#        temporary file, removed), TOP (20: functions listed by their own instructions)
#
# The server runs under callgrind with counting off; after it is ready and a 2 s warm-up, counting
# is switched on for one wrk run (binary body, the kit's post.lua) and off again. Printed: the
# requests answered, instructions per request in all, per shared object (harrier, ONNX Runtime,
# libc, ...), and the TOP functions by their own instructions per request. What it does not see:
# the kernel (system calls, TCP, scheduling), which is more than half of a request's CPU here.
# Under Valgrind threads run one at a time and far slower, so which path a request takes
# (inline or through the model's worker) can differ from a normal run's: compare builds, not
# this figure with a wall-clock one.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
MODEL=${MODEL:-tiny}
CONNS=${CONNS:-16}
DUR=${DUR:-8}
PORT=${PORT:-18960}
TOP=${TOP:-20}
FLAGS=${FLAGS:-}
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
work=$(mktemp -d /tmp/harrier-instructions.XXXXXX)
mkdir -p "$work/repo/$MODEL/1"
ln -s "$BH/models/$MODEL.onnx" "$work/repo/$MODEL/1/model.onnx"
out=${OUT:-$work/callgrind.out}
# shellcheck disable=SC2086
ORT_DISABLE_TELEMETRY=1 valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" \
  "$B/harrier" serve --model-repository "$work/repo" --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) $FLAGS >"$work/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 600); do
  curl -sf -o /dev/null "http://127.0.0.1:$PORT/v2/health/ready" && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
  sleep 0.5
done
use_kit_body "$MODEL"
url=http://127.0.0.1:$PORT/v2/models/$MODEL/infer
wrk -t1 -c"$CONNS" -d2s --timeout 10s -s "$POST_LUA" "$url" >/dev/null
callgrind_control -i on "$pid" >/dev/null
result=$(wrk -t1 -c"$CONNS" -d"${DUR}s" --timeout 10s -s "$POST_LUA" "$url" | grep RESULT)
callgrind_control -i off "$pid" >/dev/null
callgrind_control -d "$pid" >/dev/null
requests=$(sed -E 's/.*requests=([0-9]+).*/\1/' <<<"$result")
dump=$(ls "$out".* 2>/dev/null | tail -1)
[[ -n $dump && $requests -gt 0 ]] || { echo "no dump or no requests: $result" >&2; exit 1; }
echo "$MODEL c=$CONNS flags='$FLAGS': $result"
# Self cost per function; the object is the last [/...] on the line.
callgrind_annotate --auto=no --threshold=100 "$dump" 2>/dev/null |
  awk -v n="$requests" -v top="$TOP" '
    /PROGRAM TOTALS/ { gsub(",", "", $1); printf "instructions per request: %.0f\n", $1 / n; next }
    /^ *[0-9,]+ +\([ 0-9.]+%\)  / {
      ir = $1; gsub(",", "", ir)
      # No object named (callgrind_annotate leaves it out at times): the sources of glibc are named
      # "./...", the rest are headers (of C++, Boost and Harrier) inlined into the binary.
      obj = ($0 ~ /%\)  \.\//) ? "libc.so.6" : "harrier"
      if (match($0, /\[\/[^]]*\]$/)) { obj = substr($0, RSTART + 1, RLENGTH - 2); sub(".*/", "", obj) }
      by[obj] += ir
      if (shown < top) { fn = $0; sub(/^ *[0-9,]+ +\([ 0-9.]+%\)  /, "", fn); sub(/ \[\/[^]]*\]$/, "", fn)
        sub(/^[^:]*:/, "", fn); lines[++shown] = sprintf("%9.0f  %s", ir / n, substr(fn, 1, 150)) }
    }
    END {
      print "by object (instructions per request):"
      for (o in by) printf "%9.0f  %s\n", by[o] / n, o | "sort -rn"
      close("sort -rn")
      print "top functions by own instructions (per request):"
      for (i = 1; i <= shown; i++) print lines[i]
    }'
