#!/usr/bin/env bash
# llama.cpp's source, the one version Harrier builds against: tag v0.4.0, commit 80fb11a, from
# the git bundle inside the npm package node-llama-cpp@3.21.1 (llama/gitRelease.bundle), whose
# registry integrity hash is hard-coded here, so a changed upload fails instead of being used.
#
#   tools/llama_source.sh [DIR]   check the source out into DIR once and print DIR; by default
#                                 DIR is $BENCH_HOME/llama.cpp-v0.4.0-source (BENCH_HOME:
#                                 ~/.cache/harrier-bench), the benchmark kit's copy
#   source tools/llama_source.sh  defines LLAMA_TAG, LLAMA_COMMIT, LLAMA_NPM, LLAMA_INTEGRITY,
#                                 LLAMA_GGML_CPU_FLAGS and the function llama_source DIR
#                                 (tools/deps.sh and bench/llama_server_build.sh do this)
#
# Idempotent: a DIR whose checkout is already at LLAMA_COMMIT is left as it is. The checkout is
# made in DIR.partial and renamed, so an interrupted one is redone. Needs npm, git and openssl.
# Its users: tools/deps.sh (the libraries Harrier links), bench/llama_server_build.sh
# (llama.cpp's own server, to compare against) and tools/make_llama_gguf.py (gguf-py).
LLAMA_TAG=v0.4.0
LLAMA_COMMIT=80fb11ac73e66d89eae2c6a91d8a77428fa733ed
LLAMA_NPM=node-llama-cpp@3.21.1
LLAMA_INTEGRITY='sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg=='

# ggml's CPU build, the same for every llama.cpp this project builds: Harrier's libraries
# (tools/deps.sh, which says why each is chosen) and the benchmark's llama-server
# (bench/llama_server_build.sh), so that a comparison runs the same kernels. x86-64-v3 without
# AVX-512 instead of -march=native, and ggml's own thread pool instead of OpenMP.
LLAMA_GGML_CPU_FLAGS=(-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF)
if [[ $(uname -m) == x86_64 ]]; then
  LLAMA_GGML_CPU_FLAGS+=(-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
    -DGGML_AVX512=OFF)
fi

# llama_source DIR: DIR holds the checkout at LLAMA_COMMIT afterwards (or the function fails).
# Runs in a subshell, so its temporary folder's trap and `set -e` stay its own.
llama_source() (
  set -euo pipefail
  local dir=$1
  if [[ $(git -C "$dir" rev-parse HEAD 2>/dev/null) == "$LLAMA_COMMIT" ]]; then
    return 0
  fi
  echo "llama_source: fetching llama.cpp $LLAMA_TAG ($LLAMA_NPM) into $dir" >&2
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$LLAMA_NPM" >/dev/null)
  local tgz got
  tgz=$(ls "$tmp"/*.tgz)
  got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
  if [[ $got != "$LLAMA_INTEGRITY" ]]; then
    echo "llama_source: integrity mismatch for $LLAMA_NPM: expected $LLAMA_INTEGRITY, got $got" >&2
    return 1
  fi
  tar -xzf "$tgz" -C "$tmp" package/llama/gitRelease.bundle
  rm -rf "$dir.partial"
  mkdir -p "$(dirname "$dir")"
  git clone --quiet --no-checkout "$tmp/package/llama/gitRelease.bundle" "$dir.partial"
  git -C "$dir.partial" -c advice.detachedHead=false checkout --quiet "$LLAMA_COMMIT"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  if (($# > 1)); then
    echo "usage: $0 [DIR]" >&2
    exit 2
  fi
  dir=${1:-${BENCH_HOME:-$HOME/.cache/harrier-bench}/llama.cpp-$LLAMA_TAG-source}
  llama_source "$dir"
  echo "$dir"
fi
