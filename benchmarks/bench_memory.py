"""Controller memory of `verify-gpu.yml -e gpuprobe_mode=audit` against the number of nodes, for this checkout and
other checkouts, side by side in one run (no GPU, no SSH needed).

    python benchmarks/bench_memory.py OUT.json [--sizes 100,300] [--forks 20] [--baseline DIR ...]

N inventory hosts with the local connection all audit one synthetic node tree (tests/unit/fixtures/host: 8 GPUs, real
mknod devices, an nvidia.com/gpu spec, NVML off), so the node side is real but cheap and what grows with N is the
controller's: the results it holds, the report it builds. The resident set (VmRSS) of ansible-playbook's main process
and of each process it forked (the workers, the report's among them: a fork counts the parent's pages it touches)
is sampled every 0.2 s; the peaks are written, with the wall time and the report's host count (a run counts only
when it exited 0 and its report lists N hosts). Per added node: (peak at the largest N - peak at the smallest N) /
(difference in N). The module processes (children of the workers) are not counted: they are the node side.
Needs the collection importable by ansible (source scripts/dev-env.sh).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from bench_inspect import link_checkouts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rss_mb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _children(pid):
    kids = []
    try:
        for task in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                kids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return kids


def audit(n, inventory, playbook, env, report_dir, node):
    argv = ["ansible-playbook", "-i", inventory, playbook, "-e", "gpuprobe_mode=audit", "-e", "verify_root=%s" % node,
            "-e", "verify_nvml=false", "-e", "verify_k8s=false", "-e", "gpuprobe_report_dir=%s" % report_dir]
    t0 = time.monotonic()
    # the output goes to a file: a pipe read only at the end fills up (about 1,000 hosts) and stops ansible-playbook
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    peak_main = peak_fork = 0.0
    while proc.poll() is None:
        peak_main = max(peak_main, _rss_mb(proc.pid))
        for kid in _children(proc.pid):
            peak_fork = max(peak_fork, _rss_mb(kid))
        time.sleep(0.2)
    log.seek(0)
    out = log.read().decode(errors="replace")
    log.close()
    wall = time.monotonic() - t0
    hosts = None
    try:
        with open(os.path.join(report_dir, "gpuprobe-report-latest.json")) as f:
            hosts = len(json.load(f)["hosts"])
    except (OSError, ValueError, KeyError):
        pass
    if proc.returncode != 0 or hosts != n:
        sys.exit("audit of %d hosts failed (rc %s, %s hosts in the report):\n%s" % (n, proc.returncode, hosts, out[-3000:]))
    return {"wall_s": round(wall, 1), "peak_main_mb": round(peak_main, 1), "peak_fork_mb": round(peak_fork, 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("--sizes", default="100,300")
    ap.add_argument("--forks", type=int, default=20)
    ap.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-memory-")
    try:
        sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
        from hostfixture import build_node  # pylint: disable=import-outside-toplevel
        from bench_fleet import _write_cdi_spec  # pylint: disable=import-outside-toplevel
        node = os.path.join(tmp, "node")
        build_node(node, gpus=8, procfs=True)
        _write_cdi_spec(node, 8)
        checkouts, paths = link_checkouts(tmp, args.baseline)
        results = {}
        for n in sizes:
            inventory = os.path.join(tmp, "hosts-%d.ini" % n)
            with open(inventory, "w") as f:
                f.write("[nodes]\n" + "".join("n%04d ansible_connection=local ansible_python_interpreter=%s\n" % (i, sys.executable)
                                              for i in range(n)))
            for label, checkout in checkouts:
                env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=paths[label], ANSIBLE_FORKS=str(args.forks),
                           GPUPROBE_CACHE=os.path.join(tmp, "cache-" + label.replace(":", "_")))
                env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
                got = audit(n, inventory, os.path.join(checkout, "playbooks", "verify-gpu.yml"), env,
                            os.path.join(tmp, "reports-%s-%d" % (label.replace(":", "_"), n)), node)
                results.setdefault(label, {})[str(n)] = got
                print(label, n, json.dumps(got), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    per_node = {}
    if len(sizes) > 1:
        lo, hi = str(min(sizes)), str(max(sizes))
        for label, by in results.items():
            per_node[label] = dict((k, round((by[hi][k] - by[lo][k]) / (int(hi) - int(lo)), 3)) for k in ("peak_main_mb", "peak_fork_mb"))
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "sizes": sizes, "forks": args.forks, "baseline": args.baseline, "results": results,
              "mb_per_added_node": per_node}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({"results": results, "mb_per_added_node": per_node}, indent=2))


if __name__ == "__main__":
    main()
