"""What verify-gpu costs on one node against Ansible's own floor, side by side in one run (local connection).

    python benchmarks/bench_node.py --out OUT.json [--rounds 5] [--warmup 1] [--gpu] [--fixture] [--baseline DIR] [--cold]
                                   [--timings] [-e EXTRA ...]          (OUT.json may also be given first, without --out)

Items, interleaved round by round so that drift hits every item alike:
  ping        `ansible localhost -c local -m ansible.builtin.ping`: one no-op module, Ansible's floor
  audit       `ansible-playbook playbooks/verify-gpu.yml -e gpuprobe_mode=audit` against the same localhost
  bare-probe  (--gpu) the probe container alone: `podman run --device <cdi device>` of the probe with compute,
              the argv the runtime layer builds, run directly (no Ansible, no checks, no host control)
  full        (--gpu) `ansible-playbook playbooks/verify-gpu.yml -e gpuprobe_mode=full -e gpuprobe_cdi_source=self-built`;
              --full without a GPU: the same with the node's own specs (its probe layers NOT_RUN, the plays all run)
  *@baseline  (--baseline DIR) audit and full again with the playbook and collection of another checkout DIR
              (an earlier commit), in the same rounds: what a change bought; repeat --baseline for several
              (items named *@baseline:<DIR's name>), each with a controller cache directory of its own
  *-cold      (--cold) audit and full with the controller cache off (GPUPROBE_CACHE=off): a controller's first run of
              these sources, which builds every node-side payload and compiles the report templates. The other items
              share one cache directory of this benchmark (empty at its start), so their first round is cold too
              and the medians of three or more rounds are of warm runs (plugin_utils/_controller_cache).
--timings: each playbook item's task times (benchmarks/callback/bench_task_times.py), medians per task in OUT.json.
Ratios: audit / ping and full / (bare-probe + ping), goal <= 1.1 each (issue 45: a node at a ping's cost), of the
medians, and per round (each round's audit against that round's ping, its full against its bare probe + ping: the
pairs, interleaved), printed with their spread (min, max) and the load average at each round's start. --warmup rounds
(default 1) run every item first and are not counted: the measured rounds find the controller's payload cache built.
Wall time of each command, and its CPU time (user + sys of the command and everything it waited for, from
os.wait4). --fixture runs audit against a synthetic node tree (tests/unit/fixtures/host, real mknod devices, NVML off,
8 GPUs and their nvidia.com/gpu spec as benchmarks/bench_fleet.py writes it) for machines without a GPU;
without it the real node is read. Every run must succeed (exit 0 and, for the playbooks, a written report with a
verdict for localhost), else the benchmark stops with the output.
Needs the collection importable (source scripts/dev-env.sh) and, with --gpu, podman and the probe image.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")


def timed(argv, env):
    """(wall ms, cpu ms, rc, output) of one command; CPU from wait4 covers the command and its waited children."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = proc.stdout.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = (time.perf_counter() - t0) * 1000.0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return round(wall, 1), round((usage.ru_utime + usage.ru_stime) * 1000.0, 1), proc.returncode, out.decode(errors="replace")


def report_verdict(report_dir):
    latest = os.path.join(report_dir, "gpuprobe-report-latest.json")
    with open(latest) as f:
        return json.load(f)["hosts"]["localhost"]["verdict"]


def bare_probe(tmp):
    """The argv of the probe container alone (self-built spec of this benchmark, GPU 0, compute on)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import adapters as _runtime_adapters
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SELF_BUILT_SPEC_DIR
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe

    host = _host.record(driver_root=DRIVER_ROOT)
    run_id = "bench-%s" % uuid.uuid4().hex[:8]
    spec = _cdi_spec.build_spec(run_id, variant="full", driver_root=DRIVER_ROOT, host=host)
    _cdi_spec.write_spec(spec, SELF_BUILT_SPEC_DIR, run_id)
    device = "%s=0" % spec["kind"]
    cdi = _cdi_layer.record(spec_dirs=[SELF_BUILT_SPEC_DIR], discover_runtime_dirs_=False, devices=[device], host=host)
    engine = _runtime_adapters.detect_runtime("podman")
    _unused, probe_path = _probe.write_probe(directory=tmp)
    config = _runtime_layer._probe_config(cdi["evidence"]["expected_edits"], True)  # pylint: disable=protected-access
    argv = _runtime_adapters.build_argv(engine, "gpuprobe-%s" % run_id, run_id, IMAGE, [device], probe_path, config)

    def cleanup():
        _cdi_spec.remove_spec(SELF_BUILT_SPEC_DIR, run_id)
    return argv, cleanup


GOAL = 1.1  # issue 45: audit <= 1.1x ping, full <= 1.1x (bare probe + ping)


def _pairs(wall, gpu):
    """Per round, the ratios of the items run side by side in it: audit / ping, and full / (bare-probe + ping)."""
    found = {"audit / ping": [a / p for a, p in zip(wall["audit"], wall["ping"])]}
    if gpu:
        found["full / (bare-probe + ping)"] = [f / (b + p) for f, b, p in zip(wall["full"], wall["bare-probe"], wall["ping"])]
    return dict((name, {"per_round": [round(r, 3) for r in rs], "median": round(statistics.median(rs), 3),
                        "min": round(min(rs), 3), "max": round(max(rs), 3)}) for name, rs in found.items())


def _task_medians(times):
    """item -> [(task, median ms)] in the playbook's order (a task run more than once is summed within a run)."""
    out = {}
    for name, runs in times.items():
        if not runs:
            continue
        order, per = [], {}
        for run in runs:
            summed = {}
            for task, ms in run["tasks"]:
                if task not in order:
                    order.append(task)
                summed[task] = summed.get(task, 0.0) + ms
            for task, ms in summed.items():
                per.setdefault(task, []).append(ms)
        out[name] = [[task, statistics.median(per[task])] for task in order]
        out[name].append(["(whole playbook)", statistics.median(r["total_ms"] for r in runs)])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out_file", nargs="?", metavar="OUT.json")
    ap.add_argument("--out", help="the JSON file of the results (or OUT.json first)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="rounds run first and not counted (the payload cache built)")
    ap.add_argument("--gpu", action="store_true", help="also the bare probe and the full run (a GPU host)")
    ap.add_argument("--full", action="store_true", help="the full run also without a GPU (no bare probe: its layers NOT_RUN)")
    ap.add_argument("--fixture", action="store_true", help="audit a synthetic node tree (no GPU needed)")
    ap.add_argument("--baseline", action="append", default=[],
                    help="another checkout of the collection, run side by side (repeatable: item@baseline:<dir name>)")
    ap.add_argument("--cold", action="store_true", help="also audit and full with the controller cache off")
    ap.add_argument("--timings", action="store_true", help="per-task times of the playbook items")
    ap.add_argument("-e", dest="extra", action="append", default=[], help="extra vars for both playbook runs")
    args = ap.parse_args()
    args.out = args.out or args.out_file
    if not args.out or args.rounds < 1:
        ap.error("the output file (--out OUT.json) and at least one round are needed")

    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-node-")
    py = sys.executable
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               GPUPROBE_CACHE=os.path.join(tmp, "controller-cache"))
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    if args.timings:
        env.update(ANSIBLE_CALLBACK_PLUGINS=os.path.join(ROOT, "benchmarks", "callback"), ANSIBLE_CALLBACKS_ENABLED="bench_task_times")
    common = ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % py]
    extra = []
    for item in args.extra:
        extra += ["-e", item]
    if args.fixture:
        sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
        from hostfixture import build_node  # pylint: disable=import-outside-toplevel
        from bench_fleet import _write_cdi_spec  # pylint: disable=import-outside-toplevel
        build_node(os.path.join(tmp, "node"), gpus=8, procfs=True)
        _write_cdi_spec(os.path.join(tmp, "node"), 8)  # the cdi layer does real work: an nvidia.com/gpu spec in the tree
        extra += ["-e", "verify_root=%s" % os.path.join(tmp, "node"), "-e", "verify_nvml=false", "-e", "verify_k8s=false"]
    items = [
        ("ping", ["ansible", "localhost"] + common + ["-m", "ansible.builtin.ping"], None),
        ("audit", ["ansible-playbook"] + common + [PLAYBOOK, "-e", "gpuprobe_mode=audit"] + extra, "audit"),
    ]
    cleanup = None
    if args.gpu:
        argv, cleanup = bare_probe(tmp)
        items.append(("bare-probe", argv, None))
    if args.gpu or args.full:
        # without a GPU the node's own specs (no self-built spec is written where no GPU is)
        full = ["ansible-playbook"] + common + [PLAYBOOK, "-e", "gpuprobe_mode=full", "-e",
                                                "gpuprobe_cdi_source=%s" % ("self-built" if args.gpu else "node")]
        items.append(("full", full + extra, "full"))
    if args.cold:
        cold = dict(env, GPUPROBE_CACHE="off")
        items += [(name + "-cold", argv, report, cold) for name, argv, report in list(items) if report]
    for base in args.baseline:
        base = os.path.abspath(base)
        label = "baseline" if len(args.baseline) == 1 else "baseline:%s" % os.path.basename(base)
        link = os.path.join(tmp, label, "ansible_collections", "gpuprobe")
        os.makedirs(link)
        os.symlink(base, os.path.join(link, "layers"))
        # a cache directory of its own: in a shared one each checkout's payload (another sources key) would replace the
        # other's at every run, and every round of both would be a cold one
        base_env = dict(env, ANSIBLE_COLLECTIONS_PATH=os.path.join(tmp, label),
                        GPUPROBE_CACHE=os.path.join(tmp, "controller-cache-%s" % label.replace(":", "_")))
        for name, argv, report in [item[:3] for item in items if "@" not in item[0] and "-cold" not in item[0]]:
            if report:
                items.append((name + "@" + label, [a.replace(PLAYBOOK, os.path.join(base, "playbooks", "verify-gpu.yml")) for a in argv],
                              report, base_env))
    items = [item if len(item) == 4 else item + (env,) for item in items]
    wall = dict((item[0], []) for item in items)
    cpu = dict((item[0], []) for item in items)
    verdicts = dict((item[0], set()) for item in items)
    times = dict((item[0], []) for item in items if item[2])
    load = []  # the 1-minute load average at each counted round's start
    try:
        for rnd in range(args.warmup + args.rounds):
            counted = rnd >= args.warmup
            if counted:
                load.append(round(os.getloadavg()[0], 2))
            for name, argv, report, item_env in items:
                run_argv = list(argv)
                times_file = os.path.join(tmp, "times-%s-%d.json" % (name, rnd))
                if report:
                    report_dir = os.path.join(tmp, "reports-%s-%d" % (name, rnd))
                    run_argv += ["-e", "gpuprobe_report_dir=%s" % report_dir]
                w, c, rc, out = timed(run_argv, dict(item_env, GPUPROBE_BENCH_TIMES=times_file))
                if rc != 0:
                    sys.exit("%s failed (rc %d):\n%s" % (name, rc, out[-4000:]))
                if not counted:
                    continue
                if report:
                    verdicts[name].add(report_verdict(report_dir))
                    if os.path.exists(times_file):
                        with open(times_file) as f:
                            times[name].append(json.loads(f.read().splitlines()[-1]))
                wall[name].append(w)
                cpu[name].append(c)
    finally:
        if cleanup:
            cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    med = dict((k, statistics.median(v)) for k, v in wall.items())
    med_cpu = dict((k, statistics.median(v)) for k, v in cpu.items())
    ratios = {"audit / ping": round(med["audit"] / med["ping"], 2),
              "audit cpu / ping cpu": round(med_cpu["audit"] / med_cpu["ping"], 2)}
    if args.gpu:
        ratios["full / (bare-probe + ping)"] = round(med["full"] / (med["bare-probe"] + med["ping"]), 2)
    if args.gpu or args.full:
        ratios["full / ping"] = round(med["full"] / med["ping"], 2)
    if args.cold:
        ratios["audit-cold / ping"] = round(med["audit-cold"] / med["ping"], 2)
        if args.gpu:
            ratios["full-cold / (bare-probe + ping)"] = round(med["full-cold"] / (med["bare-probe"] + med["ping"]), 2)
    pairs = _pairs(wall, args.gpu)
    for name in med:
        if "@baseline" in name:
            now = name.split("@", 1)[0]
            ratios["%s / %s" % (now, name)] = round(med[now] / med[name], 2)
            ratios["%s / ping" % name] = round(med[name] / med["ping"], 2)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
                    "ansible": subprocess.run(["ansible", "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]},
        "rounds": args.rounds, "warmup_rounds": args.warmup, "load_avg_1min": load, "pairs": pairs,
        "fixture": args.fixture, "gpu": args.gpu, "full": args.full, "extra_vars": args.extra,
        "baseline": args.baseline,
        "wall_ms": wall, "cpu_ms": cpu, "median_wall_ms": med, "median_cpu_ms": med_cpu, "ratios": ratios,
        "verdicts": dict((k, sorted(v)) for k, v in verdicts.items() if v),
        "task_times_ms": _task_medians(times) if args.timings else None,
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps({"median_wall_ms": med, "median_cpu_ms": med_cpu, "ratios": ratios,
                      "verdicts": result["verdicts"]}, indent=2))
    for name, pair in pairs.items():
        print("%-28s median %.2f  min %.2f  max %.2f  over %d rounds  (goal <= %.1f: %s)" % (
            name, pair["median"], pair["min"], pair["max"], len(pair["per_round"]), GOAL,
            "met" if pair["median"] <= GOAL else "not met"))
    print("load average (1 min) at each round's start: %s (%d CPUs)" % (" ".join("%.2f" % x for x in load), os.cpu_count()))


if __name__ == "__main__":
    main()
