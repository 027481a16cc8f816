#!/usr/bin/env bash
# ResNet-50 through system shared memory against binary HTTP and gRPC, one connection, one
# request at a time, on the same server in one run (docs/benchmarks.md, "System shared memory").
#
#   bench/shared_memory.sh [BUILD_DIR]   (BUILD_DIR: default build; needs bench/grpc_load built)
#   env: DUR (15 s per measured run), ROUNDS (2), PORT (18100: HTTP; PORT+1 gRPC; PORT+2 metrics)
#
# Serves the kit's ResNet-50 (~/.cache/harrier-bench/models/resnet50.onnx, linked into a
# repository of its own) with --allow-client-shm true. The input is the kit's body
# (bodies/resnet50.bin: a JSON header, then the 1x3x224x224 FP32 image). Per round, each for
# DUR s after a 2 s warm-up, a closed loop of one outstanding request:
#   rest-bin   wrk + the kit's post.lua: the kit's body, logits back as binary data
#   rest-shm   wrk + post.lua: a JSON header naming the regions; the image is read from one
#              /dev/shm object (no copy into ONNX Runtime: the mapping is page-aligned) and the
#              logits written to another; the response carries no tensor data
#   grpc-raw   bench/grpc_load: raw_input_contents in, raw_output_contents out
# Each line is the client's RESULT (p50/p99 in us) plus the server's CPU time per request
# (utime + stime from /proc over the measured run). `uptime` is printed first and last: the
# machine is shared, so compare modes within one run, not across runs.
set -u
B=${1:-build}
. "$(dirname "$0")/lib.sh"
DUR=${DUR:-15}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-18100}
WORK=$(mktemp -d /tmp/harrier-shm-bench.XXXXXX)
IN=harrier_bench_in_$$
OUT=harrier_bench_out_$$
mkdir -p "$WORK/repo/resnet50/1"
ln -s "$BH/models/resnet50.onnx" "$WORK/repo/resnet50/1/model.onnx"
LOG=$WORK/harrier.log
"$B/harrier" serve --model-repository "$WORK/repo" --http-port "$PORT" \
  --grpc-port $((PORT + 1)) --metrics-port $((PORT + 2)) --allow-client-shm true >"$LOG" 2>&1 &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID; rm -f /dev/shm/$IN /dev/shm/$OUT; rm -rf "$WORK"' EXIT
for _ in $(seq 1 1200); do grep -q "listening on gRPC" "$LOG" && break; sleep 0.1; done
grep -q "listening on gRPC" "$LOG" || { echo "server did not start:"; tail "$LOG"; exit 1; }

# The image: the kit body's bytes after its JSON header, into /dev/shm/$IN; 4 KiB for logits.
IHCL_KIT=$(cat "$BH/bodies/resnet50.bin.ihcl")
tail -c +$((IHCL_KIT + 1)) "$BH/bodies/resnet50.bin" >"/dev/shm/$IN"
IMAGE_BYTES=$(stat -c %s "/dev/shm/$IN")
head -c 4096 /dev/zero >"/dev/shm/$OUT"
base=http://127.0.0.1:$PORT/v2
curl -sf -X POST "$base/systemsharedmemory/region/in/register" \
  -d "{\"key\":\"/$IN\",\"offset\":0,\"byte_size\":$IMAGE_BYTES}" || exit 1
curl -sf -X POST "$base/systemsharedmemory/region/out/register" \
  -d "{\"key\":\"/$OUT\",\"offset\":0,\"byte_size\":4096}" || exit 1
printf '%s' "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,3,224,224],\"datatype\":\"FP32\"," \
  "\"parameters\":{\"shared_memory_region\":\"in\",\"shared_memory_byte_size\":$IMAGE_BYTES}}]," \
  "\"outputs\":[{\"name\":\"logits\",\"parameters\":{\"shared_memory_region\":\"out\"," \
  "\"shared_memory_byte_size\":4096}}]}" >"$WORK/shm.json"
# One request of each kind must succeed before anything is measured.
curl -sf "$base/models/resnet50/infer" -H 'Content-Type: application/json' \
  --data-binary @"$WORK/shm.json" >/dev/null || { echo "shared-memory request failed"; exit 1; }

report() { # label result-line cpu-ticks
  echo "$1 ${2#RESULT } server_cpu_us_per_req=$(us_per_request "$3" "$2")"
}
url=$base/models/resnet50/infer
echo "load before: $(uptime)"
for round in $(seq 1 "$ROUNDS"); do
  for mode in rest-bin rest-shm grpc-raw; do
    case $mode in
      rest-bin) use_kit_body resnet50 ;;
      rest-shm) export BODY=$WORK/shm.json CTYPE=application/json IHCL= ;;
    esac
    if [[ $mode == grpc-raw ]]; then
      run() { "$B/bench/grpc_load" --target "127.0.0.1:$((PORT + 1))" --model resnet50 \
        --input input:FP32:1x3x224x224 --connections 1 --duration "$1" --warmup 0; }
    else
      run() { wrk -t1 -c1 -d"${1}s" --timeout 10s -s "$POST_LUA" "$url"; }
    fi
    run 2 >/dev/null 2>&1
    t0=$(cpu_ticks $PID)
    r=$(run "$DUR" | grep RESULT)
    report "round$round resnet50 $mode c=1" "$r" $(($(cpu_ticks $PID) - t0))
  done
done
echo "load after: $(uptime)"
