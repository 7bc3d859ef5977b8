"""What each node-side module ships and what building its AnsiballZ payload costs on the controller, for this checkout
and other checkouts, side by side in one run.

    python benchmarks/bench_payload.py OUT.json [--rounds 5] [--baseline DIR ...] [MODULE ...]

Ansible builds a module's payload once per run (its cache lives in the run's own local temp dir): it parses every
module_utils file the module imports, anywhere in the file (imports inside functions too), to find the next ones, and
zips them; the node then compiles, on every call, the sources it imports (a zip import writes no bytecode cache). Both
grow with the bytes shipped. Per module and checkout, in a fresh interpreter per measurement (nothing cached): the
build's wall (``modify_module``, Ansible's own entry point), the number of files and source bytes shipped (ours and
Ansible's), and the payload's size. ``ansible.builtin.ping`` is the floor. And what the node receives of the
collection's own sources (``shipped_*``: bytes, and lines that are not blank): for a module whose payload the
checkout's controller cache keeps (those verify_node calls, and those whose action plugin is plugin_utils/_kept_module:
``kept``), the payload as the cache ships it (``_controller_cache.with_bytecode`` without the bytecode: lean sources,
where the checkout has them); for the others, Ansible's payload as built. Default modules: the node-side modules
verify_node calls (node_layers, node_verify, probe_cleanup, cdi_spec) and node_probe.
Needs the collection importable (source scripts/dev-env.sh); ratios within one run only.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench_inspect import checkout_env, link_checkouts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODULES = ["ansible.builtin.ping", "gpuprobe.layers.node_layers", "gpuprobe.layers.node_verify", "gpuprobe.layers.node_probe",
           "gpuprobe.layers.probe_cleanup", "gpuprobe.layers.cdi_spec"]

CHILD = r'''
import base64, io, json, re, sys, time, zipfile
from ansible.executor import module_common
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader, module_loader
from ansible.template import Templar
init_plugin_loader()
name = sys.argv[1]
ctx = module_loader.find_plugin_with_context(name)
if not ctx.resolved:
    print(json.dumps({"absent": True}))  # a module this checkout does not have (an older baseline)
    sys.exit(0)
t0 = time.perf_counter()
built = module_common.modify_module(module_name=name, module_path=ctx.plugin_resolved_path, module_args={},
                                    templar=Templar(loader=DataLoader()),
                                    task_vars={"ansible_python_interpreter": sys.executable},
                                    module_compression="ZIP_DEFLATED")
ms = (time.perf_counter() - t0) * 1000.0
data = built.b_module_data
blob = max(re.findall(rb"[A-Za-z0-9+/=]{1000,}", data), key=len)
files = [(i.filename, i.file_size) for i in zipfile.ZipFile(io.BytesIO(base64.b64decode(blob))).infolist()
         if i.filename.endswith(".py")]
ours = [f for f in files if "/gpuprobe/" in f[0]]
got = {"build_ms": round(ms, 1), "payload_bytes": len(data), "files": len(files), "ours_files": len(ours),
       "ours_source_bytes": sum(s for _n, s in ours), "ansible_source_bytes": sum(s for _n, s in files) - sum(s for _n, s in ours),
       "ours": sorted(n.split("/plugins/", 1)[-1] for n, _s in ours)}
zipped = base64.b64decode(blob)
if sys.argv[2] == "kept":  # what the controller cache ships: this checkout's own transform of the payload, no bytecode
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _controller_cache as cc
    zipped = cc.with_bytecode(zipped, False) if hasattr(cc, "lean_source") else zipped
shipped = zipfile.ZipFile(io.BytesIO(zipped))
texts = [shipped.read(n) for n in shipped.namelist() if n.endswith(".py") and "/gpuprobe/" in n]
got.update(shipped_source_bytes=sum(len(t) for t in texts),
           shipped_code_lines=sum(1 for t in texts for line in t.splitlines() if line.strip()))
print(json.dumps(got))
'''


def kept_modules(checkout):
    """The modules whose payload the checkout's controller cache keeps and ships (plugin_utils/_controller_cache):
    those verify_node calls (its ``*_MODULE`` names) and those whose action plugin is the kept-payload action."""
    kept = set()
    action = os.path.join(checkout, "plugins", "action")
    with open(os.path.join(action, "verify_node.py")) as f:
        kept.update(re.findall(r'^[A-Z]+_MODULE = "(gpuprobe\.layers\.[a-z_]+)"', f.read(), re.M))
    for name in os.listdir(action):
        with open(os.path.join(action, name)) as f:
            if "plugin_utils._kept_module import" in f.read():
                kept.add("gpuprobe.layers." + name[:-3])
    return kept


def measure(module, env, kept=False):
    out = subprocess.run([sys.executable, "-c", CHILD, module, "kept" if kept else "built"], env=env, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        sys.exit("%s: %s" % (module, out.stderr[-3000:]))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out")
    ap.add_argument("modules", nargs="*", default=MODULES)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-payload-")
    checkouts, paths = link_checkouts(tmp, args.baseline)
    envs = {}
    for label, top in paths.items():
        envs[label] = checkout_env(top, ANSIBLE_LOCAL_TEMP=os.path.join(tmp, "lt"))
    rows = dict(((label, m), []) for label, _p in checkouts for m in args.modules)
    kept = dict((label, kept_modules(checkout)) for label, checkout in checkouts)
    try:
        for _rnd in range(args.rounds):
            for module in args.modules:
                for label, _p in checkouts:
                    if module.startswith("ansible.") and label != "now":
                        continue
                    got = measure(module, envs[label], module in kept[label])
                    if not got.get("absent"):
                        rows[(label, module)].append(got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
              "rounds": args.rounds, "baseline": args.baseline, "modules": {}}
    for (label, module), runs in rows.items():
        if not runs:
            continue
        last = runs[-1]
        result["modules"].setdefault(module, {})[label] = dict(
            (k, last[k]) for k in ("payload_bytes", "files", "ours_files", "ours_source_bytes", "ansible_source_bytes", "ours",
                                   "shipped_source_bytes", "shipped_code_lines"))
        result["modules"][module][label]["kept"] = module in kept[label]
        result["modules"][module][label].update(build_ms=[r["build_ms"] for r in runs],
                                                median_build_ms=statistics.median(r["build_ms"] for r in runs))
    ping = result["modules"].get("ansible.builtin.ping", {}).get("now", {}).get("median_build_ms")
    summary = {}
    for module, by in result["modules"].items():
        for label, r in by.items():
            summary["%s@%s" % (module, label)] = {"median_build_ms": r["median_build_ms"], "ours_files": r["ours_files"],
                                                  "ours_source_kb": round(r["ours_source_bytes"] / 1024.0),
                                                  "shipped_source_kb": round(r["shipped_source_bytes"] / 1024.0),
                                                  "shipped_code_lines": r["shipped_code_lines"], "kept": r["kept"],
                                                  "x ping": round(r["median_build_ms"] / ping, 2) if ping else None}
    result["summary"] = summary
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
