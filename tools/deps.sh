#!/usr/bin/env bash
# Installs everything Harrier's build and tests need on Debian 12. Idempotent: a second run
# does nothing but check. Run as root (or with sudo available).
#
#   Debian packages  compiler, CMake, Boost (Asio/Beast), simdjson, protobuf, spdlog, CLI11,
#                    GoogleTest, Google Benchmark, ccache, python3-onnx/numpy (model generators),
#                    curl, wrk, nginx (benchmark floor), grpc++ and its protoc plugin (gRPC),
#                    nghttp2 + OpenSSL (HTTP/2, TLS) with nghttp/h2load, prometheus (promtool),
#                    chromium (status page test), libcurl (the OTLP trace exporter), strace
#                    (the telemetry test), python3-hpack (the gRPC port's HTTP/2 abuse test),
#                    python3-yaml (the Kubernetes manifests test), haproxy (the scale-out test),
#                    buildah (make image and its test), python3-grpcio (Triton's gRPC QA cases,
#                    through stubs protoc generates at test time)
#   kubectl          Debian's kubernetes-client, unless a kubectl is on PATH already: renders
#                    deploy/kubernetes and deploy/kserve (kubectl kustomize) for their test
#   ONNX Runtime     1.29.0 from the npm package com.github.asus4.onnxruntime@0.4.9, whose
#                    registry integrity hash is checked, unpacked into
#                    $HARRIER_DEPS/onnxruntime-1.29.0/{include,lib} with the libonnxruntime.so.1 link.
#   llama.cpp        v0.4.0 (commit 80fb11a), the git bundle inside the npm package
#                    node-llama-cpp@3.21.1 (integrity-checked the same way, by
#                    tools/llama_source.sh), built once, CPU only, as static libraries into
#                    $HARRIER_DEPS/llama.cpp-v0.4.0/{include,lib}.
#
# HARRIER_DEPS defaults to ~/.cache/harrier-deps (outside the clone, so CI reuses it).
# Prints the ONNX Runtime root and then the llama.cpp root, one a line, last.
set -euo pipefail
HARRIER_DEPS=${HARRIER_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/harrier-deps}
ORT_VERSION=1.29.0
ORT_NPM=com.github.asus4.onnxruntime@0.4.9
ORT_INTEGRITY='sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=='
# llama.cpp's version (LLAMA_TAG, LLAMA_COMMIT, LLAMA_NPM, its integrity hash) and how its source
# is fetched and checked out live in one place, shared with the benchmark kit.
# shellcheck source=tools/llama_source.sh
source "$(dirname "${BASH_SOURCE[0]}")/llama_source.sh"
PACKAGES=(build-essential cmake ninja-build pkg-config ccache git curl ca-certificates
  libboost-dev libsimdjson-dev libprotobuf-dev protobuf-compiler libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev python3-onnx python3-numpy wrk nginx
  libgrpc++-dev protobuf-compiler-grpc libnghttp2-dev libssl-dev nghttp2-client openssl prometheus
  chromium libcurl4-openssl-dev strace python3-hpack zlib1g-dev python3-yaml haproxy buildah
  python3-grpcio)

log() { echo "deps: $*" >&2; }
sudo_() { if [[ $(id -u) == 0 ]]; then "$@"; else sudo "$@"; fi; }

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  sudo_ apt-get update -qq
  sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# kubectl from any source will do (it only renders kustomizations offline); Debian's is
# kubernetes-client.
command -v kubectl >/dev/null || { log "kubectl is needed to render deploy/ for its test; installing Debian's kubernetes-client"; sudo_ apt-get update -qq; sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; }

command -v npm >/dev/null || { log "npm is needed to fetch ONNX Runtime and llama.cpp; installing Debian's npm"; sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# npm_fetch PACKAGE INTEGRITY: packs PACKAGE from the registry into $tmp and prints the tarball's
# path, after checking it against the registry's integrity hash (hard-coded here, so a changed
# upload fails the set-up instead of being built).
npm_fetch() {
  local dir
  dir=$(mktemp -d -p "$tmp")
  (cd "$dir" && npm pack --silent "$1" >/dev/null)
  local tgz
  tgz=$(ls "$dir"/*.tgz)
  local got
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ $got != "$2" ]]; then
    log "integrity mismatch for $1: expected $2, got $got"
    exit 1
  fi
  echo "$tgz"
}

ort=$HARRIER_DEPS/onnxruntime-$ORT_VERSION
if [[ ! -f $ort/lib/libonnxruntime.so.1 || ! -f $ort/include/onnxruntime_cxx_api.h ]]; then
  log "fetching ONNX Runtime $ORT_VERSION ($ORT_NPM)"
  tgz=$(npm_fetch "$ORT_NPM" "$ORT_INTEGRITY")
  headers='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64_x86_64-simulator/onnxruntime.framework/Headers'
  tar -xzf "$tgz" -C "$tmp" package/Plugins/Linux/x64/libonnxruntime.so "$headers"
  rm -rf "$ort.partial"
  mkdir -p "$ort.partial/lib" "$ort.partial/include"
  cp "$tmp"/package/Plugins/Linux/x64/libonnxruntime.so "$ort.partial/lib/"
  cp "$tmp/$headers"/*.h "$ort.partial/include/"
  ln -sf libonnxruntime.so "$ort.partial/lib/libonnxruntime.so.1"
  rm -rf "$ort"
  mv "$ort.partial" "$ort"
fi

# llama.cpp, built here once per machine (or per dependency cache). Static libraries: the
# harrier binary carries the engine, so nothing needs an rpath or LD_LIBRARY_PATH, and only the
# llama.cpp code Harrier calls is linked. Only libllama and ggml (base + CPU backend) are built:
# no common library, tools, examples, tests or server (and so no HTTP client, OpenSSL or curl;
# LLAMA_CURL no longer exists in this version). Instruction sets: GGML_NATIVE=OFF with AVX2,
# FMA, F16C and BMI2 (x86-64-v3), not -march=native, because the cache outlives the machine that
# filled it and a build for the CI machine's AVX-512 would die of SIGILL on an older one; on other
# architectures ggml's portable defaults. OpenMP off: ggml's own thread pool, which the engine
# creates with polling off, so its threads sleep between decodes instead of spinning on shared
# cores as libgomp's do after every parallel region. The bundle is built as it is: the patch
# node-llama-cpp ships beside it (llama/patches/PR-22566.diff) is for loading a model from its
# metadata alone, which Harrier never does. The instruction-set and OpenMP flags are
# LLAMA_GGML_CPU_FLAGS (tools/llama_source.sh), shared with the benchmark's llama-server build.
llama=$HARRIER_DEPS/llama.cpp-$LLAMA_TAG
if [[ ! -f $llama/lib/libllama.a || ! -f $llama/include/llama.h ]]; then
  log "fetching llama.cpp $LLAMA_TAG ($LLAMA_NPM)"
  start=$(date +%s)
  llama_source "$tmp/llama.cpp"
  log "building llama.cpp $LLAMA_TAG (CPU, static; about 5 minutes on 2 cores)"
  rm -rf "$llama.partial"
  flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$llama.partial"
    -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
    -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF "${LLAMA_GGML_CPU_FLAGS[@]}")
  # The build's chatter goes to a log, shown only when a step fails.
  build_log=$tmp/llama.cpp-build.log
  if ! { cmake -S "$tmp/llama.cpp" -B "$tmp/llama.cpp/build" "${flags[@]}" &&
    cmake --build "$tmp/llama.cpp/build" -j "$(nproc)" &&
    cmake --install "$tmp/llama.cpp/build"; } >"$build_log" 2>&1; then
    tail -n 50 "$build_log" >&2
    log "building llama.cpp failed (the last 50 lines of its log are above)"
    exit 1
  fi
  printf '%s\n' "llama.cpp $LLAMA_TAG ($LLAMA_COMMIT) from $LLAMA_NPM, built by tools/deps.sh with" \
    "${flags[*]}" >"$llama.partial/harrier-build.txt"
  rm -rf "$llama"
  mv "$llama.partial" "$llama"
  log "llama.cpp built in $(($(date +%s) - start)) s"
fi
echo "$ort"
echo "$llama"
