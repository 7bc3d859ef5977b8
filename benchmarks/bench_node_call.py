"""What one node-side call costs on its own, and where its time goes: the AnsiballZ file of verify_node's module
(node_verify in full mode, node_layers in audit) run again and again by the node's Python, next to ping's.

    python benchmarks/bench_node_call.py OUT_DIR [--mode full|audit] [--rounds 5] [--fixture] [--keep] [-e EXTRA ...]

It runs verify-gpu.yml twice on localhost (local connection) with Ansible's ANSIBLE_KEEP_REMOTE_FILES and a controller
cache of its own: the first run builds the payload and keeps it, the second loads the kept one (with bytecode,
plugin_utils/_controller_cache), and its AnsiballZ file is what the node ran. `ansible localhost -m ping` is kept the
same way. Items, interleaved round by round, each `python <AnsiballZ file>` as Ansible starts it:
  ping            ping's AnsiballZ: the interpreter, AnsiballZ and ansible-core's module_utils (the floor)
  call            the module's AnsiballZ as the second run shipped it (bytecode beside the sources)
  call-sources    the same file with the bytecode taken out of its zip: what the node did before the cache kept
                  bytecode, or does when its Python is not the controller's
  call-other-py   the same file with the bytecode's magic number changed: a node whose Python is another version
                  (the bytecode is shipped and refused, the sources compiled)
  call-full-sources the same file with the collection's sources as the repository has them, bytecode as it is:
                  what the node received before the kept payload's sources went lean (comments and docstrings)
  built           the same file with the repository's sources and no bytecode: the payload as Ansible builds it (what
                  a node gets where no payload is kept: the cache off, the first call of a run that builds it)
  call-no-control (full) the same call with host_control false: what the host control beside the container costs
Per call, the layers' own timers from its result (duration_ms of each record, the container's and the host control's
wall) go to the JSON (median_layer_ms).
Each call runs the layers for real (full: the probe container and the host control, on a GPU host). Then one more
call under `-X importtime` (OUT_DIR/importtime.txt, and the sum of its own import times in the JSON) and one under
cProfile (OUT_DIR/profile.txt, by cumulative time). Every call must return JSON without "failed", else it stops.
--fixture: audit of the synthetic node tree of bench_node.py (no GPU). Ratios within one run only.
"""
import argparse
import base64
import datetime
import glob
import io
import json
import os
import platform
import pstats
import re
import shutil
import statistics
import sys
import tempfile
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_node import timed  # noqa: E402  pylint: disable=wrong-import-position

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
MODULES = {"full": "node_verify", "audit": "node_layers"}
ZIP_RE = re.compile(r"zip_data='([A-Za-z0-9+/=]*)'")


def _kept(remote_tmp, module):
    found = glob.glob(os.path.join(remote_tmp, "ansible-tmp-*", "AnsiballZ_%s.py" % module))
    if len(found) != 1:
        sys.exit("expected one kept AnsiballZ_%s.py under %s, found %d" % (module, remote_tmp, len(found)))
    return found[0]


def _rewrite(wrapper, out, change):
    """``wrapper`` with its payload zip rebuilt by ``change(name, body)`` (None drops the entry), written to ``out``."""
    with open(wrapper) as f:
        text = f.read()
    match = ZIP_RE.search(text)
    src = zipfile.ZipFile(io.BytesIO(base64.b64decode(match.group(1))))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info in src.infolist():
            body = change(info.filename, src.read(info))
            if body is not None:
                z.writestr(info, body)
    with open(out, "w") as f:
        f.write(text[:match.start(1)] + base64.b64encode(buf.getvalue()).decode("ascii") + text[match.end(1):])
    return out


def _repository_source(name, body):
    """A payload entry with the collection's source as the repository has it (the payload ships it lean,
    _controller_cache.lean_source); its bytecode and every other entry as they are."""
    prefix = "ansible_collections/gpuprobe/layers/"
    path = os.path.join(ROOT, name[len(prefix):]) if name.startswith(prefix) and name.endswith(".py") else None
    if path and os.path.isfile(path):
        with open(path, "rb") as f:
            return f.read()
    return body


def _payload_counts(wrapper):
    with open(wrapper) as f:
        names = zipfile.ZipFile(io.BytesIO(base64.b64decode(ZIP_RE.search(f.read()).group(1)))).namelist()
    return {"sources": sum(n.endswith(".py") for n in names), "bytecode": sum(n.endswith(".pyc") for n in names),
            "wrapper_bytes": os.path.getsize(wrapper)}


def _call(py, path, env, extra=()):
    wall, cpu, rc, out = timed([py] + list(extra) + [path], env)
    result = None
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
    if rc != 0 or result is None or result.get("failed"):
        sys.exit("%s failed (rc %s):\n%s" % (path, rc, out[-4000:]))
    return wall, cpu, out, result


def _timings(result):
    """The layers' own timers in one call's result (ms): each record's duration_ms, the probe container's and the
    host control's wall (full mode), and the verdict-relevant statuses."""
    out = {}
    records = dict(result.get("records") or {})
    for probe in result.get("probes") or []:
        records.update(probe.get("records") or {})
    for layer, record in records.items():
        if isinstance(record, dict) and record.get("duration_ms") is not None:
            out[layer] = record["duration_ms"]
            out[layer + " status"] = record.get("status")
    runtime = (records.get("runtime") or {}).get("evidence") or {}
    compute = (records.get("compute") or {}).get("evidence") or {}
    if (runtime.get("container") or {}).get("wall_ms") is not None:
        out["container"] = runtime["container"]["wall_ms"]
    if isinstance(compute.get("host_control"), dict) and compute["host_control"].get("wall_ms") is not None:
        out["host control"] = compute["host_control"]["wall_ms"]
        out["host control concurrent"] = compute["host_control"].get("concurrent")
    return out


def _medians(runs):
    """Per key: the median of the numbers, or the set of other values (statuses) seen."""
    out = {}
    for key in sorted(set(k for run in runs for k in run)):
        values = [run[key] for run in runs if key in run]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        out[key] = statistics.median(numbers) if numbers and len(numbers) == len(values) else sorted(set(map(str, values)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("out_dir")
    ap.add_argument("--mode", choices=sorted(MODULES), default="full")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fixture", action="store_true", help="audit of a synthetic node tree (no GPU)")
    ap.add_argument("-e", dest="extra", action="append", default=[], help="extra vars for the playbook runs")
    ap.add_argument("--keep", action="store_true", help="copy the AnsiballZ files (ping.py, call.py ...) to OUT_DIR and keep the temporary tree they use")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="gpuprobe-bench-node-call-")
    py = sys.executable
    env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="False", ANSIBLE_RETRY_FILES_ENABLED="False",
               GPUPROBE_CACHE=os.path.join(tmp, "cache"), ANSIBLE_KEEP_REMOTE_FILES="1")
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    common = ["-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % py]
    extra = []
    for item in args.extra:
        extra += ["-e", item]
    if args.fixture:
        if args.mode != "audit":
            sys.exit("--fixture is an audit (the synthetic tree has no GPU to probe)")
        sys.path.insert(0, os.path.join(ROOT, "tests", "unit", "fixtures", "host"))
        from hostfixture import build_node  # pylint: disable=import-outside-toplevel
        from bench_fleet import _write_cdi_spec  # pylint: disable=import-outside-toplevel
        build_node(os.path.join(tmp, "node"), gpus=8, procfs=True)
        _write_cdi_spec(os.path.join(tmp, "node"), 8)
        extra += ["-e", "verify_root=%s" % os.path.join(tmp, "node"), "-e", "verify_nvml=false", "-e", "verify_k8s=false"]
    module = MODULES[args.mode]
    files = {}
    try:
        for n in (1, 2):  # the first run builds and keeps the payload, the second loads it
            remote = os.path.join(tmp, "remote-%d" % n)
            argv = (["ansible-playbook"] + common + [PLAYBOOK, "-e", "gpuprobe_mode=%s" % args.mode,
                                                     "-e", "gpuprobe_report_dir=%s" % os.path.join(tmp, "reports")] + extra)
            _w, _c, rc, out = timed(argv, dict(env, ANSIBLE_REMOTE_TMP=remote))
            if rc != 0:
                sys.exit("verify-gpu.yml failed (rc %s):\n%s" % (rc, out[-4000:]))
        files["call"] = shutil.copy(_kept(os.path.join(tmp, "remote-2"), module), os.path.join(tmp, "call.py"))
        _w, _c, rc, out = timed(["ansible", "localhost"] + common + ["-m", "ansible.builtin.ping"],
                                dict(env, ANSIBLE_REMOTE_TMP=os.path.join(tmp, "remote-ping")))
        if rc != 0:
            sys.exit("ping failed:\n%s" % out[-4000:])
        files["ping"] = shutil.copy(_kept(os.path.join(tmp, "remote-ping"), "ping"), os.path.join(tmp, "ping.py"))
        files["call-sources"] = _rewrite(files["call"], os.path.join(tmp, "call-sources.py"),
                                         lambda name, body: None if name.endswith(".pyc") else body)
        files["call-other-py"] = _rewrite(files["call"], os.path.join(tmp, "call-other-py.py"),
                                          lambda name, body: b"\x00\x00\r\n" + body[4:] if name.endswith(".pyc") else body)
        files["call-full-sources"] = _rewrite(files["call"], os.path.join(tmp, "call-full-sources.py"), _repository_source)
        files["built"] = _rewrite(files["call"], os.path.join(tmp, "built.py"),
                                  lambda name, body: None if name.endswith(".pyc") else _repository_source(name, body))
        order = ["ping", "call", "call-sources", "call-other-py", "call-full-sources", "built"]
        if args.mode == "full":  # the same call without the host control: what the control costs beside the container
            with open(files["call"]) as f:
                text = f.read()
            if '\\"host_control\\": true' not in text and '"host_control": true' not in text:
                sys.exit("the call's arguments have no host_control: true to turn off")
            with open(os.path.join(tmp, "call-no-control.py"), "w") as f:
                f.write(text.replace('"host_control": true', '"host_control": false'))
            files["call-no-control"] = os.path.join(tmp, "call-no-control.py")
            order.append("call-no-control")
        counts = dict((name, _payload_counts(files[name])) for name in order)
        wall = dict((k, []) for k in order)
        cpu = dict((k, []) for k in order)
        timings = dict((k, []) for k in order if k != "ping")
        for _rnd in range(args.rounds):
            for name in order:
                w, c, _out, result = _call(py, files[name], env)
                wall[name].append(w)
                cpu[name].append(c)
                if name in timings:
                    timings[name].append(_timings(result))
        _w, _c, out, _result = _call(py, files["call"], env, ["-X", "importtime"])
        imports = [line for line in out.splitlines() if line.startswith("import time:")]
        with open(os.path.join(args.out_dir, "importtime.txt"), "w") as f:
            f.write("\n".join(imports) + "\n")
        self_us = sum(int(line.split("|")[0].split(":")[1]) for line in imports[1:] if line.split("|")[0].split(":")[1].strip().isdigit())
        prof = os.path.join(tmp, "call.prof")
        # not `-m cProfile`: AnsiballZ drops its script's directory from sys.path, which would then be the stdlib's
        runner = ("import cProfile, runpy, sys\npath, out = sys.argv[1], sys.argv[2]\nsys.argv = [path]\n"
                  "cProfile.run('runpy.run_path(path, run_name=\"__main__\")', out)\n")
        wall_ms, _c, rc, out = timed([py, "-c", runner, files["call"], prof], env)
        if rc != 0 or not os.path.exists(prof):
            sys.exit("the profiled call failed (rc %s):\n%s" % (rc, out[-4000:]))
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("cumulative").print_stats(70)
        stats.sort_stats("tottime").print_stats(30)
        with open(os.path.join(args.out_dir, "profile.txt"), "w") as f:
            f.write(re.sub(re.escape(tmp), "<tmp>", text.getvalue()))
        if args.keep:
            for name in order:
                shutil.copy(files[name], os.path.join(args.out_dir, "%s.py" % name))
    finally:
        if args.keep:  # the calls' files name the fixture's node tree under it
            print("kept %s (remove it when done)" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    med = dict((k, statistics.median(v)) for k, v in wall.items())
    medc = dict((k, statistics.median(v)) for k, v in cpu.items())
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"nproc": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "mode": args.mode, "module": module, "rounds": args.rounds, "fixture": args.fixture, "extra_vars": args.extra,
        "payloads": counts,
        "wall_ms": wall, "cpu_ms": cpu, "median_wall_ms": med, "median_cpu_ms": medc,
        "median_layer_ms": dict((name, _medians(runs)) for name, runs in timings.items()),
        "layer_ms": timings,
        "ratios": {
            "call / call-sources": round(med["call"] / med["call-sources"], 2),
            "call-other-py / call-sources": round(med["call-other-py"] / med["call-sources"], 2),
            "call / ping": round(med["call"] / med["ping"], 2),
            "call-sources / ping": round(med["call-sources"] / med["ping"], 2),
            "call / call-full-sources": round(med["call"] / med["call-full-sources"], 2),
            "call / built": round(med["call"] / med["built"], 2),
            "call-sources / built": round(med["call-sources"] / med["built"], 2),
        },
        "saved_ms": dict([("bytecode", round(med["call-sources"] - med["call"], 1)),
                          ("lean sources", round(med["call-full-sources"] - med["call"], 1)),
                          ("other Python pays", round(med["call-other-py"] - med["call-sources"], 1))]
                         + ([("host control costs", round(med["call"] - med["call-no-control"], 1))] if "call-no-control" in med else [])),
        "importtime_self_ms_summed": round(self_us / 1000.0, 1),
    }
    with open(os.path.join(args.out_dir, "bench-node-call.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(dict((k, result[k]) for k in ("median_wall_ms", "median_cpu_ms", "ratios", "saved_ms",
                                                   "importtime_self_ms_summed", "median_layer_ms")), indent=2))


if __name__ == "__main__":
    main()
