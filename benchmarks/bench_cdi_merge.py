"""Merging the edits of many devices (issue 11: 10,000 devices took 14.5 s to merge, quadratic).

    python benchmarks/bench_cdi_merge.py [N ...]      (default: 2500 5000 10000)

For each N, one spec of N devices (a node, a mount and an env entry each) is loaded and ``merge_edits`` is timed
over all of them (best of 3). Prints each N's time and the ratio to the smallest N's time per device: a linear
merge keeps that ratio near 1, a quadratic one grows with N. Needs the collection importable (source .build/env.sh).
The unit test (test__cdi_loader.py) checks what is merged; the time is measured only here.
"""
import json
import os
import sys
import tempfile
import time

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import files as _cdi_files
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import resolve as _cdi_resolve


def spec_text(n):
    devices = "".join("- name: g%d\n  containerEdits:\n    deviceNodes: [{path: /dev/g%d, type: c, major: 1, minor: %d}]\n"
                      "    mounts: [{hostPath: /h%d, containerPath: /c%d}]\n    env: [K%d=v]\n" % (i, i, i % 256, i, i, i)
                      for i in range(n))
    return "cdiVersion: 0.5.0\nkind: v.com/cc\ndevices:\n" + devices


def merge_seconds(n, tmp):
    path = os.path.join(tmp, "big%d.yaml" % n)
    with open(path, "w") as f:
        f.write(spec_text(n))
    registry, _c, _o = _cdi_resolve.build_registry([dict(_cdi_files.load_spec_file(path, max_size=1 << 26), priority=0)])
    names = ["v.com/cc=g%d" % i for i in range(n)]
    best = None
    for _round in range(3):
        t0 = time.perf_counter()
        _cdi_resolve.merge_edits(registry, names, root=os.path.join(tmp, "nohost"))
        elapsed = time.perf_counter() - t0
        best = elapsed if best is None else min(best, elapsed)
    return best


def main(argv):
    sizes = [int(a) for a in argv] or [2500, 5000, 10000]
    with tempfile.TemporaryDirectory() as tmp:
        rows = [(n, merge_seconds(n, tmp)) for n in sizes]
    base = rows[0][1] / rows[0][0]
    table = [{"devices": n, "merge_s": round(s, 4), "per_device_vs_smallest": round((s / n) / base, 2)} for n, s in rows]
    print(json.dumps({"load": os.getloadavg(), "rows": table}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
