"""What one node's verification costs, side by side with `nvidia-smi`, on a real GPU host.

Run on the GPU host (scripts/gpu-e2e.sh does): python benchmarks/bench_gpu.py OUT.json [rounds]
Each round runs, interleaved so that drift hits every item alike:
  nvidia-smi      `nvidia-smi --query-gpu=name,driver_version --format=csv` (the usual "is the GPU there" check)
  host            the host layer (NVML, sysfs, device nodes, libraries, tools)
  cdi             the cdi layer on a self-built spec (parse, resolve, host checks, audit)
  runtime         a probe container with the CDI device, inventory only (no CUDA)
  runtime+compute the same container also running the CUDA driver API probe with a verified kernel
  host-control    the same compute probe on the host, outside any container
Writes the per-item wall times (ms) of every round, their medians, and each median's ratio to nvidia-smi's.
Only ratios measured in the same run are quoted in docs/performance.md.
"""
import json
import os
import statistics
import sys
import time
import uuid

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import host_control as _compute_host_control
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SELF_BUILT_SPEC_DIR
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run

IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return (time.perf_counter() - t0) * 1000.0, value


def main():
    out_path = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    host = _host.record(driver_root=DRIVER_ROOT)
    run_id = "bench-%s" % uuid.uuid4().hex[:8]
    spec = _cdi_spec.build_spec(run_id, variant="full", driver_root=DRIVER_ROOT, host=host)
    _cdi_spec.write_spec(spec, SELF_BUILT_SPEC_DIR, run_id)
    device = "%s=0" % spec["kind"]  # the run's own kind
    samples = dict((k, []) for k in ("nvidia-smi", "host", "cdi", "runtime", "runtime+compute", "host-control"))
    statuses = dict((k, set()) for k in samples)
    try:
        cdi = _cdi_layer.record(spec_dirs=[SELF_BUILT_SPEC_DIR], discover_runtime_dirs_=False, devices=[device], host=host)
        params = {"run_id": run_id, "image": IMAGE, "cdi_devices": [device], "runtime": "podman", "timeout": 60,
                  "expected_edits": cdi["evidence"]["expected_edits"], "host": host}
        items = [
            ("nvidia-smi", lambda: run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv"], timeout=30)),
            ("host", lambda: _host.record(driver_root=DRIVER_ROOT)),
            ("cdi", lambda: _cdi_layer.record(spec_dirs=[SELF_BUILT_SPEC_DIR], discover_runtime_dirs_=False,
                                              devices=[device], host=host)),
            ("runtime", lambda: _runtime_layer.record(dict(params, compute=False))),
            ("runtime+compute", lambda: _runtime_layer.record(dict(params, compute=True))),
            ("host-control", lambda: _compute_host_control.run_host_control(host, 60)),
        ]
        for _round in range(rounds):
            for name, fn in items:
                ms, value = timed(fn)
                samples[name].append(round(ms, 1))
                statuses[name].add(_status(name, value, host))
    finally:
        _cdi_spec.remove_spec(SELF_BUILT_SPEC_DIR, run_id)
    base = statistics.median(samples["nvidia-smi"])
    result = {
        "rounds": rounds,
        "image": IMAGE,
        "gpu": [g.get("name") for g in host["evidence"]["nvml"].get("gpus") or []],
        "driver": host["versions"].get("driver"),
        "samples_ms": samples,
        "median_ms": dict((k, statistics.median(v)) for k, v in samples.items()),
        "ratio_to_nvidia_smi": dict((k, round(statistics.median(v) / base, 2)) for k, v in samples.items()),
        "outcomes": dict((k, sorted(v)) for k, v in statuses.items()),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({"median_ms": result["median_ms"], "ratio_to_nvidia_smi": result["ratio_to_nvidia_smi"],
                      "outcomes": result["outcomes"]}, indent=2))


def _status(name, value, host):
    """What each item actually achieved (a benchmark of a failing path would measure the wrong thing)."""
    if name == "nvidia-smi":
        return "rc=%s" % value["rc"]
    if name in ("host", "cdi"):
        return value["status"]
    if name.startswith("runtime"):
        record, probe = value
        if name == "runtime+compute":
            compute = _compute_layer.record(probe, record, host_record=host, host_control=False)
            return "%s/%s" % (record["status"], compute["status"])
        return record["status"]
    return value[0]["status"]  # run_host_control -> (outcome, parsed, assessment)


if __name__ == "__main__":
    main()
