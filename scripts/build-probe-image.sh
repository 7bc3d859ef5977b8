#!/usr/bin/env bash
# Builds the small probe image localhost/gpuprobe-probe:local WITHOUT any registry: a root filesystem
# holding this machine's python3 interpreter, the shared libraries it links and its standard library,
# imported with `tar | podman import`. The image holds no CUDA: the driver comes in through CDI.
# (roles/compute_probe/files/Containerfile describes the same image for machines that can pull a base.)
# Usage: scripts/build-probe-image.sh [image-name] [--force]
# podman reads CONTAINERS_CONF from the environment (tests pass $GPUPROBE_TEST_CONTAINERS_CONF).
set -euo pipefail
image=${1:-localhost/gpuprobe-probe:local}
force=${2:-}
if [ "$force" != "--force" ] && podman image exists "$image" 2>/dev/null; then
  echo "$image exists"; exit 0
fi
pybin=${GPUPROBE_IMAGE_PYTHON:-/usr/bin/python3}  # the system interpreter, not a venv or pyenv one
py=$("$pybin" -c 'import os, sys; print(os.path.realpath(sys.executable))')
std=$("$pybin" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
r=$(mktemp -d /tmp/gpuprobe-rootfs.XXXXXX)
trap '[ -n "${GPUPROBE_KEEP_ROOTFS:-}" ] || rm -rf "$r"' EXIT
# mktemp makes the directory 0700; it becomes the image's "/", which a non-root probe user must traverse
chmod 0755 "$r"
mkdir -p "$r"/{usr/bin,tmp,etc,proc,sys,dev,run} && chmod 1777 "$r/tmp"
cp "$py" "$r/usr/bin/python3" && ln -sf python3 "$r/usr/bin/python"
copy_libs() {  # copy the shared libraries ldd reports for $1 into the rootfs, keeping their paths
  for l in $(ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}'); do
    [ -e "$r$l" ] || { mkdir -p "$r$(dirname "$l")"; cp -L "$l" "$r$l"; }
  done
}
copy_libs "$py"
mkdir -p "$r$std" && cp -a "$std/." "$r$std/"
rm -rf "$r$std"/test "$r$std"/idlelib "$r$std"/tkinter "$r$std"/ensurepip
find "$r$std" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
for so in "$r$std"/lib-dynload/*.so; do copy_libs "$so"; done
# libraries the CUDA driver itself dlopens/links (libdl, libpthread, librt, libm, libgcc_s)
mkdir -p "$r/usr/lib/x86_64-linux-gnu"
for l in libdl.so.2 libpthread.so.0 librt.so.1 libm.so.6 libgcc_s.so.1 libstdc++.so.6; do
  f=""
  for c in "/lib/x86_64-linux-gnu/$l" "/usr/lib/x86_64-linux-gnu/$l"; do [ -e "$c" ] && { f=$c; break; }; done
  [ -n "$f" ] && cp -L "$f" "$r/usr/lib/x86_64-linux-gnu/"
done
printf 'root:x:0:0:root:/root:/bin/sh\nprobe:x:1000:1000:probe:/tmp:/bin/sh\n' > "$r/etc/passwd"
printf 'root:x:0:\nprobe:x:1000:\n' > "$r/etc/group"
tar -C "$r" -c . | podman import -q --change 'CMD ["/usr/bin/python3"]' - "$image" >/dev/null
echo "built $image"
