#!/usr/bin/env bash
# Fuzzes the KServe codec with libFuzzer under ASan + UBSan.
#   tools/fuzz.sh [SECONDS]     default 60; corpus in tests/fuzz/corpus (seeds committed),
#                               findings in build-fuzz/ (crash-*, timeout-*, oom-*)
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev); installs them if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if ! command -v clang++ >/dev/null || [[ ! -e /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a ]]; then
  apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
out=build-fuzz
mkdir -p "$out" tests/fuzz/corpus
srcs=(tests/fuzz/infer_codec_fuzzer.cc src/protocol/kserve/infer_request_decoder.cc
      src/protocol/kserve/infer_response_encoder.cc src/protocol/kserve/utf8.cc
      src/core/json_writer.cc src/core/tensor.cc src/core/data_type.cc src/core/status.cc)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -Iinclude -Isrc "${srcs[@]}" -lsimdjson -o "$out/infer_codec_fuzzer"
# Work on a copy so new corpus entries do not dirty the tree; seeds stay as committed.
rm -rf "$out/corpus" && cp -r tests/fuzz/corpus "$out/corpus"
"$out/infer_codec_fuzzer" "$out/corpus" -max_total_time="$seconds" -max_len=4096 \
  -rss_limit_mb=2048 -timeout=5 -artifact_prefix="$out/" -print_final_stats=1
