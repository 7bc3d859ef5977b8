"""The collection's reading of a spec for a runtime equals that runtime's CDI library version's reading (issue 32).

Reference readers (scripts/cdi-readers.sh; built from Debian's packages by scripts/bootstrap.sh --test, never committed):
``bookworm-0.5.2``, Debian 12's CDI 0.5.2 (what podman 4.3.1 vendors), and ``trixie-0.8.0``, Debian 13's CDI 0.8.0
(what its containerd 1.7.24~ds1 links), each a tiny Go program (tests/integration/cdi_reader/main.go) that prints
which files the library accepts or rejects, which devices resolve, and the OCI spec after injecting each device.

The corpus: NVIDIA-shaped specs, the issue's members and edge cases, then hypothesis mutants (a fixed seed, a bounded
count). For every file: accepted by both or rejected by both; the devices that resolve; and for every device the merged
edits (env, device nodes, cgroup rules, mounts in order, hooks, additional GIDs) or that both fail to inject it.
"""
import json
import os
import shutil
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import readings
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.files import load_spec_file
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.resolve import build_registry, merge_edits

pytestmark = pytest.mark.integration
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("GPUPROBE_CDI_READERS_DIR", os.path.join(ROOT, ".build", "cdi-readers"))
# reader -> the collection's reading of that library build
READERS = {
    "bookworm-0.5.2": readings.reading_for("v0.5.2"),                      # Debian 12: Go 1.19, no minimum-version check
    "trixie-0.8.0": readings.reading_for("v0.8.0", gopath_go122=True),      # Debian 13: GOPATH mode, Go 1.24
}
HOOK_PHASES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")


def _reader(name):
    path = os.path.join(BUILD, name, "reader")
    if not os.access(path, os.X_OK) and shutil.which("apt-get"):
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "cdi-readers.sh"), "build"], capture_output=True, check=False, timeout=600)
    if not os.access(path, os.X_OK):
        why = "the reference CDI reader %s is not built (scripts/cdi-readers.sh build: needs apt-get, dpkg and network)" % name
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return path


# ------------------------------------------------------------------------------------------------------------
# the two readings, in one shape


def _go_reading(reader, spec_dir):
    r = subprocess.run([reader, spec_dir], capture_output=True, text=True, check=False, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    edits = {}
    for dev, res in (out.get("edits") or {}).items():
        if res.get("error"):
            edits[dev] = "error"
            continue
        spec = res["spec"]
        linux = spec.get("linux") or {}
        proc = spec.get("process") or {}
        hooks = spec.get("hooks") or {}
        edits[dev] = {
            "env": proc.get("env") or [],
            "nodes": [(d["path"], d["type"], d.get("major", 0), d.get("minor", 0), d.get("fileMode"), d.get("uid"), d.get("gid"))
                      for d in linux.get("devices") or []],
            "cgroup": [(d["type"], d.get("major"), d.get("minor"), d.get("access") or "") for d in (linux.get("resources") or {}).get("devices") or []],
            "mounts": [(m["destination"], m.get("type") or "", m.get("source"), m.get("options") or []) for m in spec.get("mounts") or []],
            "hooks": dict((p, [(h["path"], h.get("args") or [], h.get("env") or [], h.get("timeout")) for h in hooks.get(p) or []])
                          for p in HOOK_PHASES if hooks.get(p)),
            "gids": (proc.get("user") or {}).get("additionalGids") or [],
        }
    files = dict((name, bool(v["ok"])) for name, v in out["files"].items())
    return {"files": files, "devices": sorted(out.get("devices") or []), "edits": edits, "panic": out.get("panic"),
            "errors": dict((n, v.get("error")) for n, v in out["files"].items())}


def _py_reading(reading, spec_dir):
    files = []
    for name in sorted(os.listdir(spec_dir)):
        if os.path.splitext(name)[1] in (".json", ".yaml"):
            rec = load_spec_file(os.path.join(spec_dir, name), reading=reading)
            rec["priority"] = 0
            files.append(rec)
    registry, _conflicts, _overrides = build_registry(files)
    edits = {}
    for dev in sorted(registry):
        merged, _sources = merge_edits(registry, [dev])
        if any(n["inject_error"] for n in merged["injected_nodes"]):
            edits[dev] = "error"
            continue
        hooks = {}
        for h in merged["hooks"]:
            hooks.setdefault(h["hookName"], []).append((h["path"], h["args"], h["env"], h["timeout"]))
        edits[dev] = {
            "env": merged["env"],
            "nodes": [(n["path"], n["type"], n["major"], n["minor"], n["fileMode"], n["uid"], n["gid"]) for n in merged["deviceNodes"]],
            "cgroup": [(r["type"], r["major"], r["minor"], r["access"]) for r in merged["cgroup_rules"]],
            "mounts": [(m["containerPath"], m["type"] or "", m["hostPath"], m["options"]) for m in merged["mounts"]],
            "hooks": hooks,
            "gids": merged["additionalGids"],
        }
    return {"files": dict((os.path.basename(r["path"]), bool(r["ok"])) for r in files), "devices": sorted(registry), "edits": edits,
            "panics": [os.path.basename(r["path"]) for r in files if r["rule_errors"].get("panic")],
            "errors": dict((os.path.basename(r["path"]), r["error"]) for r in files)}


def _compare(name, spec_dir):
    """Every difference between the collection's reading and the reference library's, as text lines."""
    go = _go_reading(_reader(name), spec_dir)
    py = _py_reading(READERS[name], spec_dir)
    diffs = []
    for f in sorted(set(go["files"]) | set(py["files"])):
        if go["files"].get(f) != py["files"].get(f):
            diffs.append("%s %s: library %s (%s), collection %s (%s)" % (
                name, f, "accepts" if go["files"].get(f) else "rejects", go["errors"].get(f), "accepts" if py["files"].get(f) else "rejects",
                py["errors"].get(f)))
    if go["panic"] or py["panics"]:
        # a panicking file stops the library's refresh: no device list to compare (the layer FAILs it whatever is requested)
        if not (go["panic"] and py["panics"]):
            diffs.append("%s: library panic %r, collection panics %r" % (name, go["panic"], py["panics"]))
        return diffs
    if go["devices"] != py["devices"]:
        diffs.append("%s devices: library %s, collection %s" % (name, go["devices"], py["devices"]))
    for dev in sorted(set(go["edits"]) & set(py["edits"])):
        g, p = go["edits"][dev], py["edits"][dev]
        if g == "error" or p == "error":
            if g != p:
                diffs.append("%s %s: library %s, collection %s" % (name, dev, g if g == "error" else "injects", p if p == "error" else "injects"))
            continue
        for key in g:
            if _norm(g[key]) != _norm(p[key]):
                diffs.append("%s %s %s: library %r, collection %r" % (name, dev, key, g[key], p[key]))
    return diffs


def _norm(value):
    return json.loads(json.dumps(value))


def _write(spec_dir, specs):
    os.makedirs(spec_dir, exist_ok=True)
    for i, (fmt, spec) in enumerate(specs):
        path = os.path.join(spec_dir, "s%03d.%s" % (i, fmt))
        with open(path, "w", encoding="utf-8") as fh:
            if isinstance(spec, str):
                fh.write(spec)
            elif fmt == "json":
                json.dump(spec, fh)
            else:
                yaml.safe_dump(spec, fh)


# ------------------------------------------------------------------------------------------------------------
# the corpus


def _nvidia(kind, version="0.5.0", **extra):
    """A spec shaped as nvidia-ctk writes one, on device nodes this host has (the null device's family)."""
    spec = {"cdiVersion": version, "kind": kind,
            "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/null", "hostPath": "/dev/null"}]}},
                        {"name": "GPU-6b1d2f3c-0000-4000-8000-000000000000",
                         "containerEdits": {"deviceNodes": [{"path": "/dev/zero"}]}},
                        {"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/null"}, {"path": "/dev/zero"}]}}],
            "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=void"],
                               "deviceNodes": [{"path": "/dev/full"}, {"path": "/dev/urandom", "permissions": "rw"}],
                               "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook",
                                          "args": ["nvidia-cdi-hook", "update-ldcache", "--folder", "/usr/lib/x86_64-linux-gnu"],
                                          "env": ["NVIDIA_CTK_DEBUG=false"]}],
                               "mounts": [{"hostPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.1",
                                           "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.580.1",
                                           "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]},
                                          {"hostPath": "/usr/bin/nvidia-smi", "containerPath": "/usr/bin/nvidia-smi",
                                           "options": ["ro", "nosuid", "nodev", "rbind", "rprivate"]},
                                          {"hostPath": "/run/nvidia-persistenced/socket", "containerPath": "/run/nvidia-persistenced/socket",
                                           "options": ["ro", "nosuid", "nodev", "rbind", "rprivate", "noexec"]}]}}
    spec.update(extra)
    return spec


def _one(kind, version="0.5.0", name="dev0", edits=None, **extra):
    spec = {"cdiVersion": version, "kind": kind, "devices": [{"name": name, "containerEdits": edits or {"env": ["A=1"]}}]}
    spec.update(extra)
    return spec


CORPUS = [
    ("yaml", _nvidia("nvidia.com/gpu")),
    ("json", _nvidia("nvidia.com/mig", "0.6.0")),
    ("yaml", _nvidia("nvidia.com/gpu8", "0.8.0", annotations={"cdi.k8s.io/x": "y"})),
    ("yaml", _nvidia("nvidia.com/gpu7", "0.7.0")),
    ("yaml", _nvidia("nvidia.com/gpu3", "0.3.0")),                                  # "0" and hostPath at 0.3.0
    ("yaml", _one("example.com/zero", "0.3.0", "0", {"env": ["X=1"], "deviceNodes": [{"path": "/dev/null", "hostPath": "/dev/null"}]})),
    ("yaml", _one("example.com/zerov", "v0.5.0")),                                  # a v prefix
    ("yaml", _one("example.com/nine", "0.9.0")),
    ("yaml", _one("example.com/eighty", "0.8.0")),
    ("yaml", _one("example.com/oneone", "1.1.0")),
    ("yaml", _one("example.com/perm", "0.5.0", edits={"deviceNodes": [{"path": "/dev/null", "permissions": "none"}]})),
    ("yaml", _one("example.com/permr", "0.5.0", edits={"deviceNodes": [{"path": "/dev/null", "permissions": "r"}]})),
    ("yaml", _one("example.com/annot", "0.6.0", annotations={"bad key!": "x"})),
    ("yaml", _one("example.com/annotdev", "0.6.0", annotations={"ok.example.com/k": "v"})),
    ("yaml", {"cdiVersion": "0.5.0", "kind": "example.com/empty", "devices": [], "containerEdits": {"env": ["A=1"]}}),
    ("yaml", _one("example.com/cls.dot", "0.6.0")),
    ("yaml", _one("example.com/rdt", "0.7.0", edits={"intelRdt": {"closID": "/"}})),
    ("yaml", _one("example.com/rdtx", "0.7.0", edits={"intelRdt": {"closID": "grp"}, "additionalGids": [0, 5, 5, 7]})),
    ("yaml", _one("example.com/hookrel", "0.5.0", edits={"hooks": [{"hookName": "prestart", "path": "relative/hook"}]})),
    ("yaml", _one("example.com/neg", "0.5.0", edits={"deviceNodes": [{"path": "/dev/x", "type": "c", "major": -1, "minor": 3}]})),
    ("yaml", _one("example.com/minimal", "0.5.0", edits={"deviceNodes": [{"path": "/dev/nvidia0", "type": "c", "major": 195}]})),
    ("yaml", _one("example.com/absent", "0.5.0", edits={"deviceNodes": [{"path": "/dev/nvidia0"}]})),
    ("yaml", _one("example.com/typeu", "0.5.0", edits={"deviceNodes": [{"path": "/dev/null", "type": "u"}]})),
    ("yaml", _one("example.com/order", "0.5.0", edits={"mounts": [{"hostPath": "/b", "containerPath": "/z"},
                                                                  {"hostPath": "/a", "containerPath": "/a"},
                                                                  {"hostPath": "/c", "containerPath": "/a/b"},
                                                                  {"hostPath": "/d", "containerPath": "/b"}]})),
    ("yaml", _one("example.com/mtype", "0.3.0", edits={"mounts": [{"hostPath": "/a", "containerPath": "/a", "type": "bind"}]})),
    # hostPath on the first device only: the minimum-version check of an upstream build sees only the last device's edits
    ("yaml", {"cdiVersion": "0.4.0", "kind": "example.com/alias", "devices": [
        {"name": "a", "containerEdits": {"deviceNodes": [{"path": "/dev/null", "hostPath": "/dev/null"}]}},
        {"name": "b", "containerEdits": {"env": ["B=1"]}}]}),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/twodoc\ndevices:\n- name: d\n  containerEdits: {env: [A=1]}\n---\nfoo: 1\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/yes\ndevices:\n- name: yes\n  containerEdits: {env: [A=1]}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/dup\ndevices:\n- name: d\n  containerEdits: {env: [A=1, A=2, B=3]}\n"),
    ("json", '{"cdiVersion": "0.5.0", "kind": "example.com/esc", "devices": [{"name": "d", "containerEdits": {"env": ["P=a\\/b"]}}]}'),
    # YAML 1.1 scalars and go-yaml v2 rules as each Debian release's sigs.k8s.io/yaml and go-yaml read them
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/scalars\ndevices:\n- name: 1:30\n  containerEdits: {env: [A=1]}\n"
             "- name: 0x1F\n  containerEdits: {env: [A=1]}\n- name: 1e3\n  containerEdits: {env: [A=1]}\n"
             "- name: 2001-12-14\n  containerEdits: {env: [A=1]}\n- name: 017\n  containerEdits: {env: [A=1]}\n"),
    ("yaml", "CDIVersion: 0.5.0\nKind: example.com/case\nDevices:\n- Name: d\n  ContainerEdits: {Env: [A=1]}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/dupkey\nkind: example.com/dupkey2\ndevices:\n- name: d\n  containerEdits: {env: [A=1]}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/merge\nbase: &b {env: [A=1]}\ndevices:\n- name: d\n  containerEdits: {<<: *b}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/mergeok\ndevices:\n- name: d\n  containerEdits: &e {env: [A=1]}\n"
             "- name: e\n  containerEdits: {<<: *e, deviceNodes: [{path: /dev/null, major: 1.0, minor: 3, type: c}]}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/nulls\ndevices:\n- name: d\n  containerEdits: {env: [A=1], mounts: ~, hooks: null}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/unknown\ndevices:\n- name: d\n  containerEdits: {env: [A=1]}\n  extra: 1\n"),
    # the characters go-yaml reads as line breaks, raw: in a value NEL is folded to a space and the two separators kept;
    # in a key (quoted, in JSON too) each one ends the key: the file does not parse
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/breaks\ndevices:\n- name: d\n"
             "  containerEdits: {env: [\"A=\u0085x\", \"B=\u2028x\", C=\u2029x]}\n"),
    ("json", '{"cdiVersion": "0.5.0", "kind": "example.com/breaksj", "devices": [{"name": "d", "containerEdits": '
             '{"env": ["A=\u0085x", "B=\u2028x", "C=\u2029x"]}}]}'),
    ("json", '{"cdiVersion": "0.5.0", "kind": "example.com/breakkey", "devices": [{"name": "d", "containerEdits": '
             '{"env": ["A=1"]}}], "annotations": {"\u2028": "x"}}'),
    ("yaml", '"cdiVersion": "0.5.0"\n"kind": "example.com/breakkeyy"\n"devices":\n  - "name": "d"\n'
             '    "containerEdits": {"env": ["A=1"]}\n"annotations":\n  "k\u0085": "x"\n'),
    # a %YAML directive: go-yaml v2 takes 1.1 only
    ("yaml", "%YAML 1.2\n---\ncdiVersion: 0.5.0\nkind: example.com/yaml12\ndevices:\n- name: d\n  containerEdits: {env: [A=1]}\n"),
    ("yaml", "%YAML 1.1\n---\ncdiVersion: 0.5.0\nkind: example.com/yaml11\ndevices:\n- name: d\n  containerEdits: {env: [A=1]}\n"),
    # yaml.org tags go-yaml does not resolve a scalar to: the scalar's text; !!merge on a << key: a merge
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/tags\ndevices:\n- name: d\n"
             "  containerEdits: {env: [!!merge A=1, !!seq B=2, !!map C=3, !!set D=4, !!omap E=5, !!value F=6, !!yaml G=7]}\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/mergetag\ndevices:\n- name: d\n  containerEdits: &b {env: [A=1]}\n"
             "- name: e\n  containerEdits: {!!merge <<: *b, deviceNodes: [{path: /dev/null}]}\n"),
    # an anchor name redefined inside its own node: an alias names the one declared last (the inner one)
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/reanchor\ndevices:\n- name: d\n  containerEdits: &a {env: &a [B=2]}\n"
             "containerEdits:\n  env: *a\n"),
    ("yaml", "cdiVersion: 0.5.0\nkind: example.com/reanchor2\ndevices:\n- name: d\n  containerEdits: &a {env: [B=2]}\n"
             "- name: e\n  containerEdits: *a\n"),
    # a NUL byte in a path: the library cannot stat such a device node (EINVAL: the device is not injected); a mount's
    # or a hook's path it passes on as written
    ("json", _one("example.com/nulnode", "0.5.0", edits={"deviceNodes": [{"path": "/dev/null\u0000"}]})),
    ("yaml", _one("example.com/nulmount", "0.5.0", edits={"env": ["A=1"],
                                                          "mounts": [{"hostPath": "/a\u0000", "containerPath": "/b\u0000"}],
                                                          "hooks": [{"hookName": "prestart", "path": "/h\u0000"}]})),
]
# !!timestamp as go-yaml v2 takes it: one of its layouts, the fields in range (the text stays the value)
TIMESTAMPS = ["2001-12-14T21:59:43Z", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43", "2000-2-29",
              "2001-13-45", "2001-2-29", "2001-12-14T21:59:43", "2001-12-14 21:59:43 Z", "2001-12-14T24:00:00Z"]
CORPUS += [("yaml", "cdiVersion: 0.5.0\nkind: example.com/ts%d\ndevices:\n- name: d\n  containerEdits:\n    env: [A=1]\n"
                    "    mounts: [{hostPath: /h, containerPath: !!timestamp %s}]\n" % (i, ts)) for i, ts in enumerate(TIMESTAMPS)]


def test_the_corpus_is_read_as_each_library_reads_it(tmp_path):
    spec_dir = str(tmp_path / "corpus")
    _write(spec_dir, CORPUS)
    diffs = _compare("bookworm-0.5.2", spec_dir) + _compare("trixie-0.8.0", spec_dir)
    assert not diffs, "\n".join(diffs)


# a one-character vendor or class panics the library in its name check (v0.5.2 pkg/cdi/qualified-device.go
# ValidateVendorName/ValidateClassName, v0.8.0 pkg/parser validateVendorOrClassName), but only where Spec.validate gets
# there: the version first, from v0.5.4 the minimum version the fields need, the vendor before the class. A panicking
# file stops the whole refresh, so each is read in its own dir, beside a good spec.
ONE_CHARACTER = [
    _one("g/onechar", "0.5.0"),                                                   # both panic
    _one("g/onechar", "0.6.0"),                                                   # 0.5.2: invalid version; 0.8.0 panics
    _one("g/onechar", "9.9.9"),                                                   # neither reads the version
    _one("example.com/c", "0.5.0"),                                               # the class
    _one("example.com/c", "0.3.0", edits={"deviceNodes": [{"path": "/dev/null", "hostPath": "/dev/null"}]}),  # 0.8.0: minimum version
    _one("1x/c", "0.5.0"),                                                        # the vendor's error first
]


@pytest.mark.parametrize("spec", ONE_CHARACTER, ids=["%s-%s" % (s["kind"], s["cdiVersion"]) for s in ONE_CHARACTER])
def test_a_one_character_vendor_or_class_panics_only_where_each_library_gets_to_it(tmp_path, spec):
    spec_dir = str(tmp_path / "one")
    _write(spec_dir, [("yaml", _one("example.com/good")), ("yaml", spec)])
    diffs = _compare("bookworm-0.5.2", spec_dir) + _compare("trixie-0.8.0", spec_dir)
    assert not diffs, "\n".join(diffs)


# ------------------------------------------------------------------------------------------------------------
# mutants


VERSIONS = ["0.2.0", "0.3.0", "0.4.0", "0.5.0", "v0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "0.9.0"]
NAMES = ["0", "gpu0", "all", "1:0", "GPU-6b1d", "a_b", "x.y", "Z9"]
CPATHS = ["/a", "/z", "/a/b", "/b", "/usr/lib/libcuda.so.1", "/a/b/c"]
KEYS = ["ok.example.com/key", "bad key!", "k", "a/b/c"]


@st.composite
def _valid_edits(draw):
    """Edits every library accepts at 0.3.0 (nodes on this host's null-device family, absolute hooks)."""
    edits = {"env": draw(st.lists(st.sampled_from(["A=1", "A=2", "B=x", "C="]), min_size=1, max_size=3))}
    if draw(st.booleans()):
        edits["deviceNodes"] = [dict({"path": p}, **draw(st.fixed_dictionaries({}, optional={
            "type": st.just("c"), "permissions": st.sampled_from(["", "r", "rw", "rwm", "mrw"]), "fileMode": st.sampled_from([438, 420]),
            "uid": st.sampled_from([0, 1000]), "gid": st.just(44)})))
            for p in draw(st.lists(st.sampled_from(["/dev/null", "/dev/zero", "/dev/full"]), max_size=3, unique=True))]
    if draw(st.booleans()):
        edits["mounts"] = [dict({"hostPath": "/h" + c, "containerPath": c}, **({"options": ["ro", "rbind"]} if draw(st.booleans()) else {}))
                           for c in draw(st.lists(st.sampled_from(CPATHS), max_size=4, unique=True))]
    if draw(st.booleans()):
        edits["hooks"] = [{"hookName": draw(st.sampled_from(["createContainer", "prestart", "poststop", "startContainer"])),
                           "path": "/usr/bin/hook", "args": ["hook", "x"], "env": ["E=1"]}]
    return edits


def _blocks(spec):
    return [d["containerEdits"] for d in spec["devices"]] + [spec.setdefault("containerEdits", {})]


def _mutate(draw, spec, index):
    """One change of the issue's kinds (version, fields a version introduced, validation a version lacks)."""
    what = draw(st.integers(0, 15))
    blocks = _blocks(spec)
    block = blocks[draw(st.integers(0, len(blocks) - 1))]
    nodes = [n for b in blocks for n in b.get("deviceNodes") or []]
    if what == 0:
        spec["cdiVersion"] = draw(st.sampled_from(VERSIONS))
    elif what == 1 and nodes:
        draw(st.sampled_from(nodes))["hostPath"] = draw(st.sampled_from(["/dev/null", "/dev/zero"]))
    elif what == 2 and block.get("mounts"):
        block["mounts"][0]["type"] = "bind"
    elif what == 3 and nodes:
        draw(st.sampled_from(nodes))["permissions"] = draw(st.sampled_from(["none", "x", "rwmx"]))
    elif what == 4 and nodes:
        node = draw(st.sampled_from(nodes))
        node.update(draw(st.fixed_dictionaries({"type": st.sampled_from(["u", "p", "b", "c", "x"])}, optional={
            "major": st.sampled_from([0, 1, 195, -1]), "minor": st.sampled_from([0, 3, 5, -2])})))
    elif what == 5 and nodes:
        draw(st.sampled_from(nodes))["path"] = draw(st.sampled_from(["/dev/nvidia0", "/dev/nvidiactl", ""]))
    elif what == 6:
        spec["annotations"] = {draw(st.sampled_from(KEYS)): "v"}
    elif what == 7 and spec["devices"]:
        draw(st.sampled_from(spec["devices"]))["annotations"] = {draw(st.sampled_from(KEYS)): "v"}
    elif what == 8:
        spec["kind"] = "v%d.example.com/c%d%s" % (index, index, draw(st.sampled_from([".x", "_y", "-z"])))
    elif what == 9:
        spec["devices"] = []
    elif what == 10:
        block["intelRdt"] = {"closID": draw(st.sampled_from(["/", "grp", "..", "a/b"]))}
    elif what == 11:
        block["additionalGids"] = draw(st.lists(st.sampled_from([0, 5, 7]), min_size=1, max_size=3))
    elif what == 12:
        block["hooks"] = [{"hookName": draw(st.sampled_from(["prestart", "bogus"])), "path": draw(st.sampled_from(["rel/hook", "", "/h"])),
                           "env": draw(st.sampled_from([[], ["bad"]]))}]
    elif what == 13:
        block.setdefault("env", []).append(draw(st.sampled_from(["=x", "D", "A=3"])))
    elif what == 14 and spec["devices"]:
        spec["devices"].append(dict(spec["devices"][0]))
    elif what == 15:
        block["netDevices"] = [{"hostInterfaceName": "eth1", "name": "net1"}]


@st.composite
def _mutant(draw, index):
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    spec = {"cdiVersion": draw(st.sampled_from(["0.5.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0"])), "kind": "v%d.example.com/c%d" % (index, index),
            "devices": [{"name": n, "containerEdits": draw(_valid_edits())} for n in names]}
    if draw(st.booleans()):
        spec["containerEdits"] = draw(_valid_edits())
    for _round in range(draw(st.integers(0, 2))):
        _mutate(draw, spec, index)
    if not spec.get("containerEdits"):
        spec.pop("containerEdits", None)
    return draw(st.sampled_from(["yaml", "json"])), spec


MUTANTS_PER_BATCH = 50


@seed(32)
@settings(max_examples=10, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(st.data())
def test_mutants_are_read_as_each_library_reads_them(tmp_path_factory, data):
    specs = [data.draw(_mutant(i)) for i in range(MUTANTS_PER_BATCH)]
    spec_dir = str(tmp_path_factory.mktemp("mutants"))
    _write(spec_dir, specs)
    diffs = _compare("bookworm-0.5.2", spec_dir) + _compare("trixie-0.8.0", spec_dir)
    assert not diffs, "\n".join(diffs[:20])
