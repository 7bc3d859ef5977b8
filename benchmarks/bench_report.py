"""The fleet report at scale: what the real fleet_report action writes for 500, 2,000 and 10,000 hosts, how long it
takes and how much memory, and how soon the HTML is ready in headless Chromium; this checkout and others side by side.

    python benchmarks/bench_report.py OUT.json [--sizes 500,2000,10000] [--rounds 1] [--baseline DIR ...]
        [--chromium PATH] [--browser-timeout 300] [--no-browser] [--keep DIR]
    python benchmarks/bench_report.py OUT.json --renderers [--sizes 250,500,1000,2000] [--rounds 3] [--unreachable]

The fleet (default): tests/unit/fixtures/report/replayfleet.py, the real H200 records of docs/evidence replayed under
N host names with every verdict (81% verified, failures at host, cdi, runtime and compute, unreachable, run failed,
inconclusive), racks and zones as inventory groups and host variables, spooled as verify_node leaves them (one
records file per host). For each N and checkout, rounds interleaved, a fresh Python process imports that checkout's
collection and runs its fleet_report action (the real ActionBase, every format, ``group_by: [rack, zone]`` where the
checkout knows the option): its wall time (the action's run()), its peak RSS (ru_maxrss, the controller's peak
memory for the report) and the size of every file. Then Chromium (Debian's package, through the DevTools protocol:
benchmarks/chromium_cdp.py) opens each HTML file once the browser is warm: ``ready_ms`` is the first frame after the
load event by the page's own clock (since navigation start; the page's script has drawn what it draws first), with
the number of DOM nodes, and ``filter_ms`` the time from choosing a state in the hosts filter to the next frame, and
``search_ms`` from typing in the host search. A page not ready after --browser-timeout seconds is recorded as such.

--renderers: the former benchmark (in-process build_report and each renderer, the synthetic fleet of
tests/unit/fixtures/host/fleetfixture.py, or with --unreachable N nodes that all failed the same way).
Needs ansible-core and the collection importable (source scripts/dev-env.sh or .build/env.sh).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "report"))

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
args = {"hosts": sorted(hostvars), "report_dir": sys.argv[4], "run": {"mode": "full", "cdi_source": "node"}}
if "group_by" in A.ARGSPEC:
    args["group_by"] = ["rack", "zone"]
action = make_action(A, "gpuprobe.layers.fleet_report", args)
t0 = time.perf_counter()
result = action.run(task_vars={"hostvars": hostvars})
wall = time.perf_counter() - t0
assert len(result["verdicts"]) == len(hostvars) and result["files"]
sizes = dict((fmt, os.path.getsize(path)) for fmt, path in result["files"].items())
print(json.dumps({"wall_s": round(wall, 2), "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
                  "bytes": sizes, "files": result["files"]}))
"""

# the hosts filter and the search box, by the ids every version of the page has (f-state, f-name)
FILTER_JS = """new Promise(function (done) {
  var s = document.getElementById("f-state"), t0 = performance.now(), pick = "";
  for (var i = 0; i < s.options.length; i++) { if (s.options[i].value && s.options[i].value !== "COMPUTE_VERIFIED") { pick = s.options[i].value; break; } }
  s.value = pick; s.dispatchEvent(new Event("change"));
  requestAnimationFrame(function () { setTimeout(function () { done(performance.now() - t0); }, 0); });
})"""
SEARCH_JS = """new Promise(function (done) {
  var s = document.getElementById("f-state"), n = document.getElementById("f-name"), t0 = performance.now();
  s.value = ""; s.dispatchEvent(new Event("change"));
  n.value = "r03-1"; n.dispatchEvent(new Event("input"));
  requestAnimationFrame(function () { setTimeout(function () { done(performance.now() - t0); }, 0); });
})"""


def spool_inputs(n, where):
    import pickle  # pylint: disable=import-outside-toplevel
    from replayfleet import spooled_hostvars  # pylint: disable=import-outside-toplevel
    hostvars = spooled_hostvars(n, where)
    path = os.path.join(where, "hostvars-%d.pickle" % n)
    with open(path, "wb") as f:
        pickle.dump(hostvars, f)
    return path


def run_action(path, inputs, tmp, report_dir):
    env = dict(os.environ, PYTHONPATH=path, ANSIBLE_COLLECTIONS_PATH=path)
    out = subprocess.run([sys.executable, "-c", CHILD, os.path.join(ROOT, "tests", "unit", "fixtures", "host"), inputs, tmp,
                          report_dir], env=env, check=True, stdout=subprocess.PIPE).stdout.decode()
    return json.loads(out.strip().splitlines()[-1])


def warm(browser):
    """Open a blank page once, so that the browser's own start is not counted as the report's."""
    page = browser.open("about:blank", timeout=60)
    page.ready(timeout=60)
    page.close()


def browse(browser, html, timeout):
    """ready_ms, dom_nodes, filter_ms, search_ms of one page (or why not)."""
    t0 = time.monotonic()
    try:
        page = browser.open("file://" + html, timeout=timeout)
        got = page.ready(timeout=timeout)
        got["wall_ready_s"] = round(time.monotonic() - t0, 2)
        got["filter_ms"] = round(page.evaluate(FILTER_JS, timeout=timeout), 1)
        got["search_ms"] = round(page.evaluate(SEARCH_JS, timeout=timeout), 1)
        page.close()
        return dict((k, round(v, 1) if isinstance(v, float) else v) for k, v in got.items())
    except TimeoutError:
        return {"not_ready_after_s": timeout}


def action_main(args):
    from bench_inspect import link_checkouts  # pylint: disable=import-outside-toplevel
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-report-")
    runs = {}
    try:
        checkouts, paths = link_checkouts(tmp, args.baseline)
        t0 = time.monotonic()
        inputs = dict((n, spool_inputs(n, tmp)) for n in sizes)
        print("inputs spooled in %.0f s" % (time.monotonic() - t0), flush=True)
        for rnd in range(args.rounds):
            for n in sizes:
                if rnd >= (args.large_rounds if n >= 5000 else args.rounds):
                    continue
                for label, _checkout in checkouts:
                    report_dir = os.path.join(args.keep or tmp, "%s-%d-%d" % (label.replace(":", "_"), n, rnd))
                    got = run_action(paths[label], inputs[n], tmp, report_dir)
                    if not args.no_browser and rnd == 0:
                        from chromium_cdp import Browser  # pylint: disable=import-outside-toplevel
                        with Browser(args.chromium) as browser:
                            warm(browser)
                            got["browser"] = browse(browser, got["files"]["html"], args.browser_timeout)
                    if not args.keep:
                        shutil.rmtree(report_dir, ignore_errors=True)
                    got.pop("files")
                    runs.setdefault(label, {}).setdefault(str(n), []).append(got)
                    print(label, n, json.dumps(got), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    medians = {}
    for label, by in runs.items():
        for n, rs in by.items():
            row = dict((k, statistics.median(r[k] for r in rs)) for k in ("wall_s", "peak_rss_mb"))
            row["bytes"] = rs[0]["bytes"]
            row["bytes_per_host"] = dict((fmt, round(b / float(n))) for fmt, b in rs[0]["bytes"].items())
            row["browser"] = rs[0].get("browser")
            medians.setdefault(label, {})[n] = row
    result = {"fleet": "replayfleet (docs/evidence records replayed)", "sizes": sizes, "rounds": args.rounds,
              "large_rounds": args.large_rounds, "baseline": args.baseline, "runs": runs, "medians": medians}
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(medians, indent=2))


# ---------------------------------------------------------------------------------------------------
# --renderers: the in-process benchmark of build_report and each renderer

def unreachable_fleet(n):
    return [{"name": "gpu-%05d.dc1.example.com" % i, "records": None, "error": None, "pins": {"driver_version": "580.159.04"},
             "unreachable": 'Data could not be sent to remote host "gpu-%05d.dc1.example.com". Make sure this host can be '
                            "reached over ssh: ssh: Could not resolve hostname gpu-%05d.dc1.example.com: Name or service "
                            "not known" % (i, i)} for i in range(n)]


def renderers_main(args):
    from fleetfixture import synthetic_fleet  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.fleet import build_report  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.render import RENDERERS  # pylint: disable=import-outside-toplevel
    sizes = [int(x) for x in args.sizes.split(",")]
    make = unreachable_fleet if args.unreachable else synthetic_fleet
    inputs = dict((n, make(n)) for n in sizes)
    times = dict((n, dict((k, []) for k in ["build"] + list(RENDERERS))) for n in sizes)
    bytes_ = dict((n, {}) for n in sizes)
    for _round in range(args.rounds):
        for n in sizes:
            t0 = time.perf_counter()
            report = build_report(inputs[n], "2026-12-03T00:00:00Z", run={"mode": "full", "cdi_source": "node"})
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("out")
    parser.add_argument("--sizes")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--large-rounds", type=int, default=1, help="rounds at 5,000 hosts and more (default 1)")
    parser.add_argument("--baseline", action="append", default=[], help="another checkout of the collection (repeatable)")
    parser.add_argument("--chromium", help="the Chromium binary (default: chromium on PATH)")
    parser.add_argument("--browser-timeout", type=int, default=300)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--keep", help="keep every report set under this directory")
    parser.add_argument("--renderers", action="store_true", help="the in-process benchmark of build_report and the renderers")
    parser.add_argument("--unreachable", action="store_true", help="--renderers: every node unreachable the same way")
    args = parser.parse_args()
    if args.renderers:
        args.sizes = args.sizes or "250,500,1000,2000"
        args.rounds = args.rounds or 3
        renderers_main(args)
    else:
        args.sizes = args.sizes or "500,2000,10000"
        args.rounds = args.rounds or 1
        action_main(args)


if __name__ == "__main__":
    main()
