#!/usr/bin/env bash
# podman 5 (Debian 13's 5.4.2, fetched by `scripts/engines.sh fetch --podman`) beside the system's podman, with a
# storage and a configuration of its own, for a host with glibc >= 2.38 (the GPU host; docs/runtimes.md):
#   bash scripts/podman5.sh setup [IMAGE...]   writes .build/engines/run/podman5/bin/podman (a wrapper), its
#                                              containers.conf and storage.conf, copies each IMAGE from the system's
#                                              podman into its storage, and prints the bin dir to put first on PATH
#   bash scripts/podman5.sh remove             removes its storage and configuration (the fetched packages stay)
# conmon and runc are the system's (PODMAN5_CONMON, PODMAN5_RUNC name others); PODMAN5_LIBS is a library dir searched
# after libsubid5's (the lab's /opt/podman-bundle/lib holds podman's gpgme/seccomp where the host has none). podman 5
# reads /etc/cdi and /var/run/cdi like podman 4; nothing of /etc/containers is changed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
eng=${GPUPROBE_ENGINES_DIR:-$root/.build/engines}
p5=$eng/run/podman5
die() { echo "podman5: $*" >&2; exit 1; }

setup() {
  local bin=$eng/podman/usr/bin/podman netavark=$eng/netavark/usr/lib/podman
  [ -x "$bin" ] || die "no podman 5 at $bin: run 'scripts/engines.sh fetch --podman' (or unpack the podman part)"
  local system_podman conmon runc
  system_podman=$(command -v podman || true)
  conmon=${PODMAN5_CONMON:-$(command -v conmon || true)}
  runc=${PODMAN5_RUNC:-$(command -v runc || true)}
  [ -n "$conmon" ] || die "no conmon on PATH (PODMAN5_CONMON)"
  [ -n "$runc" ] || die "no runc on PATH (PODMAN5_RUNC)"
  mkdir -p "$p5/bin" "$p5/storage" "$p5/run" "$p5/tmp"
  cat > "$p5/containers.conf" <<CONF
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
database_backend = "sqlite"
runtime = "runc"
conmon_path = ["$conmon"]
helper_binaries_dir = ["$netavark"]
tmp_dir = "$p5/tmp"
[engine.runtimes]
runc = ["$runc"]
[network]
network_backend = "netavark"
CONF
  printf '[storage]\ndriver = "vfs"\ngraphroot = "%s"\nrunroot = "%s"\n' "$p5/storage" "$p5/run" > "$p5/storage.conf"
  local libs=$eng/libsubid5/usr/lib/x86_64-linux-gnu${PODMAN5_LIBS:+:$PODMAN5_LIBS}
  cat > "$p5/bin/podman" <<WRAP
#!/bin/sh
LD_LIBRARY_PATH="$libs" CONTAINERS_CONF="$p5/containers.conf" CONTAINERS_STORAGE_CONF="$p5/storage.conf" exec "$bin" "\$@"
WRAP
  chmod +x "$p5/bin/podman"
  "$p5/bin/podman" --version >&2
  local image
  for image in "$@"; do
    [ -n "$system_podman" ] || die "no system podman to copy $image from"
    "$system_podman" save -q --format docker-archive "$image" | "$p5/bin/podman" load -q >&2
  done
  echo "$p5/bin"
}

case "${1:-}" in
  setup) shift; setup "$@" ;;
  remove)
    if [ -x "$p5/bin/podman" ]; then "$p5/bin/podman" system reset -f >/dev/null 2>&1 || true; fi
    rm -rf "$p5" ;;
  *) die "usage: $0 setup [IMAGE...] | remove" ;;
esac
