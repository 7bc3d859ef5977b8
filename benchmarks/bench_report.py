"""Fleet report size and build time against the number of hosts, measured side by side in one run (no GPU needed).

    python benchmarks/bench_report.py [OUT.json] [--sizes 250,500,1000,2000] [--rounds 3] [--unreachable]

For each N: the synthetic fleet of tests/unit/fixtures/host/fleetfixture.py (records built with the result contract:
78% verified, failures at cdi, compute and host health, unreachable and run-failed nodes, 4-8 GPUs each with their
11 health readings), or with --unreachable a fleet of N nodes that all failed the same way (unreachable, DNS).
Measured per N (median of --rounds, rounds interleaved over the sizes): build_report (ms), each rendering (ms) and
its size (bytes), per host; then the ratio of each figure at N to the same figure at the smallest N, divided by the
ratio of the host counts: 1.0 is linear. Needs the collection importable (source scripts/dev-env.sh).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "unit", "fixtures", "host"))
from fleetfixture import synthetic_fleet  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model as _report  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.render import RENDERERS  # noqa: E402  pylint: disable=wrong-import-position


def unreachable_fleet(n):
    return [{"name": "gpu-%05d.dc1.example.com" % i, "records": None, "error": None, "pins": {"driver_version": "580.159.04"},
             "unreachable": 'Data could not be sent to remote host "gpu-%05d.dc1.example.com". Make sure this host can be '
                            "reached over ssh: ssh: Could not resolve hostname gpu-%05d.dc1.example.com: Name or service "
                            "not known" % (i, i)} for i in range(n)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out", nargs="?")
    parser.add_argument("--sizes", default="250,500,1000,2000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--unreachable", action="store_true", help="every node unreachable the same way")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    make = unreachable_fleet if args.unreachable else synthetic_fleet
    inputs = dict((n, make(n)) for n in sizes)
    times = dict((n, dict((k, []) for k in ["build"] + list(RENDERERS))) for n in sizes)
    bytes_ = dict((n, {}) for n in sizes)
    for _round in range(args.rounds):
        for n in sizes:
            t0 = time.perf_counter()
            report = _report.build_report(inputs[n], "2026-12-03T00:00:00Z", run={"mode": "full", "cdi_source": "node"})
            times[n]["build"].append(time.perf_counter() - t0)
            for fmt, (_suffix, render) in RENDERERS.items():
                t0 = time.perf_counter()
                text = "".join(render(report))
                times[n][fmt].append(time.perf_counter() - t0)
                bytes_[n][fmt] = len(text.encode("utf-8"))
    base = sizes[0]
    out = {"fleet": "unreachable" if args.unreachable else "synthetic mix (fleetfixture)", "rounds": args.rounds, "sizes": {}}
    for n in sizes:
        ms = dict((k, round(statistics.median(v) * 1000.0, 1)) for k, v in times[n].items())
        scale = float(n) / base
        out["sizes"][n] = {
            "median_ms": ms,
            "bytes": bytes_[n],
            "bytes_per_host": dict((k, round(v / float(n))) for k, v in bytes_[n].items()),
            "ms_per_host": dict((k, round(v / n, 3)) for k, v in ms.items()),
            # 1.0 = linear in the number of hosts, against the smallest size of this run
            "linearity_time": dict((k, round(ms[k] / (out["sizes"][base]["median_ms"][k] * scale), 2) if n != base else 1.0)
                                   for k in ms),
            "linearity_bytes": dict((k, round(bytes_[n][k] / (bytes_[base][k] * scale), 2)) for k in bytes_[n]),
        }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
