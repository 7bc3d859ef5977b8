#!/usr/bin/env bash
# The runtime layer through the engines the workloads use, on the offline GPU host (docs/runtimes.md, docs/lab.md):
#   bash scripts/gpu-engines.sh OUTDIR [ENGINES]
# ENGINES: a comma list of containerd, docker, podman (default: podman and every engine whose binaries are here).
# Before: on a connected machine, `bash scripts/engines.sh fetch && bash scripts/engines.sh pack .gpu-engines
# containerd` (about 30 MB; `... pack .gpu-engines docker` is the docker part, about 30 MB more), and the lab's set-up
# (.gpu-lab/device-setup.sh: podman 4.3.1 + runc, the wheels with grpcio and protobuf on PYTHONPATH). The device run
# carries at most 64 MiB, the lab bundle included, so containerd and docker go in two runs on the same warm machine:
# the first carries engines-containerd (it is unpacked into .build/engines, which a warm machine keeps), the second
# engines-docker (dockerd starts the containerd unpacked by the first).
# Steps, each going on after a failure:
#   1. unpack .gpu-engines/engines-*.tar.xz into .build/engines (checked against SHA256SUMS)
#   2. the probe image (scripts/build-probe-image.sh, the host's own python3, through the lab's podman)
#   3. start containerd (CRI, enable_cdi, native snapshotter, the carried pause image and the probe image imported
#      with ctr) and/or dockerd (CDI feature, vfs, no bridge/iptables, the probe image loaded), on private sockets
#   4. pytest tests/gpu/test_engines_gpu.py: COMPUTE_VERIFIED by the GPU's UUID through each engine, and one failing
#      drill per engine (no libnvidia-ptxjitcompiler mount -> FAILED_AT_COMPUTE pointing at cdi); with containerd,
#      tests/gpu/test_handlers_gpu.py: COMPUTE_VERIFIED through a private containerd's SECOND runtime handler (a runc
#      wrapper that records its calls), the verdict naming the handler, its binary and the injector
#                                                            -> OUTDIR/evidence-engines/<engine>-<variant>.json
#   5. benchmarks/bench_engines.py --gpu: per-engine cost side by side -> OUTDIR/evidence-engines/bench-engines.json
#      (GPUPROBE_ENGINES_BENCH=0 skips it: a run that verifies behaviour only)
#   6. stop the engines; list what is left (nothing is expected) into the log
# and packs OUTDIR/evidence-engines into OUTDIR/evidence-engines.tgz. Exit status: the number of failed steps.
set -uo pipefail
out=${1:?usage: gpu-engines.sh OUTDIR [containerd,docker,podman]}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo" || exit 1
ev=$out/evidence-engines
log=$out/gpu-engines.log
mkdir -p "$ev"
failed=0
# shellcheck source=scripts/step.sh
. "$repo/scripts/step.sh"

# the collection imported from this tree (as scripts/dev-env.sh does, without its bootstrap)
mkdir -p .build/dev/ansible_collections/gpuprobe
ln -sfn "$repo" .build/dev/ansible_collections/gpuprobe/layers
export PYTHONPATH=$repo/.build/dev${PYTHONPATH:+:$PYTHONPATH}
# shellcheck disable=SC1091  # the lab set-up writes it (docs/lab.md)
[ -f .gpu-lab/env.sh ] && . .gpu-lab/env.sh
py=$(command -v python3)
export GPUPROBE_ENGINES_DIR=${GPUPROBE_ENGINES_DIR:-$repo/.build/engines}

# 1. the carried engines
if ls .gpu-engines/engines-*.tar.xz >/dev/null 2>&1; then
  step unpack bash scripts/engines.sh unpack .gpu-engines
fi
if [ -n "${2:-}" ]; then
  engines=$2
else
  engines=podman
  [ -x "$GPUPROBE_ENGINES_DIR/containerd/usr/bin/containerd" ] && engines=$engines,containerd
  [ -x "$GPUPROBE_ENGINES_DIR/docker.io/usr/sbin/dockerd" ] && engines=$engines,docker
fi
{ echo "engines: $engines"; uname -r; ldd --version | head -1; "$py" --version
  "$py" -c 'import grpc, google.protobuf; print("grpcio", grpc.__version__, "protobuf", google.protobuf.__version__)'
  podman --version; runc --version | head -1; cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null; } >>"$log" 2>&1

# 2. the probe image (the host's own python3; no registry)
export GPUPROBE_PROBE_IMAGE=${GPUPROBE_PROBE_IMAGE:-localhost/gpuprobe-probe:local}
step probe-image bash scripts/build-probe-image.sh "$GPUPROBE_PROBE_IMAGE"

# 3. the engines, on private sockets
case ",$engines," in *,containerd,*) step start-containerd bash scripts/engines.sh start containerd ;; esac
case ",$engines," in *,docker,*) step start-dockerd bash scripts/engines.sh start dockerd ;; esac
eval "$(bash scripts/engines.sh env)"
export PATH=$GPUPROBE_ENGINES_PATH:$PATH

# 4. COMPUTE_VERIFIED through each engine, one failing drill each
#    and the engine-parametrised truth and attribution variants (issue 32): a spec that replaces the probe, the spec
#    whose edit the runtime applied as asked; and the probe through containerd's second runtime handler (issue 35)
step pytest-engines env GPUPROBE_GPU=1 GPUPROBE_ENGINES="$engines" GPUPROBE_EVIDENCE_DIR="$ev" \
  "$py" -m pytest -p no:cacheprovider -v -m gpu tests/gpu/test_engines_gpu.py \
  tests/gpu/test_truth_gpu.py::test_a_spec_that_replaces_the_probe_is_never_verified tests/gpu/test_spec_did_it_gpu.py \
  tests/gpu/test_probe_trust_gpu.py \
  tests/gpu/test_handlers_gpu.py \
  -o addopts="" --junitxml="$ev/pytest-engines.xml"

# 5. the per-engine cost, side by side
[ "${GPUPROBE_ENGINES_BENCH:-1}" = 0 ] || step benchmark-engines "$py" benchmarks/bench_engines.py "$ev/bench-engines.json" 5 --gpu --engines "$engines"

# 6. nothing of ours may be left, on any engine (an empty listing is the expected result)
step leftovers "$py" - "$engines" <<'PY'
import json, sys
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
import os
left = {}
for name in sys.argv[1].split(","):
    opts = {"containerd": (os.environ.get("GPUPROBE_CRI_ENDPOINT"), os.environ.get("GPUPROBE_CRI_DESCRIPTOR")),
            "docker": (os.environ.get("GPUPROBE_DOCKER_HOST"), None)}.get(name, (None, None))
    out = _runtime_cleanup.cleanup(runtime=name, endpoint=opts[0], descriptor=opts[1], check_mode=True, specs=False)
    left[name] = {"containers": out["containers"], "live": out["live"], "errors": out["errors"]}
print(json.dumps(left, indent=2))
sys.exit(1 if any(v["containers"] or v["live"] or v["errors"] for v in left.values()) else 0)
PY
case ",$engines," in *,docker,*) step stop-dockerd bash scripts/engines.sh stop dockerd ;; esac
case ",$engines," in *,containerd,*) step stop-containerd bash scripts/engines.sh stop containerd ;; esac
{ echo "left in /var/run/cdi:"; ls -la /var/run/cdi; } >>"$log" 2>&1
tar -C "$out" -czf "$out/evidence-engines.tgz" evidence-engines
echo "failed steps: $failed" | tee -a "$log"
exit "$failed"
