#!/usr/bin/env bash
# Builds llama.cpp's own HTTP server, llama-server, from the same source and commit as the
# engine Harrier links (tools/llama_source.sh: v0.4.0, 80fb11a) and with the same ggml CPU flags
# (LLAMA_GGML_CPU_FLAGS there: x86-64-v3 without AVX-512, no OpenMP), so that
# bench/generation.sh compares two servers over the same kernels. Built once, into
#   $BENCH_HOME/llama-server-v0.4.0/bin/llama-server   (BENCH_HOME: ~/.cache/harrier-bench)
# through a .partial folder renamed when complete, so an interrupted build is redone and a
# finished one is found by the next run, which does nothing. Prints the binary's path, last.
#
#   bench/llama_server_build.sh        JOBS (default: nproc) compile jobs
#
# Static libraries (BUILD_SHARED_LIBS=OFF): one binary, no rpath, like Harrier's engine. Only the
# llama-server target is built (the tools' CMake is configured, since the server lives there, but
# not compiled). No HTTPS (LLAMA_OPENSSL=OFF) and no web UI (LLAMA_BUILD_UI=OFF, and
# LLAMA_USE_PREBUILT_UI=OFF, which would download one from Hugging Face at build time).
# LLAMA_CURL is not passed: this version has no libcurl client any more, and the flag would only
# draw its deprecation warning.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=tools/llama_source.sh
source "$here/../tools/llama_source.sh"
BENCH_HOME=${BENCH_HOME:-$HOME/.cache/harrier-bench}
out=$BENCH_HOME/llama-server-$LLAMA_TAG
if [[ -x $out/bin/llama-server ]]; then
  echo "$out/bin/llama-server"
  exit 0
fi
log() { echo "llama_server_build: $*" >&2; }

start=$(date +%s)
src=$BENCH_HOME/llama.cpp-$LLAMA_TAG-source
llama_source "$src"
rm -rf "$out.partial"
mkdir -p "$out.partial/bin"
build=$out.partial/build
flags=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_CCACHE=OFF
  "${LLAMA_GGML_CPU_FLAGS[@]}")
log "building llama-server $LLAMA_TAG ($LLAMA_COMMIT) into $out"
# The build's chatter goes to a log, shown only when a step fails.
build_log=$out.partial/build.log
if ! { cmake -S "$src" -B "$build" "${flags[@]}" &&
  cmake --build "$build" --target llama-server -j "${JOBS:-$(nproc)}"; } >"$build_log" 2>&1; then
  tail -n 50 "$build_log" >&2
  log "the build failed (the last 50 lines of $build_log are above)"
  exit 1
fi
cp "$build/bin/llama-server" "$out.partial/bin/"
printf '%s\n' "llama-server $LLAMA_TAG ($LLAMA_COMMIT) from $LLAMA_NPM, built by" \
  "bench/llama_server_build.sh in $(($(date +%s) - start)) s with" "${flags[*]}" \
  >"$out.partial/harrier-build.txt"
rm -rf "$build"
rm -rf "$out"
mv "$out.partial" "$out"
log "built in $(($(date +%s) - start)) s"
echo "$out/bin/llama-server"
