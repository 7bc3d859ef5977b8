"""The fleet_report action alone, for this checkout and other checkouts side by side: wall time and peak RSS of a
process that runs it once over N spooled hosts (no Ansible run, no GPU).

    python benchmarks/bench_report_action.py OUT.json [--sizes 100,300] [--rounds 3] [--baseline DIR ...]

For each N, the synthetic fleet of tests/unit/fixtures/host/fleetfixture.py is spooled as verify_node leaves it (one
records file per host, the result keeping records_file and layer_status); then, rounds and checkouts interleaved, a
fresh Python process per run imports that checkout's collection and runs its fleet_report action (the real
ActionBase, every format) over the hostvars: its wall time (the action's run()) and its peak RSS (ru_maxrss) are
written, with the per added host figures ((at the largest N - at the smallest N) / difference in N) and each
baseline's against this checkout. Needs ansible-core importable (source scripts/dev-env.sh).
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench_inspect import link_checkouts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "unit", "fixtures", "host")

CHILD = r"""
import json, os, pickle, resource, sys, time
sys.path.insert(0, sys.argv[1])
from ansible.plugins.loader import init_plugin_loader
init_plugin_loader()
from ansible import constants as C
C.DEFAULT_LOCAL_TMP = sys.argv[3]
from actionlab import make_action
from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A
with open(sys.argv[2], "rb") as f:
    hostvars = pickle.load(f)
action = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": sys.argv[4]})
t0 = time.perf_counter()
result = action.run(task_vars={"hostvars": hostvars})
wall = time.perf_counter() - t0
assert len(result["verdicts"]) == len(hostvars) and result["files"]
print(json.dumps({"wall_s": round(wall, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}))
"""


def spooled_hostvars(n, where):
    """hostvars of N hosts of the synthetic fleet, each verify_result spooled to a file under ``where``."""
    import pickle  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, FIXTURES)
    from fleetfixture import synthetic_fleet  # pylint: disable=import-outside-toplevel
    from ansible import constants as C  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._spool import spool  # pylint: disable=import-outside-toplevel
    C.DEFAULT_LOCAL_TMP = where
    hostvars = {}
    for item in synthetic_fleet(n):
        if item["unreachable"]:
            result = {"unreachable": True, "msg": item["unreachable"]}
        elif item["error"]:
            result = {"failed": True, "msg": item["error"]}
        else:
            result = {"records": item["records"], "run_id": "bench"}
            spool(result, item["name"], "bench")
        hostvars[item["name"]] = {"verify_result": result, "gpuprobe_pins": item["pins"]}
    path = os.path.join(where, "hostvars-%d.pickle" % n)
    with open(path, "wb") as f:
        pickle.dump(hostvars, f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="100,300")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-report-action-")
    runs = {}
    try:
        checkouts, paths = link_checkouts(tmp, args.baseline)
        inputs = dict((n, spooled_hostvars(n, tmp)) for n in sizes)
        for _round in range(args.rounds):
            for n in sizes:
                for label, _checkout in checkouts:
                    report_dir = tempfile.mkdtemp(dir=tmp)
                    env = dict(os.environ, PYTHONPATH=paths[label], ANSIBLE_COLLECTIONS_PATH=paths[label])
                    out = subprocess.run([sys.executable, "-c", CHILD, FIXTURES, inputs[n], tmp, report_dir], env=env,
                                         check=True, stdout=subprocess.PIPE).stdout.decode()
                    got = json.loads(out.strip().splitlines()[-1])
                    runs.setdefault(label, {}).setdefault(str(n), []).append(got)
                    print(label, n, json.dumps(got), flush=True)
                    shutil.rmtree(report_dir, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    medians = dict((label, dict((n, dict((k, statistics.median(r[k] for r in rs)) for k in ("wall_s", "peak_rss_mb")))
                                for n, rs in by.items())) for label, by in runs.items())
    lo, hi = str(min(sizes)), str(max(sizes))
    per_host = dict((label, dict((k, round((by[hi][k] - by[lo][k]) / max(int(hi) - int(lo), 1), 4))
                                 for k in ("wall_s", "peak_rss_mb"))) for label, by in medians.items())
    ratios = dict((label, dict((n, dict((k, round(by[n][k] / medians["now"][n][k], 2)) for k in ("wall_s", "peak_rss_mb")))
                               for n in by)) for label, by in medians.items() if label != "now")
    result = {"sizes": sizes, "rounds": args.rounds, "baseline": args.baseline, "runs": runs, "medians": medians,
              "per_added_host": per_host, "baseline_over_now": ratios,
              "maxrss_of_this_process_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({"medians": medians, "per_added_host": per_host, "baseline_over_now": ratios}, indent=2))


if __name__ == "__main__":
    main()
