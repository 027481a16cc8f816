#!/usr/bin/env bash
# Builds Harrier's OCI image with buildah, from scratch: nothing is pulled from a registry (none
# can be reached here), so the image holds exactly `make install PREFIX=/opt/harrier` (the binary,
# ONNX Runtime), the shared libraries the binary loads (its ldd closure, from this Debian 12),
# what glibc and libcurl read at run time (NSS modules and their files, CA certificates), a
# non-root user, and the example repository. docs/deployment.md, "Container image".
#
#   usage: tools/image.sh BUILD_DIR [IMAGE_NAME]      (default harrier:VERSION)
#          MODELS=DIR tools/image.sh ...               (default examples/models: make models)
#
# buildah runs with --storage-driver vfs (what works inside containers without overlay). The
# image: user 65532:65532 (harrier), entrypoint /opt/harrier/bin/harrier, command `serve
# --model-repository /opt/harrier/models`, ports 8000, 8001, 8002, OCI labels. Nothing in it
# needs to write, so it runs with a read-only root file system.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
version=$("$build/harrier" --version | awk '{print $2}')
image=${2:-harrier:$version}
buildah=(buildah --storage-driver vfs)
log() { echo "image: $*" >&2; }

models=${MODELS:-$src/examples/models}
[[ -f $models/simple/1/model.onnx ]] || {
  log "$models holds no generated models: run make models"
  exit 1
}

root=$(mktemp -d)
chmod 755 "$root"  # the image's /: mktemp made it 0700, which the non-root user could not enter
trap 'rm -rf "$root"' EXIT
cmake --install "$build" --prefix "$root/opt/harrier" >/dev/null
cp -r "$models" "$root/opt/harrier/models"
chmod -R a+rX "$root/opt/harrier/models"

# Debian 12's merged /usr: /lib, /lib64 and /bin are links into /usr, as the paths ldd prints
# (and the loader's own, /lib64/ld-linux-x86-64.so.2) assume.
mkdir -p "$root/usr/lib" "$root/usr/lib64" "$root/usr/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
ln -s usr/bin "$root/bin"

# The binary's shared libraries (ldd resolves them as the dynamic loader will, ONNX Runtime from
# the prefix through $ORIGIN/../lib), each at its own path, links kept as links.
copy_path() {
  local path=$1
  mkdir -p "$root$(dirname "$path")"
  cp -a "$path" "$root$path"
  if [[ -L $path ]]; then copy_path "$(readlink -f "$path")"; fi
}
while read -r lib; do
  [[ $lib == "$root"* ]] && continue  # the prefix's own ONNX Runtime
  copy_path "$lib"
done < <(ldd "$root/opt/harrier/bin/harrier" | awk '/=> \//{print $3} /^[[:space:]]*\/.*ld-linux/{print $1}')
# What is loaded by name at run time, not by the binary's NEEDED list: glibc's name service
# modules (for libcurl's resolver: the OTLP exporter's collector address), and their files.
for lib in /lib/x86_64-linux-gnu/libnss_files.so.2 /lib/x86_64-linux-gnu/libnss_dns.so.2; do
  [[ -e $lib ]] && copy_path "$lib"
done
# Mount points a container runtime fills in. /proc matters beyond the usual: the loader resolves
# the binary's run path ($ORIGIN/../lib) through /proc/self/exe.
mkdir -p "$root/proc" "$root/dev" "$root/sys"
mkdir -p "$root/etc/ssl/certs" "$root/tmp"
chmod 1777 "$root/tmp"
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$root/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
printf 'root:x:0:0:root:/nonexistent:/sbin/nologin\nharrier:x:65532:65532:harrier:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\nharrier:x:65532:\n' >"$root/etc/group"

log "building $image from scratch ($(du -sh "$root" | cut -f1))"
ctr=$("${buildah[@]}" from scratch)
"${buildah[@]}" copy "$ctr" "$root" / >/dev/null
"${buildah[@]}" config \
  --entrypoint '["/opt/harrier/bin/harrier"]' \
  --cmd 'serve --model-repository /opt/harrier/models' \
  --user 65532:65532 --workingdir / \
  --port 8000/tcp --port 8001/tcp --port 8002/tcp \
  --env HOME=/nonexistent \
  --label org.opencontainers.image.title=harrier \
  --label org.opencontainers.image.description="Harrier: a low-latency inference server (KServe v2 / Triton protocols, ONNX Runtime, llama.cpp)" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)" \
  --label org.opencontainers.image.created="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --label org.opencontainers.image.source=https://example.invalid/harrier \
  "$ctr"
"${buildah[@]}" commit --rm "$ctr" "$image" >/dev/null
log "built $image"
echo "$image"
