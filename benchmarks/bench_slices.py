"""The controller's share of a sliced run (docs/fleet.md, "Sliced runs"): what each slice's fleet_report costs to write its
slice file, and what the merge costs to write the fleet's report, gate, retry and metrics files, against the same hosts
reported unsliced; the merged verdicts are checked against the unsliced ones.

    python benchmarks/bench_slices.py OUT.json [--sizes 2000] [--slices 4]

The fleet: tests/unit/fixtures/report/replayfleet.py (the real H200 records of docs/evidence replayed under N host
names, every verdict), spooled as verify_node leaves them, dealt round-robin into the slices as AWX deals a sliced job
template's inventory. Each step is the real fleet_report action (the real ActionBase) in a fresh Python process: its
wall time (run()) and peak RSS. The slices run one after another here (on execution nodes they run side by side); the
machine's load average is written with the figures. Needs ansible-core and the collection importable (.build/env.sh).
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "report"))

CHILD = r"""
import json, os, pickle, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader()
from ansible import constants as C
C.DEFAULT_LOCAL_TMP = sys.argv[2]
from actionlab import make_action
from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
with open(sys.argv[3], "rb") as f:
    hostvars, hosts, extra = pickle.load(f)
args = dict({"hosts": hosts, "report_dir": sys.argv[4], "run": {"mode": "full", "cdi_source": "node"},
             "group_by": ["rack", "zone"]}, **extra)
action = make_action(A, "gpuprobe.layers.fleet_report", args)
t0 = time.perf_counter()
result = action.run(task_vars={"hostvars": hostvars})
wall = time.perf_counter() - t0
print(json.dumps({"wall_s": round(wall, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
                  "verdicts": result["verdicts"], "gate": result["gate"], "files": result["files"]}))
"""


def step(where, name, hostvars, hosts, extra):
    path = os.path.join(where, name + ".pickle")
    with open(path, "wb") as f:
        pickle.dump((hostvars, hosts, extra), f)
    tmp = os.path.join(where, name + "-tmp")
    os.makedirs(tmp)
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(ROOT, "tests", "unit", "fixtures", "host"), tmp, path,
                          os.path.join(where, "reports")], check=True, stdout=subprocess.PIPE).stdout.decode()
    return json.loads(out.strip().splitlines()[-1])


def measure(n, slices, where):
    from replayfleet import spooled_hostvars  # pylint: disable=import-outside-toplevel
    hostvars = spooled_hostvars(n, where)
    names = sorted(hostvars)
    sliced = {"slice": {"run_id": "bench", "dir": os.path.join(where, "slices")}}
    out = {"hosts": n, "slices": slices, "load_before": os.getloadavg()}
    out["unsliced"] = step(where, "unsliced", hostvars, names, {})
    out["slice"] = []
    for i in range(slices):
        part = names[i::slices]
        out["slice"].append(step(where, "slice-%d" % i, dict((h, hostvars[h]) for h in part), part, sliced))
    merge = dict(sliced["slice"], merge=True, count=slices)
    out["merge"] = step(where, "merge", {}, names, {"slice": merge})
    assert out["merge"]["verdicts"] == out["unsliced"]["verdicts"] and out["merge"]["gate"] == out["unsliced"]["gate"]
    for row in [out["unsliced"], out["merge"]] + out["slice"]:
        row["hosts"] = len(row.pop("verdicts"))
    out["slice_file_bytes"] = sum(os.path.getsize(r["files"]["slice"]) for r in out["slice"])
    out["load_after"] = os.getloadavg()
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--sizes", default="2000")
    parser.add_argument("--slices", type=int, default=4)
    args = parser.parse_args()
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-slices-") as where:
            row = measure(n, args.slices, where)
        rows.append(row)
        print("N=%d: unsliced %.1f s %.0f MB; slices %s s; merge %.1f s %.0f MB; slice files %.1f MB; load %s -> %s" % (
            n, row["unsliced"]["wall_s"], row["unsliced"]["peak_rss_mb"], [r["wall_s"] for r in row["slice"]],
            row["merge"]["wall_s"], row["merge"]["peak_rss_mb"], row["slice_file_bytes"] / 1e6,
            "/".join("%.1f" % x for x in row["load_before"]), "/".join("%.1f" % x for x in row["load_after"])), flush=True)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
