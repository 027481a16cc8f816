#!/usr/bin/env bash
# Installs everything Harrier's build and tests need on Debian 12. Idempotent: a second run
# does nothing but check. Run as root (or with sudo available).
#
#   Debian packages  compiler, CMake, Boost (Asio/Beast), simdjson, protobuf, spdlog, CLI11,
#                    GoogleTest, Google Benchmark, ccache, python3-onnx/numpy (model generators),
#                    curl, wrk, nginx (benchmark floor), grpc++ and its protoc plugin (gRPC),
#                    nghttp2 + OpenSSL (HTTP/2, TLS) with nghttp/h2load, prometheus (promtool),
#                    chromium (status page test), libcurl (the OTLP trace exporter), strace
#                    (the telemetry test), python3-hpack (the gRPC port's HTTP/2 abuse test)
#   ONNX Runtime     1.29.0 from the npm package com.github.asus4.onnxruntime@0.4.9, whose
#                    registry integrity hash is checked, unpacked into
#                    $HARRIER_DEPS/onnxruntime-1.29.0/{include,lib} with the libonnxruntime.so.1 link.
#
# HARRIER_DEPS defaults to ~/.cache/harrier-deps (outside the clone, so CI reuses it).
# Prints the ONNX Runtime root on its last line.
set -euo pipefail
HARRIER_DEPS=${HARRIER_DEPS:-${XDG_CACHE_HOME:-$HOME/.cache}/harrier-deps}
ORT_VERSION=1.29.0
ORT_NPM=com.github.asus4.onnxruntime@0.4.9
ORT_INTEGRITY='sha512-BkzxduSZ9IkeDP6Q8lz2TFU2ie7hSSvS7ZIfzMooExoq0CNzJnuuGaUJ7IsojBgqO4ouD1jXah8OYyJbCN29Fg=='
PACKAGES=(build-essential cmake ninja-build pkg-config ccache git curl ca-certificates
  libboost-dev libsimdjson-dev libprotobuf-dev protobuf-compiler libspdlog-dev libfmt-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev python3-onnx python3-numpy wrk nginx
  libgrpc++-dev protobuf-compiler-grpc libnghttp2-dev libssl-dev nghttp2-client openssl prometheus
  chromium libcurl4-openssl-dev strace python3-hpack zlib1g-dev)

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

command -v npm >/dev/null || { log "npm is needed to fetch ONNX Runtime; installing Debian's npm"; sudo_ env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }

ort=$HARRIER_DEPS/onnxruntime-$ORT_VERSION
if [[ ! -f $ort/lib/libonnxruntime.so.1 || ! -f $ort/include/onnxruntime_cxx_api.h ]]; then
  log "fetching ONNX Runtime $ORT_VERSION ($ORT_NPM)"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$ORT_NPM" >/dev/null)
  tgz=$(ls "$tmp"/*.tgz)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ $got != "$ORT_INTEGRITY" ]]; then
    log "integrity mismatch for $ORT_NPM: expected $ORT_INTEGRITY, got $got"
    exit 1
  fi
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
echo "$ort"
