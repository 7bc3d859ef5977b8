#!/usr/bin/env bash
# Reference CDI readers for the differential test (tests/integration/test_cdi_differential.py): the CDI library
# exactly as two Debian releases ship it, each built into a tiny Go program (tests/integration/cdi_reader/main.go)
# that reads a spec dir and prints JSON (every file parsed or rejected with the library's error, the devices that
# resolve, and the merged edits of each device as the library applies them to an empty OCI spec).
#
#   scripts/cdi-readers.sh build     fetch and build both into .build/cdi-readers/<name>/reader (cached, idempotent)
#   scripts/cdi-readers.sh path NAME the built reader's path (exit 1 when it is not built)
#
#   bookworm-0.5.2  Debian 12's golang-github-container-orchestrated-devices-container-device-interface-dev
#                   0.5.2 (what Debian 12's podman 4.3.1+ds1 vendors), Debian 12's Go 1.19, GOPATH mode
#   trixie-0.8.0    Debian 13's golang-tags.cncf-container-device-interface-dev 0.8.0 (what Debian 13's
#                   containerd 1.7.24~ds1 links: its Built-Using), Debian 13's Go 1.24, GOPATH mode
#
# Packages come from a PRIVATE apt configuration per suite under .build/cdi-readers/apt-<suite> (the system's
# sources, lists and cache are never read or written, as scripts/engines.sh does) and are unpacked with dpkg -x.
# Nothing fetched or built is committed. Needs apt-get, dpkg and the Debian archive keyring; network on first build.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${GPUPROBE_CDI_READERS_DIR:-$root/.build/cdi-readers}
mirror=${GPUPROBE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=${GPUPROBE_DEBIAN_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}
src=$root/tests/integration/cdi_reader

log() { echo "cdi-readers: $*" >&2; }
die() { log "$*"; exit 1; }

# name suite cdi-package go-version import-path
readers=(
  "bookworm-0.5.2 bookworm golang-github-container-orchestrated-devices-container-device-interface-dev 1.19
   github.com/container-orchestrated-devices/container-device-interface"
  "trixie-0.8.0 trixie golang-tags.cncf-container-device-interface-dev 1.24 tags.cncf.io/container-device-interface"
)

apt_private() {  # apt_private SUITE-DIR ARGS...: apt-get with a private sources list, lists and cache
  local a=$1; shift
  apt-get -q -o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Dir::Etc::preferences="$a/preferences" \
    -o Dir::Etc::preferencesparts="$a/preferences.d" -o Dir::State::status=/dev/null \
    -o Acquire::Languages=none -o APT::Get::List-Cleanup=0 -o APT::Sandbox::User="$(id -un)" "$@"
}

apt_cache_private() {
  local a=$1; shift
  apt-cache -o Dir::Etc::sourcelist="$a/sources.list" -o Dir::Etc::sourceparts=- \
    -o Dir::State::Lists="$a/lists" -o Dir::Cache="$a/cache" -o Dir::Etc::preferences="$a/preferences" \
    -o Dir::Etc::preferencesparts="$a/preferences.d" -o Dir::State::status=/dev/null "$@"
}

fetch_suite() {  # fetch_suite SUITE TREE PACKAGES...: the packages and their golang-*-dev closure, unpacked into TREE
  local suite=$1 tree=$2; shift 2
  local a=$out/apt-$suite
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/preferences.d" "$a/debs"
  echo "deb [signed-by=$keyring] $mirror $suite main" > "$a/sources.list"
  # the private lists are refreshed weekly (a newer point release removes the old .debs from the mirror); the
  # downloaded .debs of older versions go with them
  if [ -z "$(find "$a/.updated" -mtime -7 2>/dev/null)" ]; then
    apt_private "$a" update >/dev/null || die "apt-get update of $suite failed (network, mirror $mirror or key)"
    rm -f "$a"/debs/*.deb
    touch "$a/.updated"
  fi
  # the Go source packages the wanted ones depend on (recursively): golang-*-dev only (no toolchain, no C)
  local want=()
  mapfile -t want < <(apt_cache_private "$a" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
           --no-replaces --no-enhances "$@" | grep -v '^ ' | { grep -E '^golang-.*-dev$' || true; } | sort -u)
  want+=("$@")
  (cd "$a/debs" && apt_private "$a" download "${want[@]}" >/dev/null) || die "apt-get download failed ($suite)"
  rm -rf "$tree" && mkdir -p "$tree"
  local deb
  for deb in "$a"/debs/*.deb; do dpkg -x "$deb" "$tree"; done
}

build_one() {  # build_one NAME SUITE CDI-PACKAGE GO-VERSION IMPORT
  local name=$1 suite=$2 pkg=$3 gov=$4 import=$5
  local dir=$out/$name
  local stamp
  stamp=$(cat "$src/main.go" "$0" | sha256sum | cut -c1-16)
  if [ -x "$dir/reader" ] && [ "$(cat "$dir/.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$dir/reader"; return
  fi
  local t0=$SECONDS
  fetch_suite "$suite" "$dir/tree" "$pkg" "golang-$gov-go" "golang-$gov-src"
  local goroot=$dir/tree/usr/lib/go-$gov gopath=$dir/gopath
  [ -x "$goroot/bin/go" ] || die "no Go $gov in $dir/tree"
  rm -rf "$gopath" && mkdir -p "$gopath/src/cdireader"
  # GOPATH: Debian's /usr/share/gocode/src, and the program
  ln -s "$dir/tree/usr/share/gocode/src"/* "$gopath/src/" 2>/dev/null || true
  sed "s#@CDI@#$import#g" "$src/main.go" > "$gopath/src/cdireader/main.go"
  (cd "$gopath/src/cdireader" && GOROOT=$goroot GOPATH=$gopath GO111MODULE=off CGO_ENABLED=0 GOFLAGS='' \
     GOCACHE=$dir/cache GOTOOLCHAIN=local "$goroot/bin/go" build -o "$dir/reader" .) \
    || die "building $name failed"
  local deb
  deb=$(find "$out/apt-$suite/debs" -maxdepth 1 -name "${pkg}_*.deb" | head -1)
  dpkg-deb -f "$deb" Version > "$dir/.cdi-version"
  "$goroot/bin/go" version > "$dir/.go-version" 2>/dev/null || true
  rm -rf "$dir/tree" "$gopath" "$dir/cache"  # about 500 MB each: the reader is all the tests use (the .debs stay cached)
  echo "$stamp" > "$dir/.stamp"
  log "built $name ($(cat "$dir/.cdi-version"), $(cat "$dir/.go-version")) in $((SECONDS - t0)) s"
  echo "$dir/reader"
}

build() {
  if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then die "needs apt-get and dpkg (Debian/Ubuntu)"; fi
  [ -r "$keyring" ] || die "no Debian archive keyring at $keyring (package debian-archive-keyring)"
  local r
  for r in "${readers[@]}"; do
    # shellcheck disable=SC2086
    build_one $r
  done
}

case "${1:-}" in
  build) build ;;
  path)
    [ -x "$out/${2:-}/reader" ] || exit 1
    echo "$out/$2/reader" ;;
  *) sed -n '2,16p' "$0" >&2; exit 2 ;;
esac
