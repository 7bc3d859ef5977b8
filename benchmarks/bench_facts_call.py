"""What a facts module called directly costs, its payload kept or built: one play of one task on localhost, run by
ansible-playbook again and again, next to the same play with ansible.builtin.ping.

    python benchmarks/bench_facts_call.py OUT.json [MODULE ...] [--rounds 7] [--baseline DIR ...]

The facts modules have an action plugin (plugin_utils/_kept_module) that keeps their AnsiballZ payload on the
controller between runs (plugin_utils/_controller_cache: lean sources and their bytecode), as verify_node does for the
modules it calls. Items, interleaved round by round, each a whole ``ansible-playbook`` (controller and node: local
connection, the node's Python is the controller's):
  ping    the play with ansible.builtin.ping (the floor)
  kept    the facts module, its payload kept by an earlier run (a controller cache of this benchmark's own)
  built   the same with GPUPROBE_CACHE=off: Ansible builds the payload in the run and the node compiles its sources
          (the action plugin still runs, with nothing to keep)
  @<baseline> the facts module from another checkout (--baseline; e.g. one from before the facts modules had an
          action plugin: no action plugin at all)
Modules run against the synthetic node tree of the tests (tests/unit/fixtures/host): host_facts (NVML off) and
k8s_facts (no kubeconfig: NOT_RUN) by default. Wall and CPU (the command and its children) per item; ratios within one
run only.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_inspect import checkout_env, link_checkouts  # noqa: E402  pylint: disable=wrong-import-position
from bench_node import timed  # noqa: E402  pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = {"gpuprobe.layers.host_facts": {"root": "{{ node_root }}", "nvml": False},
        "gpuprobe.layers.k8s_facts": {"kubeconfig": "{{ node_root }}/no-kubeconfig"}}


def _play(path, module, args):
    with open(path, "w") as f:
        json.dump([{"hosts": "all", "gather_facts": False, "tasks": [{"name": "call", module: args}]}], f)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("modules", nargs="*", default=sorted(ARGS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
    from hostfixture import build_node  # pylint: disable=import-outside-toplevel
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-facts-")
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "rounds": args.rounds, "modules": {}}
    try:
        node = os.path.join(tmp, "node")
        build_node(node, gpus=2)
        base = ["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                "-e", "node_root=%s" % node]
        checkouts, paths = link_checkouts(tmp, args.baseline)
        envs = {}
        for label, _checkout in checkouts:
            envs[label] = checkout_env(paths[label], GPUPROBE_CACHE=os.path.join(tmp, "cache-" + label.replace(":", "_")),
                                       ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "lt"))
        env = envs["now"]
        plays = {"ping": _play(os.path.join(tmp, "ping.json"), "ansible.builtin.ping", {})}
        for module in args.modules:
            plays[module] = _play(os.path.join(tmp, module + ".json"), module, ARGS.get(module, {}))
        items = [("ping", plays["ping"], env)]
        for module in args.modules:
            items += [(module + " kept", plays[module], env), (module + " built", plays[module], dict(env, GPUPROBE_CACHE="off"))]
            items += [("%s @%s" % (module, label), plays[module], envs[label]) for label, _c in checkouts if label != "now"]
        for name, play, item_env in items:  # the first run of each builds and keeps its payload
            _w, _c, rc, out = timed(base + [play], item_env)
            if rc != 0:
                sys.exit("%s failed (rc %s):\n%s" % (name, rc, out[-4000:]))
        wall = dict((name, []) for name, _p, _e in items)
        cpu = dict((name, []) for name, _p, _e in items)
        for _rnd in range(args.rounds):
            for name, play, item_env in items:
                w, c, rc, out = timed(base + [play], item_env)
                if rc != 0:
                    sys.exit("%s failed (rc %s):\n%s" % (name, rc, out[-4000:]))
                wall[name].append(w)
                cpu[name].append(c)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    med = dict((k, statistics.median(v)) for k, v in wall.items())
    medc = dict((k, statistics.median(v)) for k, v in cpu.items())
    for module in args.modules:
        names = dict((k[len(module) + 1:], k) for k in med if k.startswith(module + " "))
        entry = result["modules"][module] = {
            "median_wall_ms": dict([(n, med[k]) for n, k in names.items()] + [("ping", med["ping"])]),
            "median_cpu_ms": dict([(n, medc[k]) for n, k in names.items()] + [("ping", medc["ping"])]),
            "ratios": {}}
        for name, key in names.items():
            entry["ratios"]["%s / ping cpu" % name] = round(medc[key] / medc["ping"], 2)
            if name != "kept":
                entry["ratios"]["kept / %s cpu" % name] = round(medc[names["kept"]] / medc[key], 2)
                entry["ratios"]["kept / %s wall" % name] = round(med[names["kept"]] / med[key], 2)
    result["baseline"] = args.baseline
    result["wall_ms"], result["cpu_ms"] = wall, cpu
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result["modules"], indent=2))


if __name__ == "__main__":
    main()
