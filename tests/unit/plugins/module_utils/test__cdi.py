"""Unit tests of the cdi layer: strict loading/validation (fixture corpus), resolution, merged edits,
host-side checks against real char devices made with mknod, and the security audit."""
import os
import shutil

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import audit as _cdi_audit
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import files as _cdi_files
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import host as _cdi_host
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import names as _cdi_names
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, validate_record

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "cdi")
VALID = sorted(os.listdir(os.path.join(FIXTURES, "valid")))
INVALID = sorted(os.path.join(rule, name) for rule in os.listdir(os.path.join(FIXTURES, "invalid"))
                 for name in os.listdir(os.path.join(FIXTURES, "invalid", rule)))
DRIVER = "580.159.04"
BROKEN = ".broken"


def _expectation(path):
    if path.endswith(".json"):
        return "already set in map"  # goyaml.v2 decode.go setMapIndex (JSON is read by the YAML reader too)
    with open(path) as f:
        first = f.readline()
    assert first.startswith("# expect: "), path
    return first[len("# expect: "):].strip()


def test_corpus_has_a_pass_and_a_fail_case_for_every_rule():
    rules_valid = set(n.split("__", 1)[0] for n in VALID)
    rules_invalid = set(p.split(os.sep, 1)[0] for p in INVALID)
    assert rules_valid == rules_invalid == set(_cdi_validate.RULES)
    cases_valid = set(n.split(".", 1)[0] for n in VALID if n.endswith(".yaml"))
    cases_invalid = set(p.replace(os.sep, "__").split(".", 1)[0] for p in INVALID if p.endswith((".yaml", ".yaml" + BROKEN)))
    assert cases_valid == cases_invalid


@pytest.mark.parametrize("name", VALID)
def test_valid_fixture_loads(name):
    rec = _cdi_files.load_spec_file(os.path.join(FIXTURES, "valid", name))
    assert rec["errors"] == [] and rec["ok"] and rec["spec"]["devices"]


@pytest.mark.parametrize("rel", INVALID)
def test_invalid_fixture_fails_for_its_rule(rel, tmp_path):
    path = os.path.join(FIXTURES, "invalid", rel)
    rule = rel.split(os.sep, 1)[0]
    if path.endswith(BROKEN):
        # unparsable YAML is kept as *.yaml.broken so that yamllint (ansible-test sanity) skips it
        loaded = tmp_path / os.path.basename(path)[:-len(BROKEN)]
        shutil.copyfile(path, str(loaded))
        rec = _cdi_files.load_spec_file(str(loaded))
    else:
        rec = _cdi_files.load_spec_file(path)
    assert not rec["ok"] and rec["spec"] is None
    assert rule in rec["rule_errors"], rec["rule_errors"]
    expect = _expectation(path)
    assert any(expect in e for e in rec["rule_errors"][rule]), (expect, rec["rule_errors"])


@pytest.mark.parametrize("spec, minimum", [
    ({"kind": "a.com/bc", "devices": [{"name": "x"}]}, "0.3.0"),
    ({"kind": "a.com/bc", "devices": [{"name": "x", "containerEdits": {"mounts": [{"type": "bind"}]}}]}, "0.4.0"),
    ({"kind": "a.com/bc", "devices": [{"name": "0"}]}, "0.5.0"),
    ({"kind": "a.com/bc", "containerEdits": {"deviceNodes": [{"path": "/d", "hostPath": "/e"}]}, "devices": []}, "0.5.0"),
    ({"kind": "a.com/b.c", "devices": []}, "0.6.0"),
    ({"kind": "a.com/bc", "annotations": {"k": "v"}, "devices": []}, "0.6.0"),
    ({"kind": "a.com/bc", "annotations": {}, "devices": []}, "0.3.0"),
    ({"kind": "a.com/bc", "devices": [{"name": "x", "containerEdits": {"additionalGids": [5]}}]}, "0.7.0"),
    ({"kind": "a.com/bc", "containerEdits": {"intelRdt": {}}, "devices": []}, "0.7.0"),
    ({"kind": "a.com/bc", "containerEdits": {"intelRdt": {"enableMonitoring": True}}, "devices": []}, "1.1.0"),
    ({"kind": "a.com/bc", "devices": [{"name": "0", "containerEdits": {"netDevices": [{"name": "n"}]}}]}, "1.1.0"),
])
def test_minimum_version(spec, minimum):
    assert _cdi_names.minimum_version(spec)[0] == minimum


@pytest.mark.parametrize("name, ok", [
    ("nvidia.com/gpu=0", True), ("nvidia.com/gpu=all", True), ("nvidia.com/gpu=GPU-1a2b:3.c", True),
    ("gpu=0", False), ("nvidia.com/gpu", False), ("/dev/nvidia0", False), ("nvidia.com/gpu=", False),
    ("nvidia.com/gpu=-0", False), ("nvidia.com/g*u=0", False),
])
def test_parse_qualified_name(name, ok):
    if ok:
        assert _cdi_names.parse_qualified_name(name)[2] == name.split("=", 1)[1]
    else:
        with pytest.raises(ValueError):
            _cdi_names.parse_qualified_name(name)


def test_yaml_scalars_coerced_to_strings_like_sigs_yaml():
    spec, errors, _model = _cdi_validate.load_spec_data(b"cdiVersion: 0.5.0\nkind: a.com/bc\ndevices:\n- name: 0\n  containerEdits: {env: [A=1]}\n")
    assert errors == [] and spec["devices"][0]["name"] == "0"


def test_field_names_match_case_insensitively_like_encoding_json():
    spec, errors, _model = _cdi_validate.load_spec_data(b"CDIVersion: 0.3.0\nkind: a.com/bc\ndevices:\n- name: x\n  containerEdits: {ENV: [A=1]}\n")
    assert errors == [] and spec["devices"][0]["containerEdits"]["env"] == ["A=1"]


def test_one_bad_file_never_hides_the_good_ones(tmp_path):
    d = tmp_path / "cdi"
    d.mkdir()
    (d / "a.yaml").write_text("{{{")
    (d / "b.yaml").write_text(_nvidia_spec("/dev/nvidia0"))
    (d / "ignored.txt").write_text("x")
    (d / "sub").mkdir()
    (d / "sub" / "c.yaml").write_text(_nvidia_spec("/dev/nvidia0"))
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False)
    files = dict((os.path.basename(f["path"]), f) for f in rec["evidence"]["files"])
    assert set(files) == {"a.yaml", "b.yaml"}
    assert not files["a.yaml"]["ok"] and files["a.yaml"]["error"].startswith("failed to unmarshal")
    assert files["b.yaml"]["ok"]
    assert "nvidia.com/gpu=0" in rec["evidence"]["all_devices"]
    parse = [c for c in rec["checks"] if c["id"] == "cdi.spec.parse" and c["subject"].endswith("a.yaml")]
    assert parse[0]["status"] == WARN  # kind unknown: the runtime ignores it; the good file still provides the kind


def test_size_cap(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text(_nvidia_spec("/dev/nvidia0") + "#" * 5000)
    rec = _cdi_files.load_spec_file(str(p), max_size=1000)
    assert not rec["ok"] and "cap" in rec["error"]


def test_symlinked_spec_is_reported(tmp_path):
    target = tmp_path / "real.yaml"
    target.write_text(_nvidia_spec("/dev/nvidia0"))
    d = tmp_path / "cdi"
    d.mkdir()
    os.symlink(str(target), str(d / "link.yaml"))
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False)
    assert rec["evidence"]["files"][0]["symlink"] == str(target)
    assert any(c["id"] == "cdi.spec.symlink" and c["status"] == WARN for c in rec["checks"])


# ---------------------------------------------------------------------------------------------------
# Resolution

def _spec(kind, names, extra_edits=None, version="0.5.0"):
    lines = ["cdiVersion: %s" % version, "kind: %s" % kind, "devices:"]
    for n in names:
        lines.append("- name: '%s'\n  containerEdits:\n    env: [DEV_%s=%s]" % (n, n.upper().replace("-", "_"), kind))
    if extra_edits:
        lines.append("containerEdits:\n" + extra_edits)
    return "\n".join(lines) + "\n"


def _write(d, name, text, mode=0o644):
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text(text)
    os.chmod(str(p), mode)
    return str(p)


def test_higher_priority_dir_overrides(tmp_path):
    low = _write(tmp_path / "etc", "a.yaml", _spec("v.com/cc", ["x", "y"]))
    high = _write(tmp_path / "run", "a.yaml", _spec("v.com/cc", ["x"], version="0.5.0").replace("v.com/cc\n", "v.com/cc\n", 1)
                  .replace("DEV_X=v.com/cc", "DEV_X=high"))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "etc"), str(tmp_path / "run")], discover_runtime_dirs_=False,
                            devices=["v.com/cc=x", "v.com/cc=y"])
    ev = rec["evidence"]
    assert ev["device_sources"] == {"v.com/cc=x": high, "v.com/cc=y": low}
    assert ev["overrides"] == [{"device": "v.com/cc=x", "winner": high, "overridden": low}]
    assert ev["expected_edits"]["env"] == ["DEV_X=high", "DEV_Y=v.com/cc"]


def test_same_priority_conflict_is_dropped_from_both_files(tmp_path):
    a = _write(tmp_path / "cdi", "a.yaml", _spec("v.com/cc", ["x", "y"]))
    b = _write(tmp_path / "cdi", "b.yaml", _spec("v.com/cc", ["x", "z"]))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False, devices=["v.com/cc=x"])
    ev = rec["evidence"]
    assert ev["all_devices"] == ["v.com/cc=y", "v.com/cc=z"]
    assert ev["conflicts"] == [{"device": "v.com/cc=x", "files": [a, b]}]
    for f in ev["files"]:
        assert f["conflicts"] and "conflicting device" in f["conflicts"][0]
    assert rec["status"] == FAIL
    statuses = dict((c["id"], c["status"]) for c in rec["checks"] if c["id"].startswith("cdi.resolve"))
    assert statuses["cdi.resolve.conflict"] == FAIL and statuses["cdi.resolve.device"] == FAIL


def test_conflict_of_an_unrequested_device_is_a_warning(tmp_path):
    _write(tmp_path / "cdi", "a.yaml", _spec("v.com/cc", ["x", "y"]))
    _write(tmp_path / "cdi", "b.yaml", _spec("v.com/cc", ["x"]))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False, devices=["v.com/cc=y"])
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.conflict"] == [WARN]


def test_vendor_class_all_literal_device_and_expansion(tmp_path):
    _write(tmp_path / "cdi", "a.yaml", _spec("v.com/cc", ["x", "all"]))
    _write(tmp_path / "cdi", "b.yaml", _spec("w.com/cc", ["p", "q"]))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False, devices=["v.com/cc=all", "w.com/cc=all"])
    ev = rec["evidence"]
    assert ev["requested_devices"] == ["v.com/cc=all", "w.com/cc=p", "w.com/cc=q"]
    assert ev["expanded"] == [{"request": "w.com/cc=all", "devices": ["w.com/cc=p", "w.com/cc=q"]}]
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.resolve.all_expanded"] == [WARN]


def test_default_kinds_request_every_device_of_the_kind(tmp_path):
    _write(tmp_path / "cdi", "a.yaml", _spec("nvidia.com/gpu", ["1", "0"]))
    _write(tmp_path / "cdi", "b.yaml", _spec("other.com/x", ["a"]))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False)
    assert rec["evidence"]["requested_devices"] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]


@pytest.mark.parametrize("dirs_exist", [False, True])
def test_no_spec_for_the_kind_fails_never_passes(tmp_path, dirs_exist):
    d = tmp_path / "cdi"
    if dirs_exist:
        _write(d, "other.yaml", _spec("other.com/x", ["a"]))
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False)
    assert rec["status"] == FAIL
    kind = [c for c in rec["checks"] if c["id"] == "cdi.resolve.kind"][0]
    assert kind["status"] == FAIL and kind["observed"] == "no CDI spec provides nvidia.com/gpu"
    assert validate_record(rec) == []


def test_invalid_spec_of_the_requested_kind_fails(tmp_path):
    _write(tmp_path / "cdi", "a.yaml", _spec("nvidia.com/gpu", ["0"], version="0.4.0"))
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False)
    version = [c for c in rec["checks"] if c["id"] == "cdi.spec.version"][0]
    assert version["status"] == FAIL and "at least v0.5.0" in version["observed"]
    assert rec["signature"] == "cdi.spec.version"


def test_merge_order_like_the_reference_library(tmp_path):
    spec_a = """cdiVersion: 0.5.0
kind: v.com/cc
containerEdits:
  env: [A=spec, B=spec]
  mounts: [{hostPath: /h/deep, containerPath: /a/b/c}, {hostPath: /h/x, containerPath: /x}]
  additionalGids: [0, 5]
devices:
- name: d1
  containerEdits:
    env: [A=d1, C=d1]
    deviceNodes: [{path: /dev/null, permissions: r}, {path: /dev/zero}]
    mounts: [{hostPath: /h/other, containerPath: /x}]
    additionalGids: [5, 7]
- name: d2
  containerEdits:
    env: [B=d2]
    deviceNodes: [{path: /dev/null, permissions: rw}]
    hooks: [{hookName: createContainer, path: /bin/true, args: [true]}]
""".replace("cdiVersion: 0.5.0", "cdiVersion: 0.7.0")
    _write(tmp_path / "cdi", "a.yaml", spec_a)
    rec = _cdi_layer.record(spec_dirs=[str(tmp_path / "cdi")], discover_runtime_dirs_=False, devices=["v.com/cc=d1", "v.com/cc=d2"])
    e = rec["evidence"]["expected_edits"]
    assert e["env"] == ["A=d1", "B=d2", "C=d1"]
    assert [(n["path"], n["permissions"]) for n in e["deviceNodes"]] == [("/dev/zero", "rwm"), ("/dev/null", "rw")]
    null = e["deviceNodes"][1]
    assert (null["type"], null["major"], null["minor"]) == ("c", 1, 3)  # filled from the host node
    assert [(m["containerPath"], m["hostPath"]) for m in e["mounts"]] == [("/x", "/h/other"), ("/a/b/c", "/h/deep")]
    assert e["additionalGids"] == [5, 7]
    assert e["hooks"] == [{"hookName": "createContainer", "path": "/bin/true", "args": ["true"], "env": [], "timeout": None}]
    assert rec["evidence"]["spec_digest"].startswith("sha256:")


# ---------------------------------------------------------------------------------------------------
# Host-side checks with real char devices (mknod) and synthetic libraries

def _nvidia_spec(gpu="/dev/nvidia0", extra_nodes=("/dev/nvidiactl", "/dev/nvidia-uvm"), libdir="/usr/local/nvidia/lib64",
                 version=DRIVER, ptx=True, perms=None, gpu_numbers=None):
    nodes = "\n".join("  - {path: %s%s}" % (n, ", permissions: %s" % perms if perms else "") for n in extra_nodes)
    numbers = ", type: c, major: %d, minor: %d" % gpu_numbers if gpu_numbers else ""
    mounts = ["  - {hostPath: %s/libcuda.so.%s, containerPath: /usr/lib/libcuda.so.1, options: [ro, bind]}" % (libdir, version)]
    if ptx:
        mounts.append("  - {hostPath: %s/libnvidia-ptxjitcompiler.so.%s, containerPath: /usr/lib/libnvidia-ptxjitcompiler.so.1, "
                      "options: [ro, bind]}" % (libdir, version))
    return """cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: "0"
  containerEdits:
    deviceNodes: [{path: %s%s%s}]
containerEdits:
  deviceNodes:
%s
  mounts:
%s
""" % (gpu, numbers, ", permissions: %s" % perms if perms else "", nodes, "\n".join(mounts))


@pytest.fixture
def gpu_host(tmp_path):
    """A host tree with real char devices and synthetic driver libraries (root=tmp_path)."""
    root = tmp_path / "host"
    hostfixture.mknod_under(root, "/dev/nvidia0", 195, 0)
    hostfixture.mknod_under(root, "/dev/nvidiactl", 195, 255)
    hostfixture.mknod_under(root, "/dev/nvidia-uvm", 238, 0)
    lib = root / "usr/local/nvidia/lib64"
    lib.mkdir(parents=True)
    for name in ("libcuda.so.%s" % DRIVER, "libnvidia-ptxjitcompiler.so.%s" % DRIVER):
        (lib / name).write_bytes(b"\x7fELF")
    os.symlink("libcuda.so.%s" % DRIVER, str(lib / "libcuda.so.1"))
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Release Build  (dvs-builder@U16-I3-B03-4-3)\n" % DRIVER)
    os.chmod(str(root), 0o755)
    return root


def _run(root, spec_text, **kw):
    _write(root / "etc/cdi", "nvidia.yaml", spec_text)
    kw.setdefault("discover_runtime_dirs_", False)
    return _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(root), **kw)


def _status(rec, check_id):
    return [c["status"] for c in rec["checks"] if c["id"] == check_id]


def test_valid_spec_on_a_gpu_host_passes(gpu_host):
    rec = _run(gpu_host, _nvidia_spec())
    assert rec["status"] == PASS, rec["reason"]
    assert validate_record(rec) == []
    assert set(_status(rec, "cdi.host.device_node")) == {PASS}
    assert _status(rec, "cdi.host.library_version") == [PASS, PASS]
    nodes = dict((n["path"], (n["type"], n["major"], n["minor"])) for n in rec["evidence"]["expected_edits"]["deviceNodes"])
    assert nodes == {"/dev/nvidia0": ("c", 195, 0), "/dev/nvidiactl": ("c", 195, 255), "/dev/nvidia-uvm": ("c", 238, 0)}
    assert rec["versions"] == {"cdi_spec": "0.5.0", "driver": DRIVER}
    assert rec["evidence"]["driver_version"]["source"].endswith("/proc/driver/nvidia/version")


def test_spec_that_parses_on_a_node_without_gpu_fails_with_absent_nodes(tmp_path):
    root = tmp_path / "nogpu"
    rec = _run(root, _nvidia_spec())
    assert all(_status(rec, c) == [PASS] for c in ("cdi.spec.parse", "cdi.spec.schema", "cdi.spec.version"))
    assert rec["status"] == FAIL and rec["signature"] == "cdi.host.device_node"
    absent = [c for c in rec["checks"] if c["id"] == "cdi.host.device_node"]
    assert len(absent) == 3 and all(c["status"] == FAIL and "No such file" in c["observed"] for c in absent)
    assert "cdi.host.device_node" in rec["reason"]


def test_stale_library_fails(gpu_host):
    rec = _run(gpu_host, _nvidia_spec(version="570.124.06"))
    assert rec["status"] == FAIL and rec["signature"] == "cdi.host.library_version"
    stale = [c for c in rec["checks"] if c["id"] == "cdi.host.library_version"][0]
    assert stale["observed"] == "570.124.06" and "stale" in stale["hint"]
    assert FAIL in _status(rec, "cdi.host.mount_source")


def test_running_driver_from_the_host_record_wins(gpu_host):
    host = {"evidence": {"nvml": {"driver_version": "570.124.06"}}}
    rec = _run(gpu_host, _nvidia_spec(), host=host)
    assert set(_status(rec, "cdi.host.library_version")) == {FAIL}
    assert rec["evidence"]["driver_version"] == {"version": "570.124.06", "source": "host.evidence.nvml.driver_version"}


def test_library_check_not_run_when_driver_unknown(tmp_path):
    root = tmp_path / "h"
    hostfixture.mknod_under(root, "/dev/nvidia0", 195, 0)
    rec = _run(root, _nvidia_spec(extra_nodes=()))
    assert set(_status(rec, "cdi.host.library_version")) == {NOT_RUN}


@pytest.mark.parametrize("numbers, status", [((195, 0), PASS), ((195, 1), FAIL)])
def test_declared_major_minor_compared_with_host(gpu_host, numbers, status):
    rec = _run(gpu_host, _nvidia_spec(gpu_numbers=numbers))
    assert _status(rec, "cdi.host.device_number") == [status]


@pytest.mark.parametrize("seen, status", [
    ({"exists": True, "type": "char", "major": 195, "minor": 0}, PASS),
    ({"exists": True, "type": "char", "major": 195, "minor": 7}, FAIL),
    ({"exists": False, "type": None, "major": None, "minor": None}, FAIL),
])
def test_host_layer_major_minor_compared(gpu_host, seen, status):
    host = {"evidence": {"device_nodes": {"/dev/nvidia0": seen}, "nvml": {"driver_version": DRIVER}}}
    rec = _run(gpu_host, _nvidia_spec(), host=host)
    match = [c for c in rec["checks"] if c["id"] == "cdi.host.host_layer_match"]
    assert [c["status"] for c in match if c["subject"] == "/dev/nvidia0"] == [status]
    assert set(c["status"] for c in match if c["subject"] != "/dev/nvidia0") == {NOT_RUN}


def test_regular_file_is_not_a_device_node(gpu_host):
    (gpu_host / "dev/nvidia1").write_text("")
    rec = _run(gpu_host, _nvidia_spec(gpu="/dev/nvidia1"))
    node = [c for c in rec["checks"] if c["id"] == "cdi.host.device_node" and c["subject"] == "/dev/nvidia1"][0]
    assert node["status"] == FAIL and "regular file" in node["observed"]


@pytest.mark.parametrize("kwargs, check, consequence", [
    ({"extra_nodes": ("/dev/nvidiactl",)}, "cdi.nvidia.uvm", "CUDA_ERROR_UNKNOWN (999)"),
    ({"extra_nodes": ("/dev/nvidia-uvm",)}, "cdi.nvidia.nvidiactl", "cuInit"),
    ({"ptx": False}, "cdi.nvidia.ptxjit", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    ({"perms": "r"}, "cdi.nvidia.cgroup_write", "CUDA_ERROR_NO_DEVICE"),
])
def test_nvidia_consequences_are_warnings(gpu_host, kwargs, check, consequence):
    rec = _run(gpu_host, _nvidia_spec(**kwargs))
    c = [c for c in rec["checks"] if c["id"] == check][0]
    assert c["status"] == WARN and consequence in c["hint"]
    assert rec["status"] == WARN, rec["reason"]


def test_stub_libcuda_is_a_warning_and_an_unaccounted_edit(gpu_host):
    """The CUDA toolkit's stub as libcuda: cdi.nvidia.libcuda says what it would do (a WARN), and it is no file of the
    driver, so the mount is unaccounted (cdi.trust.accounted FAIL: the layer FAILs, the probe does not run). Declared
    by the site, the stub is accounted for and the WARN is the layer's word again."""
    stub = gpu_host / "usr/local/cuda/lib64/stubs"
    stub.mkdir(parents=True)
    (stub / "libcuda.so").write_bytes(b"\x7fELF")
    text = _nvidia_spec().replace("/usr/local/nvidia/lib64/libcuda.so.%s" % DRIVER, "/usr/local/cuda/lib64/stubs/libcuda.so")
    rec = _run(gpu_host, text)
    assert _status(rec, "cdi.nvidia.libcuda") == [WARN]
    assert rec["status"] == FAIL and rec["signature"] == "cdi.trust.accounted" and rec["points_to"] == "cdi", rec["reason"]
    (trust,) = [c for c in rec["checks"] if c["id"] == "cdi.trust.accounted"]
    assert trust["status"] == FAIL and "mount /usr/local/cuda/lib64/stubs/libcuda.so -> /usr/lib/libcuda.so.1" in trust["observed"]
    rec = _run(gpu_host, text, trusted_edits=[{"hostPath": "/usr/local/cuda/lib64/stubs/libcuda.so", "why": "the lab's stub"}])
    assert _status(rec, "cdi.nvidia.libcuda") == [WARN] and rec["status"] == WARN, rec["reason"]
    assert _status(rec, "cdi.trust.accounted") == [PASS]


@pytest.mark.parametrize("name, version", [
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04", "580.159.04"),
    ("/usr/local/nvidia/lib64/libnvidia-ml.so.535.54.03", "535.54.03"),
    ("/lib/firmware/nvidia/580.159.04/gsp_ga10x.bin", "580.159.04"),
    ("/usr/lib/libcuda.so.1", None), ("/usr/lib/libnvidia-egl-wayland.so.1.1.13", None), ("/usr/lib/libfoo.so.580.1.2", None),
])
def test_library_version_from_file_name(name, version):
    assert _cdi_host.library_version(name) == version


def test_hook_checks(gpu_host):
    hooks = gpu_host / "usr/bin"
    hooks.mkdir(parents=True)
    good = hooks / "nvidia-ctk"
    good.write_text("#!/bin/sh\n")
    os.chmod(str(good), 0o755)
    noexec = hooks / "noexec"
    noexec.write_text("")
    os.chmod(str(noexec), 0o644)
    text = _nvidia_spec() + "  hooks:\n  - {hookName: createContainer, path: /usr/bin/nvidia-ctk}\n" \
        "  - {hookName: createContainer, path: /usr/bin/noexec}\n  - {hookName: poststop, path: /usr/bin/missing}\n"
    rec = _run(gpu_host, text)
    assert _status(rec, "cdi.host.hook") == [PASS, FAIL, FAIL]


# ---------------------------------------------------------------------------------------------------
# Security audit

@pytest.mark.parametrize("file_mode, dir_mode, file_status, dir_status", [
    (0o644, 0o755, PASS, PASS), (0o666, 0o755, FAIL, PASS), (0o644, 0o777, PASS, FAIL), (0o664, 0o775, PASS, PASS),
])
def test_world_writable_spec_file_or_dir(gpu_host, file_mode, dir_mode, file_status, dir_status):
    path = _write(gpu_host / "etc/cdi", "nvidia.yaml", _nvidia_spec(), mode=file_mode)
    os.chmod(os.path.dirname(path), dir_mode)
    rec = _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(gpu_host), discover_runtime_dirs_=False)
    assert _status(rec, "cdi.security.spec_file_writable") == [file_status]
    assert _status(rec, "cdi.security.spec_dir_writable") == [dir_status]


def test_non_root_owned_spec_file_fails(gpu_host):
    path = _write(gpu_host / "etc/cdi", "nvidia.yaml", _nvidia_spec())
    os.chown(path, 1000, 1000)
    rec = _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(gpu_host), discover_runtime_dirs_=False)
    c = [c for c in rec["checks"] if c["id"] == "cdi.security.spec_file_writable"][0]
    assert c["status"] == FAIL and "uid 1000" in c["observed"]


@pytest.mark.parametrize("host_path, options, sensitive", [
    ("/", [], True), ("/etc", ["ro"], True), ("/etc/", [], True), ("/root/.ssh", [], True),
    ("/var/run/docker.sock", [], True), ("/run/containerd/containerd.sock", [], True),
    ("/proc", [], True), ("/proc", ["ro"], False), ("/sys/fs/cgroup", ["rw"], True), ("/sys/bus/pci", ["ro", "bind"], False),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1", ["ro"], False), ("/etc/vulkan/icd.d/nvidia_icd.json", ["ro"], False),
])
def test_sensitive_mounts(host_path, options, sensitive):
    assert bool(_cdi_audit.sensitive_mount({"hostPath": host_path, "options": options})) is sensitive


@pytest.mark.parametrize("devices, status", [(["nvidia.com/gpu=0"], WARN), (["nvidia.com/gpu=0", "nvidia.com/gpu=evil"], FAIL)])
def test_sensitive_mount_of_another_device_in_the_spec_is_a_warning(gpu_host, devices, status):
    # issue 18.8: what the requested devices use FAILs, the rest (here a device nobody asked for) is a WARN
    evil = "- name: evil\n  containerEdits:\n    mounts: [{hostPath: /, containerPath: /host}]\n"
    text = _nvidia_spec().replace("containerEdits:\n  deviceNodes", evil + "containerEdits:\n  deviceNodes", 1)
    _write(gpu_host / "etc/cdi", "nvidia.yaml", text)
    rec = _cdi_layer.record(spec_dirs=["/etc/cdi"], root=str(gpu_host), discover_runtime_dirs_=False, devices=devices)
    assert _status(rec, "cdi.security.sensitive_mount") == [status]


def test_hook_writable_by_non_root_fails(gpu_host):
    hooks = gpu_host / "opt/hooks"
    hooks.mkdir(parents=True)
    hook = hooks / "hook"
    hook.write_text("#!/bin/sh\n")
    os.chmod(str(hook), 0o777)
    text = _nvidia_spec() + "  hooks:\n  - {hookName: createContainer, path: /opt/hooks/hook}\n"
    rec = _run(gpu_host, text)
    c = [c for c in rec["checks"] if c["id"] == "cdi.security.hook_writable"][0]
    assert c["status"] == FAIL and "world-writable" in c["observed"]


# ---------------------------------------------------------------------------------------------------
# Discovery

@pytest.mark.parametrize("text, dirs", [
    ('[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n',
     ["/etc/cdi", "/var/run/cdi"]),
    ("[engine]\ncdi_spec_dirs = [\n  '/opt/cdi',  # local\n  \"/run/cdi\",\n]\n", ["/opt/cdi", "/run/cdi"]),
    ("[engine]\n# cdi_spec_dirs = [\"/x\"]\n", None),
])
def test_parse_cdi_spec_dirs(text, dirs):
    assert _cdi_files.parse_cdi_spec_dirs(text) == dirs


def test_runtime_dirs_are_discovered_and_appended(tmp_path):
    root = tmp_path / "h"
    conf = root / "etc/containerd"
    conf.mkdir(parents=True)
    (conf / "config.toml").write_text('cdi_spec_dirs = ["/etc/cdi", "/opt/cdi"]\n')
    _write(root / "opt/cdi", "x.yaml", _spec("nvidia.com/gpu", ["a"]))
    rec = _cdi_layer.record(root=str(root), environ={})
    ev = rec["evidence"]
    assert ev["runtime_spec_dirs"]["containerd"]["spec_dirs"] == ["/etc/cdi", "/opt/cdi"]
    assert ev["spec_dirs"][-1] == str(root / "opt/cdi")
    assert ev["requested_devices"] == ["nvidia.com/gpu=a"]


@pytest.mark.parametrize("content,status,observed", [
    (b"\x7fELF\x02\x01\x01", PASS, "exists"),
    (b"not an ELF file\n", WARN, "exists, but not an ELF file (starts b'not ')"),
    (b"", WARN, "exists, but not an ELF file (starts b'')"),
    ("dir", WARN, "exists, but a directory, mounted at a library name"),
])
def test_a_mount_at_a_library_name_of_something_the_loader_refuses_is_said_before_any_container(
        gpu_host, content, status, observed):
    """The spec alone predicts the dlopen failure (issue 18): a library mount whose source is no ELF file."""
    lib = gpu_host / ("usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.%s" % DRIVER)
    lib.unlink()
    if content == "dir":
        lib.mkdir()
    else:
        lib.write_bytes(content)
    rec = _run(gpu_host, _nvidia_spec())
    checks = [c for c in rec["checks"] if c["id"] == "cdi.host.mount_source" and c["subject"].endswith(lib.name)]
    assert [(c["status"], c["observed"]) for c in checks] == [(status, observed)]


def test_a_non_library_mount_is_not_judged_as_a_library(gpu_host):
    (gpu_host / "etc").mkdir(exist_ok=True)
    (gpu_host / "etc/gpu.conf").write_text("x=1\n")
    spec = _nvidia_spec() + "  - {hostPath: /etc/gpu.conf, containerPath: /etc/gpu.conf, options: [ro, bind]}\n"
    rec = _run(gpu_host, spec)
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.host.mount_source" and c["subject"] == "/etc/gpu.conf"] == [PASS]
