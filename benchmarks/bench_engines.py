"""What the runtime layer costs through each engine, side by side: a CRI pod sandbox + container (containerd, the
kubelet's path) vs `podman run` vs `docker run`, each started by runtime_facts with the same CDI device.

    python benchmarks/bench_engines.py OUT.json [rounds] [--gpu] [--engines podman,containerd,docker]

Here (no GPU): a synthetic spec in /var/run/cdi (a char node made with mknod, an env, a bind-mounted file), the
probe's inventory only. With --gpu (scripts/gpu-engines.sh on the GPU host): the self-built spec of the host's driver
root, and each engine also runs the compute steps (``runtime+compute``), whose verdict is recorded with the times.
containerd and dockerd must be running (scripts/engines.sh start ...; their sockets from scripts/engines.sh env:
GPUPROBE_CRI_ENDPOINT, GPUPROBE_CRI_DESCRIPTOR, GPUPROBE_DOCKER_HOST); an engine that is not usable is skipped, with
its reason in the output. Rounds are interleaved (podman, containerd, docker, podman, ...) so that drift hits every
engine alike. Writes every round's wall time (ms) per engine, their medians and each median's ratio to podman's.
Only ratios measured in the same run are quoted in docs/performance.md.
"""
import json
import os
import shutil
import stat
import statistics
import sys
import tempfile
import time
import uuid

import yaml

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import engines as _runtime_engines
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
SPEC_DIR = "/var/run/cdi"


def engine_params():
    """runtime_facts options per engine, from scripts/engines.sh env's variables."""
    return {
        "podman": {"runtime": "podman"},
        "containerd": {"runtime": "containerd", "runtime_endpoint": os.environ.get("GPUPROBE_CRI_ENDPOINT"),
                       "cri_descriptor": os.environ.get("GPUPROBE_CRI_DESCRIPTOR")},
        "docker": {"runtime": "docker", "runtime_endpoint": os.environ.get("GPUPROBE_DOCKER_HOST")},
    }


def synthetic_spec(run_id, base):
    """A spec of this run's own kind: one char node (mknod 1:3, /dev/null's numbers), an env, a bound file."""
    node = os.path.join(base, "node0")
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    lib = os.path.join(base, "libsynthetic.so.1")
    with open(lib, "w") as f:
        f.write("synthetic\n")
    kind = _cdi_spec.run_kind(run_id)
    edits = {"deviceNodes": [{"path": "/dev/gpuprobe-bench0", "hostPath": node, "type": "c", "major": 1, "minor": 3}],
             "env": ["GPUPROBE_BENCH=1"],
             "mounts": [{"hostPath": lib, "containerPath": "/usr/lib/gpuprobe-bench/libsynthetic.so.1",
                         "options": ["ro", "nosuid", "nodev", "bind"]}]}
    spec = {"cdiVersion": "0.5.0", "kind": kind, "devices": [{"name": "0", "containerEdits": edits}]}
    path = os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % run_id)
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(path, "w") as f:
        yaml.safe_dump(spec, f)
    return "%s=0" % kind, edits, path


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    gpu = "--gpu" in sys.argv
    names = ["podman", "containerd", "docker"]
    for i, a in enumerate(sys.argv):
        if a == "--engines" and i + 1 < len(sys.argv):
            names = sys.argv[i + 1].split(",")
            args = [x for x in args if x != sys.argv[i + 1]]
    out_path = args[0]
    rounds = int(args[1]) if len(args) > 1 else 5
    run_id = "bench-%s" % uuid.uuid4().hex[:8]
    base = tempfile.mkdtemp(prefix="gpuprobe-bench-engines-")
    os.chmod(base, 0o755)
    host = None
    if gpu:
        host = _host.record(driver_root=DRIVER_ROOT)
        spec = _cdi_spec.build_spec(run_id, variant="full", driver_root=DRIVER_ROOT, host=host)
        spec_path = _cdi_spec.write_spec(spec, SPEC_DIR, run_id)
        device = "%s=0" % spec["kind"]
        cdi = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[device], host=host)
        edits = cdi["evidence"]["expected_edits"]
    else:
        device, edits, spec_path = synthetic_spec(run_id, base)
    params = engine_params()
    engines, skipped = [], {}
    for name in names:
        p = params[name]
        info = _runtime_engines.detect_runtime(name, endpoint=p.get("runtime_endpoint"), descriptor=p.get("cri_descriptor"))
        if info["usable"]:
            engines.append((name, info))
        else:
            skipped[name] = info["reason"]
    samples = dict((name, []) for name, _info in engines)
    outcomes = dict((name, set()) for name, _info in engines)
    try:
        for _round in range(rounds):
            for name, _info in engines:
                request = dict(params[name], run_id=run_id, image=IMAGE, cdi_devices=[device], expected_edits=edits,
                               timeout=120, compute=gpu, host=host)
                t0 = time.perf_counter()
                record, probe = _runtime_layer.record(request)
                samples[name].append(round((time.perf_counter() - t0) * 1000.0, 1))
                outcome = record["status"]
                if gpu:
                    compute = _compute_layer.record(probe, record, host_record=host, host_control=False, timeout=60)
                    outcome = node_verdict({"runtime": record, "compute": compute})["verdict"]
                outcomes[name].add(outcome)
    finally:
        if gpu:
            _cdi_spec.remove_spec(SPEC_DIR, run_id)
        elif os.path.exists(spec_path):
            os.unlink(spec_path)
        shutil.rmtree(base, ignore_errors=True)
    medians = dict((name, round(statistics.median(v), 1)) for name, v in samples.items() if v)
    ref = medians.get("podman")
    result = {
        "what": "runtime_facts wall time per engine (%s), interleaved rounds" % ("runtime+compute on the GPU" if gpu else "inventory only, synthetic device"),
        "rounds": rounds, "image": IMAGE, "device": device,
        "engines": dict((name, {"version": info.get("version"), "endpoint": info.get("endpoint") or info.get("path"),
                                "oci_runtime": info.get("oci_runtime")}) for name, info in engines),
        "skipped": skipped, "samples_ms": samples, "median_ms": medians,
        "ratio_to_podman": dict((n, round(m / ref, 2)) for n, m in medians.items()) if ref else None,
        "outcomes": dict((n, sorted(v)) for n, v in outcomes.items()),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2, sort_keys=True)
    print(json.dumps({k: result[k] for k in ("median_ms", "ratio_to_podman", "outcomes", "skipped")}, sort_keys=True))


if __name__ == "__main__":
    main()
