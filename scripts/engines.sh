#!/usr/bin/env bash
# The engines lab: containerd (CRI) and dockerd with CDI, from Debian 13's packages, on private sockets.
#
#   scripts/engines.sh fetch [--podman]   download Debian 13 (trixie) packages with a PRIVATE apt configuration
#                                         (the system's sources, lists and cache are never read or written) and
#                                         unpack each with dpkg -x into .build/engines/<package>; cached, idempotent;
#                                         --podman adds podman 5.4.2, conmon and libsubid5 (glibc >= 2.38 only)
#   scripts/engines.sh stubs              generate the CRI API descriptor set from the fetched api.proto
#                                         (grpcio-tools, at build time) into .build/engines/cri/
#   scripts/engines.sh start containerd   containerd 1.7 with its CRI plugin (enable_cdi, native snapshotter,
#                                         cgroupfs) on .build/engines/run/containerd/containerd.sock, with a locally
#                                         built sandbox (pause) image and the probe image imported
#   scripts/engines.sh start dockerd      dockerd 26 with the CDI feature (vfs, no bridge, no iptables) on
#                                         .build/engines/run/dockerd/docker.sock, the probe image loaded
#   scripts/engines.sh stop [NAME]        stop what start started (both without NAME), its containers with it
#   scripts/engines.sh env                print the variables the tests and the CRI client read (eval-able)
#   scripts/engines.sh pack OUTDIR [PART] xz tarballs of the fetched engines (parts containerd, docker) for a host
#                                         without network: OUTDIR/engines-PART.tar.xz + SHA256SUMS (.gpu-engines/)
#   scripts/engines.sh unpack DIR         check and unpack them into the engines dir (scripts/gpu-engines.sh does)
#
# Nothing here touches the system's services, /var/lib/docker, /var/lib/containerd or /etc/cdi; of /run/containerd
# only the shim socket directory containerd 1.7 hard-codes (/run/containerd/s), removed at stop where the lab created
# it and it is empty; runc's state is under the lab's directory (the runtime's Root). The daemons inherit no
# descriptor of the caller's (a flock around this script is not held by them). Both engines read CDI specs from /etc/cdi and /var/run/cdi (their defaults, as on a real node).
# Debian 13's runc and podman need glibc 2.38: on Debian 12 (2.36) containerd and dockerd use the system's
# runc instead (printed by start). See docs/runtimes.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the real path: mountinfo and /proc/*/cmdline name it so (.build/engines may be a link to a shared fetch)
eng=$(realpath -m "${GPUPROBE_ENGINES_DIR:-$root/.build/engines}")
run=$eng/run
suite=trixie
mirror=${GPUPROBE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=${GPUPROBE_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
packages=(containerd runc docker.io docker-cli golang-github-kubernetes-cri-api-dev)
sandbox_image=localhost/gpuprobe-pause:local
probe_image=${GPUPROBE_PROBE_IMAGE:-localhost/gpuprobe-probe:local}
cdi_dirs='"/etc/cdi", "/var/run/cdi"'

log() { echo "engines: $*" >&2; }
die() { log "$*"; exit 1; }

# ---- fetch -------------------------------------------------------------------------------------------------

apt_private() {  # apt-get with a private sources list, lists and cache: the system's apt is left untouched
  local a=$eng/apt
  apt-get -q -o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Dir::Etc::preferences="$a/preferences" \
    -o Dir::Etc::preferencesparts="$a/preferences.d" \
    -o Acquire::Languages=none -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User="$(id -un)" "$@"
}

fetch() {
  local want=("${packages[@]}")
  [ "${1:-}" = "--podman" ] && want+=(podman conmon libsubid5 netavark)
  command -v apt-get >/dev/null || die "fetch needs apt-get and dpkg (Debian/Ubuntu)"
  command -v dpkg >/dev/null || die "fetch needs apt-get and dpkg (Debian/Ubuntu)"
  [ -r "$keyring" ] || die "no Debian archive keyring at $keyring (package debian-archive-keyring)"
  local a=$eng/apt
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/preferences.d" "$eng/debs"
  # signed-by: trixie's InRelease is verified against the Debian archive keyring (Debian 12's
  # debian-archive-keyring 2023.3+deb12u2 carries the trixie keys)
  echo "deb [signed-by=$keyring] $mirror $suite main" > "$a/sources.list"
  local missing=() p
  for p in "${want[@]}"; do [ -f "$eng/$p/.version" ] || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    local t0=$SECONDS
    # one update per fetch that has something to download, into the private lists only
    for p in "${missing[@]}"; do rm -f "$eng/debs/${p}_"*.deb; done
    apt_private update >/dev/null || die "apt-get update of $suite failed (network, mirror $mirror or key)"
    (cd "$eng/debs" && apt_private download "${missing[@]}" >/dev/null) || die "apt-get download ${missing[*]} failed"
    for p in "${missing[@]}"; do
      local deb
      deb=$(find "$eng/debs" -maxdepth 1 -name "${p}_*.deb")
      [ -n "$deb" ] || die "no .deb for $p after download"
      rm -rf "${eng:?}/$p" && mkdir -p "$eng/$p" && dpkg -x "$deb" "$eng/$p"
      basename "$deb" > "$eng/$p/.deb"
      dpkg-deb -f "$deb" Version > "$eng/$p/.version"
    done
    log "fetched ${missing[*]} in $((SECONDS - t0)) s"
  fi
  for p in "${want[@]}"; do echo "$p $(cat "$eng/$p/.version")"; done
  if runc_ok "$eng/runc/usr/sbin/runc"; then
    log "runc from Debian 13 runs here"
  else
    log "Debian 13's runc does not run here (needs glibc 2.38; this is $(ldd --version | sed -n 1p)): the system's runc is used"
  fi
}

# ---- the CRI API descriptor set (build time, never committed) ----------------------------------------------

stubs() {
  local proto=$eng/golang-github-kubernetes-cri-api-dev/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto
  [ -f "$proto" ] || die "no api.proto: run '$0 fetch' first"
  local out=$eng/cri py=${PYTHON:-python3}
  if [ -f "$out/api.desc" ] && [ "$out/api.desc" -nt "$proto" ]; then echo "$out/api.desc"; return; fi
  "$py" -c 'import grpc_tools.protoc' 2>/dev/null || die "grpcio-tools is not installed for $py (requirements-dev.txt)"
  mkdir -p "$out/src"
  # The gogoproto options only steer Go code generation; they are dropped (with their import) so that protoc
  # needs no gogo.proto. The messages and services are the file's own, byte for byte.
  grep -v -e '^import "github.com/gogo/protobuf/gogoproto/gogo.proto";' -e '^option (gogoproto\.' "$proto" \
    > "$out/src/api.proto"
  "$py" -m grpc_tools.protoc -I "$out/src" --descriptor_set_out="$out/api.desc" "$out/src/api.proto"
  cp "$eng/golang-github-kubernetes-cri-api-dev/.version" "$out/VERSION"
  echo "$out/api.desc"
}

# ---- engines -----------------------------------------------------------------------------------------------

runc_ok() { [ -x "$1" ] && "$1" --version >/dev/null 2>&1; }

pick_runc() {  # Debian 13's runc where it runs, else the system's
  if runc_ok "$eng/runc/usr/sbin/runc"; then echo "$eng/runc/usr/sbin/runc"; return; fi
  local r
  r=$(command -v runc) || die "no runc that runs here: Debian 13's needs glibc 2.38 and the system has none"
  echo "$r"
}

engine_path() { echo "$eng/containerd/usr/bin:$eng/docker.io/usr/sbin:$eng/docker-cli/usr/bin:$PATH"; }

wait_for() {  # wait_for SECONDS CMD...: until CMD succeeds
  local n=$(($1 * 10)); shift
  while [ "$n" -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; n=$((n - 1)); done
  return 1
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

ctr_() { "$eng/containerd/usr/bin/ctr" --address "$run/containerd/containerd.sock" "$@"; }
docker_() { "$eng/docker-cli/usr/bin/docker" -H "unix://$run/dockerd/docker.sock" "$@"; }

build_pause() {  # the sandbox image: a static C program that waits for a signal and reaps children
  local d=$run/pause-image
  [ -f "$d/pause.tar" ] && { echo "$d/pause.tar"; return; }
  command -v gcc >/dev/null || die "gcc is needed to build the sandbox (pause) image"
  rm -rf "$d" && mkdir -p "$d/rootfs" "$d/archive"
  cat > "$d/pause.c" <<'C'
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
static void quit(int s) { (void)s; _exit(0); }
static void reap(int s) { (void)s; while (waitpid(-1, 0, WNOHANG) > 0) {} }
int main(void) {
  signal(SIGTERM, quit); signal(SIGINT, quit); signal(SIGCHLD, reap);
  for (;;) pause();
}
C
  gcc -static -Os -s -o "$d/rootfs/pause" "$d/pause.c"
  tar -C "$d/rootfs" --owner=0 --group=0 --numeric-owner -cf "$d/archive/layer.tar" pause
  local diff cfg
  diff=$(sha256sum "$d/archive/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$diff" > "$d/archive/config.json"
  cfg=$(sha256sum "$d/archive/config.json" | cut -d' ' -f1)
  mv "$d/archive/config.json" "$d/archive/$cfg.json"
  mkdir "$d/archive/$diff" && mv "$d/archive/layer.tar" "$d/archive/$diff/layer.tar"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$cfg" "$sandbox_image" "$diff" \
    > "$d/archive/manifest.json"
  tar -C "$d/archive" -cf "$d/pause.tar" .
  echo "$d/pause.tar"
}

save_probe_image() {  # the project's probe image as a docker archive (podman builds and saves it)
  local f=$run/probe-image.tar
  if [ ! -f "$f" ]; then
    command -v podman >/dev/null || die "podman is needed to build the probe image ($root/scripts/build-probe-image.sh)"
    if [ -n "${GPUPROBE_TEST_CONTAINERS_CONF:-}" ]; then export CONTAINERS_CONF=$GPUPROBE_TEST_CONTAINERS_CONF; fi
    bash "$root/scripts/build-probe-image.sh" "$probe_image" >&2
    podman save -q --format docker-archive -o "$f.tmp" "$probe_image" && mv "$f.tmp" "$f"
  fi
  echo "$f"
}

already_running() {  # NAME BINARY: dies when BINARY is not fetched; true (and says so) when NAME runs already
  [ -x "$2" ] || die "$1 is not fetched: run '$0 fetch'"
  alive "$run/$1/pid" || return 1
  log "$1 already running (pid $(cat "$run/$1/pid"))"
}

# containerd 1.7 puts its shims' sockets in /run/containerd/s whatever its state dir (pkg/shim SocketAddress: the
# default state dir, hard-coded), dockerd's containerd too: the directories of that path the lab had to create are
# noted at start and removed at stop when empty (another containerd's live shims keep theirs)
outside_dirs=(/run/containerd /run/containerd/s)

note_outside() {  # NAME: the directories of outside_dirs that do not exist yet, which this start may create
  local d
  : > "$run/$1/outside"
  for d in "${outside_dirs[@]}"; do [ -e "$d" ] || echo "$d" >> "$run/$1/outside"; done
}

remove_outside() {  # NAME: remove what note_outside listed, deepest first, only when empty
  local d
  [ -f "$run/$1/outside" ] || return 0
  sort -r "$run/$1/outside" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
  rm -f "$run/$1/outside"
}

launch() {  # NAME CLIENT BINARY ARGS...: BINARY in a session of its own, log and pid under run/NAME, until CLIENT answers
  local name=$1 client=$2; shift 2
  note_outside "$name"
  # the daemon keeps no descriptor of its caller's beyond 0-2 (a lock held by flock around this script would
  # otherwise be held by the daemon, and every later flock of it would wait for the daemon's end)
  ( for fd in "/proc/$BASHPID/fd"/*; do fd=${fd##*/}; [ "$fd" -gt 2 ] && eval "exec $fd>&-"; done
    PATH=$(engine_path) exec setsid "$@" ) >"$run/$name/$name.log" 2>&1 < /dev/null &
  echo $! > "$run/$name/pid"
  wait_for 60 "$client" version || { tail -n 20 "$run/$name/$name.log" >&2; die "$name did not answer on its socket"; }
}

containerd_images() {  # the pause image, and the probe image unless GPUPROBE_ENGINES_NO_PROBE_IMAGE: each once
  local img
  img=$(build_pause)
  ctr_ -n k8s.io images ls -q | grep -qx "$sandbox_image" \
    || ctr_ -n k8s.io images import --snapshotter native "$img" >/dev/null
  if [ -z "${GPUPROBE_ENGINES_NO_PROBE_IMAGE:-}" ]; then
    img=$(save_probe_image)
    ctr_ -n k8s.io images ls -q | grep -qx "$probe_image" \
      || ctr_ -n k8s.io images import --snapshotter native "$img" >/dev/null
  fi
}

dockerd_images() {  # the probe image unless GPUPROBE_ENGINES_NO_PROBE_IMAGE: once
  [ -z "${GPUPROBE_ENGINES_NO_PROBE_IMAGE:-}" ] || return 0
  local img
  img=$(save_probe_image)
  docker_ image inspect "$probe_image" >/dev/null 2>&1 || docker_ load -q -i "$img" >/dev/null
}

start_containerd() {
  local c=$run/containerd
  # a daemon already running (started by an earlier caller, perhaps without the probe image) still gets the images
  already_running containerd "$eng/containerd/usr/bin/containerd" && { containerd_images; return; }
  local runc_bin t0=$SECONDS
  runc_bin=$(pick_runc)
  rm -rf "$c/state" && mkdir -p "$c/root" "$c/state" "$c/opt" "$c/cni/bin" "$c/cni/conf"
  cat > "$c/config.toml" <<TOML
version = 2
root = "$c/root"
state = "$c/state"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$c/containerd.sock"
[ttrpc]
  address = "$c/containerd.sock.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$c/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$sandbox_image"
  enable_cdi = true
  cdi_spec_dirs = [$cdi_dirs]
  # without it runc fails the sandbox: "can't get final child's PID from pipe"
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$c/cni/bin"
    conf_dir = "$c/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$runc_bin"
        # runc's state under the lab's dir, not runc's default /run/containerd/runc/<namespace>
        Root = "$c/runc"
        SystemdCgroup = false
TOML
  launch containerd ctr_ "$eng/containerd/usr/bin/containerd" --config "$c/config.toml"
  containerd_images
  log "containerd $("$eng/containerd/usr/bin/containerd" --version | awk '{print $3}') on $c/containerd.sock" \
      "(runc $("$runc_bin" --version | awk 'NR==1{print $3}') $runc_bin) ready in $((SECONDS - t0)) s"
}

start_dockerd() {
  local d=$run/dockerd
  already_running dockerd "$eng/docker.io/usr/sbin/dockerd" && { dockerd_images; return; }
  local runc_bin t0=$SECONDS
  runc_bin=$(pick_runc)
  rm -rf "$d/exec" && mkdir -p "$d/data" "$d/exec"
  cat > "$d/daemon.json" <<JSON
{
  "hosts": ["unix://$d/docker.sock"],
  "data-root": "$d/data",
  "exec-root": "$d/exec",
  "pidfile": "$d/dockerd.pid",
  "features": {"cdi": true},
  "cdi-spec-dirs": [$cdi_dirs],
  "storage-driver": "vfs",
  "bridge": "none",
  "iptables": false,
  "ip6tables": false,
  "ip-forward": false,
  "ip-masq": false,
  "userland-proxy": false,
  "exec-opts": ["native.cgroupdriver=cgroupfs"],
  "default-runtime": "gpuprobe-runc",
  "runtimes": {"gpuprobe-runc": {"path": "$runc_bin"}}
}
JSON
  # dockerd starts its own containerd (from PATH: the fetched 1.7.24) under exec-root and data-root
  launch dockerd docker_ "$eng/docker.io/usr/sbin/dockerd" --config-file "$d/daemon.json"
  dockerd_images
  log "dockerd $(docker_ version --format '{{.Server.Version}}') on $d/docker.sock (runc $runc_bin) ready in $((SECONDS - t0)) s"
}

kill_pidfile() {  # TERM, then KILL after 15 s, the process in pidfile $1 (started by this script)
  local pid
  alive "$1" || { rm -f "$1"; return 0; }
  pid=$(cat "$1")
  kill -TERM "$pid" 2>/dev/null || true
  wait_for 15 sh -c "! kill -0 $pid 2>/dev/null" || kill -KILL "$pid" 2>/dev/null || true
  rm -f "$1"
}

kill_shims() {  # the runc shims of our containerd (they outlive it on purpose): found by our socket path
  local p
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null < "$p/cmdline" | grep -q -- "-address $1" || continue
    kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
}

umount_under() {  # lazily unmount what is still mounted below $1 (sandbox shm, rootfs binds), deepest first
  awk -v d="$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}

stop_containerd() {
  local c=$run/containerd
  if alive "$c/pid"; then
    local ns id
    # every task of every namespace of this private containerd is ours: kill and delete them first
    for ns in $(ctr_ namespaces ls -q 2>/dev/null); do
      for id in $(ctr_ -n "$ns" tasks ls -q 2>/dev/null); do
        ctr_ -n "$ns" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
        wait_for 5 ctr_ -n "$ns" tasks delete "$id" || ctr_ -n "$ns" tasks delete -f "$id" >/dev/null 2>&1 || true
      done
    done
  fi
  kill_pidfile "$c/pid"
  kill_shims "$c/containerd.sock"
  umount_under "$c"
  rm -rf "$c/state" "$c/runc"
  remove_outside containerd
  log "containerd stopped"
}

stop_dockerd() {
  local d=$run/dockerd
  if alive "$d/pid"; then
    local ids
    ids=$(docker_ ps -aq 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || docker_ rm -f $ids >/dev/null 2>&1 || true
  fi
  kill_pidfile "$d/pid"
  kill_shims "$d/exec/containerd/containerd.sock"
  umount_under "$d"
  rm -rf "$d/exec"
  remove_outside dockerd
  log "dockerd stopped"
}

# ---- carrying the engines to a host without network (the GPU host) -----------------------------------------

# what each part holds, relative to the engines dir: the binaries with their .deb/.version records. containerd's
# part also has the CRI API descriptor and the sandbox (pause) image, so that the host needs neither protoc nor gcc;
# runc is Debian 13's 1.1.15 (glibc >= 2.38; elsewhere start falls back to the system's runc). dockerd starts the
# containerd of the containerd part: the docker part alone does not run.
part_paths() {
  case "$1" in
    containerd) echo containerd/.deb containerd/.version containerd/usr/bin/containerd \
        containerd/usr/bin/containerd-shim-runc-v2 containerd/usr/bin/ctr cri/api.desc cri/VERSION \
        run/pause-image/pause.tar runc/.deb runc/.version runc/usr/sbin/runc ;;
    docker) echo docker.io/.deb docker.io/.version docker.io/usr/sbin/dockerd docker-cli/.deb docker-cli/.version \
        docker-cli/usr/bin/docker ;;
    podman) echo podman/.deb podman/.version podman/usr/bin/podman libsubid5/.deb libsubid5/.version \
        libsubid5/usr/lib/x86_64-linux-gnu netavark/.deb netavark/.version netavark/usr/lib/podman/netavark ;;
    *) die "no part $1 (containerd, docker, podman)" ;;
  esac
}

pack() {  # pack OUTDIR [PART...]: engines-PART.tar.xz (+ SHA256SUMS) for scripts/gpu-engines.sh
  local out=${1:?usage: $0 pack OUTDIR [containerd] [docker]}; shift
  local parts=("$@") p
  [ ${#parts[@]} -gt 0 ] || parts=(containerd docker)
  mkdir -p "$out" "$run"
  for p in "${parts[@]}"; do
    if [ "$p" = containerd ]; then stubs >/dev/null; build_pause >/dev/null; fi
    local paths
    read -r -a paths <<< "$(part_paths "$p")"
    (cd "$eng" && for f in "${paths[@]}"; do [ -e "$f" ] || die "$f is missing: run '$0 fetch' (and stubs)"; done)
    tar -C "$eng" --owner=0 --group=0 -cf - "${paths[@]}" | xz -6 -T0 > "$out/engines-$p.tar.xz.tmp"
    mv "$out/engines-$p.tar.xz.tmp" "$out/engines-$p.tar.xz"
    log "engines-$p.tar.xz: $(du -m "$out/engines-$p.tar.xz" | cut -f1) MB"
  done
  (cd "$out" && sha256sum engines-*.tar.xz > SHA256SUMS)
  ls -la "$out"
}

unpack() {  # unpack DIR: every engines-*.tar.xz of DIR (checked against its SHA256SUMS) into the engines dir
  local dir=${1:?usage: $0 unpack DIR} f
  (cd "$dir" && sha256sum -c --quiet --ignore-missing SHA256SUMS) || die "the packed engines in $dir do not match their SHA256SUMS"
  mkdir -p "$eng"
  for f in "$dir"/engines-*.tar.xz; do
    [ -e "$f" ] || die "no engines-*.tar.xz in $dir"
    tar -C "$eng" -xJf "$f"
    log "unpacked $(basename "$f") into $eng"
  done
}

print_env() {
  echo "export GPUPROBE_ENGINES_DIR=\"$eng\""
  echo "export GPUPROBE_CRI_ENDPOINT=\"unix://$run/containerd/containerd.sock\""
  echo "export GPUPROBE_CRI_DESCRIPTOR=\"$eng/cri/api.desc\""
  echo "export GPUPROBE_DOCKER_HOST=\"unix://$run/dockerd/docker.sock\""
  echo "export GPUPROBE_ENGINES_PATH=\"$eng/containerd/usr/bin:$eng/docker-cli/usr/bin\""
}

case "${1:-}" in
  fetch) shift; fetch "$@" ;;
  stubs) stubs ;;
  pack) shift; pack "$@" ;;
  unpack) shift; unpack "$@" ;;
  start)
    case "${2:-}" in
      containerd) start_containerd ;;
      dockerd) start_dockerd ;;
      *) die "usage: $0 start containerd|dockerd" ;;
    esac ;;
  stop)
    case "${2:-}" in
      containerd) stop_containerd ;;
      dockerd) stop_dockerd ;;
      "") stop_dockerd; stop_containerd ;;
      *) die "usage: $0 stop [containerd|dockerd]" ;;
    esac ;;
  env) print_env ;;
  *) die "usage: $0 fetch [--podman] | stubs | start containerd|dockerd | stop [containerd|dockerd] | env | pack OUTDIR [PART...] | unpack DIR" ;;
esac
