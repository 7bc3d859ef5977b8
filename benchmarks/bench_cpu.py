"""Controller/CPU-side costs, measured side by side in one run (no GPU needed).

    python benchmarks/bench_cpu.py [OUT.json]

1. CDI layer over a spec corpus (N files, NVIDIA-like, one device per GPU) against the bare cost of
   reading the same files with yaml.safe_load: the ratio is what strict validation, resolution and the
   host-side checks add on top of parsing.
2. The fleet report for H synthetic hosts (each with the five layer records, ~40 checks): Markdown,
   HTML and JUnit rendering against json.dumps of the same report (the floor for writing it at all).
Rounds are interleaved; medians are quoted with their ratios. Needs the collection importable
(source scripts/dev-env.sh).
"""
import json
import os
import statistics
import sys
import tempfile
import time

import yaml

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as _fleet
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as _report_render
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import loader as _cdi_loader
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, LayerBuilder, not_run

SPECS = 50
GPUS = 8
HOSTS = 500
ROUNDS = 7


def write_corpus(d):
    for i in range(SPECS):
        devices = [{"name": str(g), "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia%d" % g}]}}
                   for g in range(GPUS)]
        spec = {"cdiVersion": "0.5.0", "kind": "bench%d.example.com/gpu" % i, "devices": devices,
                "containerEdits": {
                    "env": ["NVIDIA_VISIBLE_DEVICES=void"],
                    "deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}],
                    "mounts": [{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04",
                                "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "options": ["ro", "nosuid", "nodev", "bind"]}],
                    "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-ctk", "args": ["nvidia-ctk", "hook", "update-ldcache"]}]}}
        with open(os.path.join(d, "bench%d.yaml" % i), "w") as f:
            yaml.safe_dump(spec, f)


def synthetic_hosts():
    hosts = []
    for h in range(HOSTS):
        records = {}
        for layer in ("host", "cdi", "runtime", "compute"):
            b = LayerBuilder(layer)
            for c in range(10):
                status = FAIL if (layer == "runtime" and h % 7 == 0 and c == 3) else PASS
                b.add("%s.bench.check%d" % (layer, c), status, subject="/dev/nvidia%d" % c, expected="char 195:%d" % c,
                      observed="char 195:%d" % c if status == PASS else "absent")
            records[layer] = b.build()
        records["k8s"] = not_run("k8s", "kubectl not found")
        hosts.append({"name": "node%04d" % h, "records": records, "unreachable": None, "error": None, "pins": {}})
    return hosts


def median_ms(samples):
    return round(statistics.median(samples) * 1000.0, 2)


def main():
    out = {}
    with tempfile.TemporaryDirectory() as d:
        write_corpus(d)
        names = sorted(os.listdir(d))
        # the same layer with the pure-Python parser, to show what libyaml buys (same run, same files)
        pure = yaml.SafeLoader  # the cdi loader reads PyYAML's events (plugins/module_utils/_cdi/loader.py)
        libyaml_loader = _cdi_loader.EVENT_LOADER
        t = {"yaml.safe_load": [], "yaml CSafeLoader": [], "cdi_layer": [], "cdi_layer (pure-Python parser)": []}
        for _round in range(ROUNDS):
            for label, loader in (("yaml.safe_load", yaml.SafeLoader), ("yaml CSafeLoader", getattr(yaml, "CSafeLoader", None))):
                if loader is None:
                    continue
                t0 = time.perf_counter()
                for n in names:
                    with open(os.path.join(d, n)) as f:
                        yaml.load(f, Loader=loader)  # nosec B506 - safe loaders only
                t[label].append(time.perf_counter() - t0)
            for label, loader in (("cdi_layer", libyaml_loader), ("cdi_layer (pure-Python parser)", pure)):
                _cdi_loader.EVENT_LOADER = loader
                try:
                    t0 = time.perf_counter()
                    record = _cdi_layer.record(spec_dirs=[d], discover_runtime_dirs_=False, devices=["bench0.example.com/gpu=0"])
                    t[label].append(time.perf_counter() - t0)
                finally:
                    _cdi_loader.EVENT_LOADER = libyaml_loader
        t = dict((k, v) for k, v in t.items() if v)
        base = statistics.median(t["yaml.safe_load"])
        out["cdi"] = {"spec_files": SPECS, "devices_per_file": GPUS, "checks_in_record": len(record["checks"]),
                      "median_ms": dict((k, median_ms(v)) for k, v in t.items()),
                      "ratio_to_yaml_safe_load": dict((k, round(statistics.median(v) / base, 2)) for k, v in t.items())}
    hosts = synthetic_hosts()
    report = _fleet.build_report(hosts, "2026-12-02T00:00:00Z")
    renderers = {"json.dumps": json.dumps, "markdown": _report_render.render_markdown,
                 "html": _report_render.render_html, "junit": _report_render.render_junit}
    t = dict((k, []) for k in renderers)
    sizes = {}
    for _round in range(ROUNDS):
        for name, fn in renderers.items():
            t0 = time.perf_counter()
            text = fn(report)
            t[name].append(time.perf_counter() - t0)
            sizes[name] = len(text)
    base = statistics.median(t["json.dumps"])
    out["report"] = {"hosts": HOSTS, "bytes": sizes, "median_ms": dict((k, median_ms(v)) for k, v in t.items()),
                     "ratio_to_json_dumps": dict((k, round(statistics.median(v) / base, 2)) for k, v in t.items())}
    text = json.dumps(out, indent=2)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
