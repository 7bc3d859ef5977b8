"""Many small specs in one spec dir (issue 19: 10,000 specs took 43 s and 726 MB on the controller).

    python benchmarks/bench_cdi_dir.py [N] [OUT.json]

Writes N small valid specs (one device each, kinds other than the requested one, as a DRA node's per-claim specs
are) plus one NVIDIA-like spec into a temporary dir, then runs the cdi layer on it in a child process (so its peak
RSS is its own) and measures: wall time, the child's peak RSS, the record's JSON size and its number of checks, and
the controller's share: a second child that json.loads the record (what Ansible does with a module's result) and
its peak RSS. Needs the collection importable (source scripts/dev-env.sh).
"""
import json
import os
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import json, resource, sys, time
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi
t = time.monotonic()
rec = _cdi.record(spec_dirs=[sys.argv[1]], discover_runtime_dirs_=False, devices=["bench.example.com/gpu=0"],
                  kinds=["bench.example.com/gpu"])
wall = time.monotonic() - t
text = json.dumps(rec)
with open(sys.argv[2], "w") as f:
    f.write(text)
print(json.dumps({"wall_s": round(wall, 2), "node_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "record_bytes": len(text), "checks": len(rec["checks"]), "status": rec["status"],
                  "files_in_evidence": len(rec["evidence"]["files"])}))
"""
CONTROLLER = r"""
import json, resource, sys, time
t = time.monotonic()
with open(sys.argv[1]) as f:
    rec = json.loads(f.read())
copy = json.loads(json.dumps({"ansible_facts": {"gpuprobe_cdi": rec}}))  # the result and one copy, as the task result is kept
print(json.dumps({"controller_s": round(time.monotonic() - t, 2),
                  "controller_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def write_dir(d, n):
    for i in range(n):
        with open(os.path.join(d, "claim-%05d.yaml" % i), "w") as f:
            f.write("cdiVersion: 0.5.0\nkind: k8s.example.com/claim\ndevices:\n- name: c%05d-gpu-0\n"
                    "  containerEdits:\n    env: [CLAIM=%d]\n    deviceNodes: [{path: /dev/null}]\n" % (i, i))
    with open(os.path.join(d, "bench.yaml"), "w") as f:
        f.write("cdiVersion: 0.5.0\nkind: bench.example.com/gpu\ndevices:\n- name: '0'\n  containerEdits:\n"
                "    deviceNodes: [{path: /dev/null}]\n")


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
    out = {"specs": n}
    with tempfile.TemporaryDirectory() as tmp:
        spec_dir = os.path.join(tmp, "cdi")
        os.mkdir(spec_dir)
        write_dir(spec_dir, n)
        record = os.path.join(tmp, "record.json")
        t = time.monotonic()
        node = subprocess.run([sys.executable, "-c", CHILD, spec_dir, record], check=True, capture_output=True, text=True)
        out.update(json.loads(node.stdout))
        out["node_process_s"] = round(time.monotonic() - t, 2)
        ctl = subprocess.run([sys.executable, "-c", CONTROLLER, record], check=True, capture_output=True, text=True)
        out.update(json.loads(ctl.stdout))
    text = json.dumps(out, indent=1)
    print(text)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
