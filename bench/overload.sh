#!/usr/bin/env bash
# Overload run (issue 3): ResNet-50 with and without dynamic batching, each at FACTOR x its
# unprotected capacity for MINUTES consecutive periods of SECONDS, with default flags (overload
# protection on, nothing configured). Per repository: with overload protection off, the
# capacity (16 closed-loop connections) and then the same open-loop overload for
# UNPROTECTED_SECONDS (default 20; its admitted throughput is the baseline under the same
# client load, its queue is bounded only by the in-flight limit); then, against a fresh server
# with the defaults, the unloaded latency and the overload periods (bench/overload.py), with
# the server's RSS before and after each period.
#   bench/overload.sh BUILD_DIR [SECONDS] [MINUTES] [FACTOR]
# Needs the kit's models and bodies (run ../shared/bench/compare.sh once) in BENCH_HOME.
# REPOS (space-separated: kit nobatch) narrows the run; HARRIER_FLAGS are added to the
# protected server's command line (e.g. "--http-refusal-hold-ms 0").
set -euo pipefail
build=$(realpath "${1:-build}")
seconds=${2:-60}
minutes=${3:-2}
factor=${4:-4}
B=${BENCH_HOME:-$HOME/.cache/harrier-bench}
here=$(cd "$(dirname "$0")" && pwd)
port=${BENCH_PORT:-18950}
work=$(mktemp -d)
pid=""
trap 'if [[ -n $pid ]]; then kill $pid 2>/dev/null || true; fi; rm -rf "$work"' EXIT

repo() { # name config ('' for none: the auto-completed config)
  mkdir -p "$work/$1/resnet50/1"
  ln -sf "$B/models/resnet50.onnx" "$work/$1/resnet50/1/model.onnx"
  if [[ -n $2 ]]; then printf '%s\n' "$2" > "$work/$1/resnet50/config.pbtxt"; fi
}
# The kit's repository: no config.pbtxt, auto-completed to max_batch_size 4 + dynamic_batching.
repo kit ''
repo nobatch 'max_batch_size: 8'

start() { # repo, extra flags...
  local r=$1
  shift
  port=$((port + 1))
  "$build/harrier" serve --model-repository "$work/$r" --http-port $port --grpc-port 0 --metrics-port 0 "$@" >"$work/harrier.log" 2>&1 &
  pid=$!
  for _ in $(seq 150); do curl -sf -o /dev/null "localhost:$port/v2/health/ready" && return; sleep 0.2; done
  echo "harrier did not become ready:" >&2
  cat "$work/harrier.log" >&2
  exit 1
}
stop() {
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
}

echo "machine: $(nproc) cores; $(uptime)"
ihcl=$(cat "$B/bodies/resnet50.bin.ihcl")
for r in ${REPOS:-kit nobatch}; do
  echo "== resnet50, repository '$r'"
  common=(--body "$B/bodies/resnet50.bin" --ihcl "$ihcl")
  start "$r" --overload-protection off
  url=http://127.0.0.1:$port/v2/models/resnet50/infer
  out=$(/usr/bin/python3 "$here/overload.py" --url "$url" "${common[@]}" --pid "$pid" \
    --capacity-only --capacity-workers 16 --capacity-seconds 10)
  echo "overload protection off: $out"
  capacity=$(sed -n 's/^capacity ([^)]*): \([0-9.]*\) req\/s.*/\1/p' <<<"$out")
  echo "overload protection off, the same overload for ${UNPROTECTED_SECONDS:-20} s:"
  /usr/bin/python3 "$here/overload.py" --url "$url" "${common[@]}" --pid "$pid" \
    --capacity "$capacity" --factor "$factor" --seconds "${UNPROTECTED_SECONDS:-20}" --minutes 1 --workers 64
  stop
  # shellcheck disable=SC2086 # HARRIER_FLAGS: words
  start "$r" ${HARRIER_FLAGS:-}
  url=http://127.0.0.1:$port/v2/models/resnet50/infer
  /usr/bin/python3 "$here/overload.py" --url "$url" "${common[@]}" --pid "$pid" \
    --capacity "$capacity" --factor "$factor" --seconds "$seconds" --minutes "$minutes" --workers 64
  echo "after: $(uptime)"
  stop
done
