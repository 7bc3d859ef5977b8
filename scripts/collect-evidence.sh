#!/usr/bin/env bash
# Copies the untouched outputs of one scripts/gpu-e2e.sh run (its evidence.tgz and log) into docs/evidence/.
# Files are renamed to say what they are; their contents are not changed.
# Usage: bash scripts/collect-evidence.sh EVIDENCE.tgz GPU-E2E.log
set -euo pipefail
tgz=$1; log=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dest=$root/docs/evidence
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tar -C "$tmp" -xzf "$tgz"
ev=$tmp/evidence
rm -rf "$dest/h200-runtime-compute" "$dest/h200-verify-gpu" "$dest/h200-verify-gpu-node" "$dest/h200-fault-drills"
mkdir -p "$dest/h200-runtime-compute" "$dest/h200-verify-gpu" "$dest/h200-verify-gpu-node" "$dest/h200-fault-drills"
cp "$ev/h200-host.json" "$ev/h200-cdi.json" "$dest/"
cp "$ev/bench-gpu.json" "$dest/h200-bench-gpu.json"
[ -f "$ev/bench-node.json" ] && cp "$ev/bench-node.json" "$dest/h200-bench-node.json"
[ -f "$ev/bench-payload.json" ] && cp "$ev/bench-payload.json" "$dest/h200-bench-payload.json"
if [ -d "$ev/node-call" ]; then  # bench_node_call.py: the node_verify call alone, its import times and profile
  rm -rf "$dest/h200-node-call" && mkdir -p "$dest/h200-node-call" && cp "$ev"/node-call/* "$dest/h200-node-call/"
fi
cp "$ev/pytest-gpu.xml" "$dest/h200-pytest-gpu.xml"
cp "$log" "$dest/h200-gpu-e2e.log"
for f in "$ev"/variants/*.json; do
  case $(basename "$f") in h200-cdi.json) cp "$f" "$dest/h200-runtime-compute/cdi-test-records.json" ;; *) cp "$f" "$dest/h200-runtime-compute/" ;; esac
done
for ext in json html md junit.xml; do
  files=("$ev"/reports/gpuprobe-report-2*/gpuprobe-report."$ext"); cp "${files[0]}" "$dest/h200-verify-gpu/$(basename "$(dirname "${files[0]}")").$ext"
done
if [ -d "$ev/reports-node" ]; then  # the node's own nvidia.com/gpu spec as node source, post-check
  for ext in json html md junit.xml; do
    files=("$ev"/reports-node/gpuprobe-report-2*/gpuprobe-report."$ext"); cp "${files[0]}" "$dest/h200-verify-gpu-node/$(basename "$(dirname "${files[0]}")").$ext"
  done
fi
[ -f "$ev/interrupt.txt" ] && cp "$ev/interrupt.txt" "$dest/h200-interrupt.txt"
for moment in host-control report; do  # SIGTERM during the host control and during the report writing
  [ -f "$ev/interrupt-$moment.txt" ] && cp "$ev/interrupt-$moment.txt" "$dest/h200-interrupt-$moment.txt"
done
for ext in json html md; do
  files=("$ev"/drills/gpuprobe-drills-2*/gpuprobe-drills."$ext"); cp "${files[0]}" "$dest/h200-fault-drills/$(basename "$(dirname "${files[0]}")").$ext"
done
find "$dest" -type f | sort
