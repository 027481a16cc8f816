#!/usr/bin/env bash
# Scheduling benchmarks (issue 3): the kit's tiny model and ResNet-50 at 1, 4, 16, 64
# connections, with and without dynamic batching, beside the raw ONNX Runtime loop at batch
# 1, 4 and 8. Binary bodies, wrk closed loop, overload protection off (it would turn the
# excess of a closed loop into 429s, which is the overload run's subject, not this one's).
#   bench/scheduling.sh BUILD_DIR [SECONDS]
# MODES, CONNS, RAW_BATCHES (space-separated) narrow the run.
# Needs the kit's models and bodies (run ../shared/bench/compare.sh once) in BENCH_HOME.
set -euo pipefail
build=$(realpath "${1:-build}")
dur=${2:-8}
B=${BENCH_HOME:-$HOME/.cache/harrier-bench}
lua=$(cd "$(dirname "$0")/../../shared/peers" && pwd)/post.lua
port=${BENCH_PORT:-18900}
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null || true; rm -rf "$work"' EXIT
pid=""

repo() { # name model config
  mkdir -p "$work/$1/$2/1"
  ln -sf "$B/models/$2.onnx" "$work/$1/$2/1/model.onnx"
  printf '%s\n' "$3" > "$work/$1/$2/config.pbtxt"
}
repo tiny-single tiny 'max_batch_size: 64'
repo tiny-batch tiny 'max_batch_size: 64 dynamic_batching { }'
repo resnet50-single resnet50 'max_batch_size: 8'
repo resnet50-batch resnet50 'max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 5000 }'
# Adaptive: no fixed delay; Harrier waits only while it expects another request within the
# latency target (docs/scheduling.md).
repo tiny-adaptive tiny 'max_batch_size: 64 dynamic_batching { } parameters { key: "harrier.batching.target_p99_us" value: { string_value: "1000" } }'
repo resnet50-adaptive resnet50 'max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 8 ] } parameters { key: "harrier.batching.target_p99_us" value: { string_value: "300000" } }'

for model in tiny resnet50; do
  for b in ${RAW_BATCHES-1 4 8}; do
    runs=$([[ $model == tiny ]] && echo 100000 || echo 30)
    echo "$model raw threads=2 batch=$b $("$B/raw_ort" "$B/models/$model.onnx" --threads 2 --batch $b --runs $runs | tail -n 1)"
  done
  for mode in ${MODES:-single batch adaptive}; do
    port=$((port + 1))
    "$build/harrier" serve --model-repository "$work/$model-$mode" --http-port $port --grpc-port 0 --metrics-port 0 --overload-protection off \
      >"$work/harrier.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf -o /dev/null localhost:$port/v2/health/ready && break; sleep 0.2; done
    url=http://127.0.0.1:$port/v2/models/$model/infer
    for c in ${CONNS:-1 4 16 64}; do
      env BODY="$B/bodies/$model.bin" CTYPE=application/octet-stream IHCL="$(cat "$B/bodies/$model.bin.ihcl")" \
        wrk -t1 -c$c -d2s -s "$lua" "$url" >/dev/null 2>&1 || true
      r=$(env BODY="$B/bodies/$model.bin" CTYPE=application/octet-stream IHCL="$(cat "$B/bodies/$model.bin.ihcl")" \
        wrk -t1 -c$c -d${dur}s --timeout 20s -s "$lua" "$url" | grep '^RESULT' || true)
      echo "$model harrier $mode c=$c ${r#RESULT }"
    done
    curl -s localhost:$port/v2/models/$model/stats | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)["model_stats"][0]
print("   executions", s["execution_count"], "inferences", s["inference_count"],
      "batch sizes", {b["batch_size"]: b["compute_infer"]["count"] for b in s["batch_stats"]})'
    kill $pid; wait $pid 2>/dev/null || true; pid=""
  done
done
