"""The node side of an audit alone: the inspect stage (host + cdi layers, runtime selection) of this checkout and of
other checkouts, interleaved round by round, each in a fresh interpreter (the imports are part of a node-side call).

    python benchmarks/bench_inspect.py OUT.json [--rounds 7] [--fixture] [--nvml] [--baseline DIR ...]

Per run: wall of the imports plus ``_inspect.inspect`` (the defaults of node_layers, NVML off, k8s off), the CPU of the
interpreter and its children (RUSAGE_CHILDREN), which modules were loaded, and every process ``_run`` started (argv, wall,
rc). Without --fixture the real node at / is read: the runtime selection and the engines' CDI configuration run (they
run only at /); --fixture reads the synthetic node tree of bench_node.py (no engine is asked there).
Needs nothing but this checkout (source scripts/dev-env.sh); ratios within one run only.
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, sys, time
t0 = time.perf_counter()
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args
calls = []
_execute = _run._execute
def traced(argv, **kw):
    t = time.perf_counter()
    r = _execute(argv, **kw)
    calls.append({"argv": " ".join(argv)[:120], "ms": round((time.perf_counter() - t) * 1000, 1), "rc": r.get("rc")})
    return r
_run._execute = traced
p = dict((k, v.get("default")) for k, v in _args.NODE_LAYERS_ARGSPEC.items())
p.update(json.loads(sys.argv[1]))
out = _inspect.inspect(p)
wall = (time.perf_counter() - t0) * 1000
print(json.dumps({"wall_ms": round(wall, 1), "calls": calls, "grpc_loaded": any(m.startswith("grpc") for m in sys.modules),
                  "statuses": dict((k, v.get("status")) for k, v in out["records"].items())}))
'''


def one(checkout_path, params):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (checkout_path, os.environ.get("PYTHONPATH")) if p))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(params)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = (time.perf_counter() - t0) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the interpreter and every process it waited for
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
    if proc.returncode != 0:
        sys.exit("inspect failed in %s:\n%s" % (checkout_path, err.decode(errors="replace")[-4000:]))
    res = json.loads(out.decode().strip().splitlines()[-1])
    res["process_wall_ms"] = round(wall, 1)
    res["cpu_ms"] = round(cpu, 1)
    return res


def checkout_env(top, **extra):
    """This process's environment with the collection linked under ``top`` (a ``link_checkouts`` path) first on
    ANSIBLE_COLLECTIONS_PATH and PYTHONPATH, and ``extra``."""
    pythonpath = os.pathsep.join(p for p in (top, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=top, PYTHONPATH=pythonpath, **extra)


def link_checkouts(tmp, baselines):
    """[(label, checkout)] of this checkout ("now") and each baseline ("baseline:<dir name>"), and label -> a directory
    under ``tmp`` to put on ANSIBLE_COLLECTIONS_PATH/PYTHONPATH for it (ansible_collections/gpuprobe/layers links)."""
    checkouts = [("now", ROOT)] + [("baseline:%s" % os.path.basename(os.path.abspath(b)), os.path.abspath(b)) for b in baselines]
    paths = {}
    for label, checkout in checkouts:
        link = os.path.join(tmp, label.replace(":", "_"), "ansible_collections", "gpuprobe")
        os.makedirs(link)
        os.symlink(checkout, os.path.join(link, "layers"))
        paths[label] = os.path.dirname(os.path.dirname(link))
    return checkouts, paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--fixture", action="store_true")
    ap.add_argument("--baseline", action="append", default=[])
    ap.add_argument("--nvml", action="store_true", help="read NVML (the per-GPU inventory and health): a GPU host")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-inspect-")
    params = {"nvml": bool(args.nvml), "layers": ["host", "cdi"]}
    if args.fixture:
        sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
        sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
        from hostfixture import build_node  # pylint: disable=import-outside-toplevel
        from bench_fleet import _write_cdi_spec  # pylint: disable=import-outside-toplevel
        build_node(os.path.join(tmp, "node"), gpus=8, procfs=True)
        _write_cdi_spec(os.path.join(tmp, "node"), 8)
        params["root"] = os.path.join(tmp, "node")
    checkouts, paths = link_checkouts(tmp, args.baseline)
    runs = dict((label, []) for label, _c in checkouts)
    try:
        for _rnd in range(args.rounds):
            for label, _c in checkouts:
                runs[label].append(one(paths[label], params))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = dict((label, statistics.median(r["process_wall_ms"] for r in rs)) for label, rs in runs.items())
    summary = {}
    for label, rs in runs.items():
        summary[label] = {
            "median_process_wall_ms": med[label],
            "median_inspect_wall_ms": statistics.median(r["wall_ms"] for r in rs),
            "median_cpu_ms": statistics.median(r["cpu_ms"] for r in rs),
            "processes_per_run": statistics.median(len(r["calls"]) for r in rs),
            "median_process_ms_summed": statistics.median(sum(c["ms"] for c in r["calls"]) for r in rs),
            "grpc_loaded": sorted(set(r["grpc_loaded"] for r in rs)),
            "statuses": rs[-1]["statuses"],
            "calls_last_round": rs[-1]["calls"],
        }
    ratios = dict(("now / %s" % label, round(med["now"] / med[label], 2)) for label in med if label != "now")
    cpu = dict((label, summary[label]["median_cpu_ms"]) for label in med)
    ratios.update(("now cpu / %s cpu" % label, round(cpu["now"] / cpu[label], 2)) for label in cpu if label != "now")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "rounds": args.rounds, "fixture": args.fixture, "nvml": bool(args.nvml), "baselines": args.baseline, "summary": summary,
              "ratios": ratios, "runs": runs}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    brief = dict((k, dict((kk, vv) for kk, vv in v.items() if kk != "calls_last_round")) for k, v in summary.items())
    print(json.dumps({"ratios": ratios, "summary": brief}, indent=2))


if __name__ == "__main__":
    main()
