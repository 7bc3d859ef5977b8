#!/usr/bin/env bash
# The probe image on its way to the nodes (docs/probe-image.md). The image holds python3 only; CUDA comes
# in through CDI. Three ways to get it onto a node, all ending with the same local image:
#   build IMAGE                 build it here without a registry (scripts/build-probe-image.sh --force)
#   push  IMAGE DEST            push to a registry (DEST e.g. registry.example.com/gpu/gpuprobe-probe:1);
#                               prints the reference pinned by digest, for verify_probe_image
#   save  IMAGE TAR             write the image to a tar (podman save), for air-gapped nodes
#   load  TAR [NAME]            load a saved tar (podman load); with NAME, also tag it NAME
#   check IMAGE [ID]            is IMAGE present here (and, with ID, is it that image)? exit 0 yes, 1 no
#   id    IMAGE                 print the image id (sha256:...), which save/load keeps unchanged
# podman reads CONTAINERS_CONF / CONTAINERS_STORAGE_CONF from the environment as usual.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
image_id() { podman image inspect --format '{{.Id}}' "$1" | sed 's/^\(sha256:\)\{0,1\}/sha256:/'; }

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
  build)
    [ $# -eq 1 ] || usage
    bash "$here/build-probe-image.sh" "$1" --force
    echo "id $(image_id "$1")"
    ;;
  push)
    [ $# -eq 2 ] || usage
    digestfile=$(mktemp)
    trap 'rm -f "$digestfile"' EXIT
    podman push --digestfile "$digestfile" "$1" "docker://$2"
    repo=${2%@*}
    last=${repo##*/}
    case $last in *:*) repo=${repo%:*} ;; esac  # drop the tag, keep a registry port
    echo "pinned: $repo@$(cat "$digestfile")"
    ;;
  save)
    [ $# -eq 2 ] || usage
    podman save --format docker-archive -o "$2" "$1"
    sha256sum "$2" > "$2.sha256"
    echo "saved $1 ($(image_id "$1")) to $2; checksum in $2.sha256"
    ;;
  load)
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
    if [ -f "$1.sha256" ]; then
      (cd "$(dirname "$1")" && sha256sum --quiet -c "$(basename "$1").sha256")
    fi
    out=$(podman load -i "$1")
    echo "$out"
    loaded=$(printf '%s\n' "$out" | sed -n 's/^Loaded image\(s\)\{0,1\}: *//p' | tr ',' '\n' | sed -n 1p)
    [ -n "$loaded" ] || { echo "probe-image: podman load named no image" >&2; exit 1; }
    if [ $# -eq 2 ]; then
      podman tag "$loaded" "$2"
      loaded=$2
    fi
    echo "loaded $loaded ($(image_id "$loaded"))"
    ;;
  check)
    if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
    if ! podman image exists "$1"; then
      echo "probe image $1 is not on this node: build it here (scripts/build-probe-image.sh), pull it pinned by" \
           "digest from your registry, or podman load a saved tar (scripts/probe-image.sh load); docs/probe-image.md" >&2
      exit 1
    fi
    have=$(image_id "$1")
    if [ $# -eq 2 ] && [ "${have#sha256:}" != "${2#sha256:}" ]; then
      echo "probe image $1 is $have, expected $2" >&2
      exit 1
    fi
    echo "$1 present ($have)"
    ;;
  id)
    [ $# -eq 1 ] || usage
    image_id "$1"
    ;;
  *) usage ;;
esac
