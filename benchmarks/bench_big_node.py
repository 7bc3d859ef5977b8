"""Controller memory and time when one node returns far more than an honest node (issue 34.5): this checkout and other
checkouts side by side, against ansible-core alone reading the same module result (the floor).

    python benchmarks/bench_big_node.py OUT.json [--mb 300] [--checks 0] [--baseline DIR ...] [--timeout 600]

One inventory host with the local connection. Its node side is faked: in a copy of each checkout, the module
gpuprobe.layers.node_layers is replaced by one that prints a conforming host record whose evidence holds ``--mb`` MB of
text (and ``--checks`` checks), as a broken or hostile node would, past the node-side cap. Three runs each:

- ``floor``: a playbook whose one task runs that module and registers its result (ansible-core reading it, no gpuprobe
  code on the controller);
- ``<label>``: playbooks/verify-gpu.yml -e gpuprobe_mode=audit of that checkout (verify_node, the spool, fleet_report).

The resident set (VmRSS) of ansible-playbook's main process and of every process it forked (the workers, the report's
among them) is sampled every 0.1 s; the peaks, the wall time, the exit status and the size of the JSON report are
written. Bounded: each run is killed after --timeout seconds (then reported as such). No GPU, no SSH, no root needed.
Needs the collection's requirements (source scripts/dev-env.sh).
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

from bench_memory import _children, _rss_mb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPY_IGNORE = shutil.ignore_patterns(".git", ".build", ".venv", "tests", "docs", "benchmarks", "molecule", "*.pyc", "__pycache__")

FAKE_NODE = r'''#!/usr/bin/python
# A faked node (benchmarks/bench_big_node.py): prints a conforming host record whose evidence holds MB of text.
import json
import sys

MB, CHECKS = %(mb)d, %(checks)d
checks = [{"id": "host.sample.%%d" %% i, "status": "PASS", "subject": None, "expected": None, "observed": "x", "hint": None}
          for i in range(max(CHECKS, 1))]
record = {"layer": "host", "status": "PASS", "reason": None, "checks": checks, "evidence": {"blob": "x" * (MB << 20)},
          "not_proven": ["that a container can compute on the GPU"], "versions": {}, "started_at": "2026-12-04T00:00:00Z",
          "duration_ms": 1.0, "signature": None, "points_to": None}
sys.stdout.write(json.dumps({"changed": False, "records": {"host": record}}))
'''

FLOOR_PLAYBOOK = """- hosts: all
  gather_facts: false
  tasks:
    - name: the faked node's module, its result registered (ansible-core alone)
      gpuprobe.layers.node_layers: {}
      register: big
    - name: done
      ansible.builtin.debug:
        msg: "{{ big.records | length }} record(s)"
"""


def collection(tmp, label, checkout, mb, checks):
    """A copy of ``checkout`` whose node_layers module is the faked node; the ANSIBLE_COLLECTIONS_PATH entry for it."""
    base = os.path.join(tmp, label.replace(":", "_"))
    dest = os.path.join(base, "ansible_collections", "gpuprobe", "layers")
    shutil.copytree(checkout, dest, ignore=COPY_IGNORE, symlinks=True)
    with open(os.path.join(dest, "plugins", "modules", "node_layers.py"), "w") as f:
        f.write(FAKE_NODE % {"mb": mb, "checks": checks})
    return base, dest


def sample(argv, env, timeout):
    """Run ``argv``; (rc, wall_s, peak_main_mb, peak_fork_mb, output tail). rc None: killed at ``timeout``."""
    log = tempfile.TemporaryFile()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    peak_main = peak_fork = 0.0
    rc = None
    while time.monotonic() - t0 < timeout:
        rc = proc.poll()
        if rc is not None:
            break
        peak_main = max(peak_main, _rss_mb(proc.pid))
        for kid in _children(proc.pid):
            peak_fork = max(peak_fork, _rss_mb(kid))
        time.sleep(0.1)
    if rc is None:
        os.killpg(proc.pid, 9)
        proc.wait()
    wall = time.monotonic() - t0
    log.seek(0)
    tail = log.read().decode(errors="replace")[-1500:]
    log.close()
    return rc, round(wall, 1), round(peak_main, 1), round(peak_fork, 1), tail


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("--mb", type=int, default=300)
    ap.add_argument("--checks", type=int, default=0)
    ap.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-big-node-")
    results = {}
    try:
        inventory = os.path.join(tmp, "hosts.ini")
        with open(inventory, "w") as f:
            f.write("[nodes]\nbig ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
        checkouts = [("now", ROOT)] + [("baseline:%s" % os.path.basename(os.path.abspath(b)), os.path.abspath(b))
                                       for b in args.baseline]
        floor_playbook = os.path.join(tmp, "floor.yml")
        with open(floor_playbook, "w") as f:
            f.write(FLOOR_PLAYBOOK)
        for index, (label, checkout) in enumerate(checkouts):
            path, dest = collection(tmp, label, checkout, args.mb, args.checks)
            env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=path, GPUPROBE_CACHE=os.path.join(tmp, "cache-%d" % index),
                       ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "ansible-tmp-%d" % index))
            env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
            runs = [(label, ["ansible-playbook", "-i", inventory, os.path.join(dest, "playbooks", "verify-gpu.yml"),
                             "-e", "gpuprobe_mode=audit", "-e", "verify_k8s=false", "-e", "verify_nvml=false",
                             "-e", "gpuprobe_report_dir=%s" % os.path.join(tmp, "reports-%d" % index)])]
            if index == 0:
                runs.insert(0, ("floor", ["ansible-playbook", "-i", inventory, floor_playbook]))
            for name, argv in runs:
                rc, wall, main_mb, fork_mb, tail = sample(argv, env, args.timeout)
                report = os.path.join(tmp, "reports-%d" % index, "gpuprobe-report-latest.json")
                got = {"rc": rc, "wall_s": wall, "peak_main_mb": main_mb, "peak_fork_mb": fork_mb,
                       "peak_mb": max(main_mb, fork_mb),
                       "report_json_bytes": os.path.getsize(report) if name != "floor" and os.path.exists(report) else None}
                if rc not in (0, 2):  # 2: the playbook failed the node (RUN_FAILED), as it must
                    got["output_tail"] = tail
                results[name] = got
                print(name, json.dumps(got), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "mb": args.mb, "checks": args.checks, "baseline": args.baseline, "results": results}
    text = json.dumps(result, indent=2) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
