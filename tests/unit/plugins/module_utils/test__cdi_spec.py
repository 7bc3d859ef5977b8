"""Self-built CDI specs: content from a synthetic host (mknod + library files), variants, write/remove/sweep,
and every built spec checked by the cdi layer itself."""
import json
import os
import stat

import pytest
import yaml

import generators  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
import hostfixture

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.filter.option_errors import role_options
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import names as _cdi_names
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import validate as _cdi_validate
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, validate_record
from ansible_collections.gpuprobe.layers.plugins.modules import cdi_facts, cdi_spec

DRIVER = "580.159.04"


@pytest.fixture
def host_root(tmp_path):
    root = hostfixture.spec_host_tree(tmp_path / "host", (("/dev/nvidia0", 195, 0), ("/dev/nvidia1", 195, 1),
                                                          ("/dev/nvidiactl", 195, 255), ("/dev/nvidia-uvm", 238, 0),
                                                          ("/dev/nvidia-uvm-tools", 238, 1)), version=DRIVER)
    stub = root / "usr/local/cuda/targets/x86_64-linux/lib/stubs"
    stub.mkdir(parents=True)
    (stub / "libcuda.so").write_bytes(b"\x7fELF")
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  %s  Release Build\n" % DRIVER)
    return root


def _build(host_root, variant="full", **kw):
    return _cdi_spec.build_spec("t1", variant=variant, root=str(host_root), driver_root="/usr/local/nvidia", **kw)


def test_full_spec_content(host_root):
    spec = _build(host_root)
    assert spec["kind"] == "gpuprobe.local/gpu-t1" and spec["cdiVersion"] == "0.5.0"
    assert [d["name"] for d in spec["devices"]] == ["0", "1", "all"]
    assert spec["devices"][2]["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/nvidia0", "hostPath": str(host_root / "dev/nvidia0")},
        {"path": "/dev/nvidia1", "hostPath": str(host_root / "dev/nvidia1")}]
    edits = spec["containerEdits"]
    assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    mounts = dict((m["containerPath"], m["hostPath"]) for m in edits["mounts"])
    lib = str(host_root / "usr/local/nvidia/lib64")
    assert mounts == {
        "/usr/local/nvidia/lib64/libcuda.so.1": "%s/libcuda.so.%s" % (lib, DRIVER),
        "/usr/local/nvidia/lib64/libnvidia-ml.so.1": "%s/libnvidia-ml.so.%s" % (lib, DRIVER),
        "/usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.1": "%s/libnvidia-ptxjitcompiler.so.%s" % (lib, DRIVER),
        "/usr/local/nvidia/bin/nvidia-smi": str(host_root / "usr/local/nvidia/bin/nvidia-smi"),
    }
    assert "GPUPROBE_RUN_ID=t1" in edits["env"]
    spec2, errors, _m = _cdi_validate.load_spec_data(_cdi_spec.render(spec).encode())
    assert errors == [] and spec2 == spec


def test_host_record_supplies_nodes_and_driver_root(host_root):
    host = {"evidence": {"driver_root": "/usr/local/nvidia", "device_nodes": {
        "/dev/nvidia1": {"exists": True}, "/dev/nvidia0": {"exists": False}, "/dev/nvidiactl": {"exists": True}}}}
    spec = _cdi_spec.build_spec("t1", root=str(host_root), host=host)
    assert [d["name"] for d in spec["devices"]] == ["1", "all"]


def test_no_gpu_node_is_an_error_unless_gpus_given(tmp_path, host_root):
    empty = tmp_path / "empty"
    (empty / "usr/local/nvidia/lib64").mkdir(parents=True)
    for name in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler"):
        (empty / "usr/local/nvidia/lib64" / ("%s.so.%s" % (name, DRIVER))).write_bytes(b"")
    with pytest.raises(_cdi_spec.SpecError, match="no GPU device node") as raised:
        _cdi_spec.build_spec("t1", root=str(empty), driver_root="/usr/local/nvidia")
    # issue 22.9: the hint said "pass gpus", which no playbook variable passes: it names the module whose option it is
    hint = str(raised.value)
    assert "module gpuprobe.layers.cdi_spec" in hint and "its option gpus" in hint, hint
    assert "gpus" in yaml.safe_load(cdi_spec.DOCUMENTATION)["options"] and "verify_gpus" not in role_options()
    spec = _cdi_spec.build_spec("t1", root=str(empty), driver_root="/usr/local/nvidia", gpus=["0"])
    assert spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/nvidia0"


def test_missing_library_is_an_error(host_root):
    os.unlink(str(host_root / "usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.1"))
    os.unlink(str(host_root / ("usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.%s" % DRIVER)))
    with pytest.raises(_cdi_spec.SpecError, match="libnvidia-ptxjitcompiler.so.1 not found"):
        _build(host_root)


def _check(host_root, spec, tmp_path, devices=("gpuprobe.local/gpu-t1=0",)):
    d = tmp_path / "spec-dir"
    path = _cdi_spec.write_spec(spec, str(d), "t1")
    # the host layer's record of this tree as the cdi layer reads it: its root, the driver root, NVML's version (what the
    # trust check accounts the spec's files against)
    rec = _cdi_layer.record(spec_dirs=[str(d)], discover_runtime_dirs_=False, devices=list(devices), root="/",
                            host=generators.host_record(host_root, "/usr/local/nvidia"))
    assert validate_record(rec) == []
    return rec, path


@pytest.mark.parametrize("variant", sorted(_cdi_spec.VARIANTS))
def test_each_variant_checked_by_the_cdi_layer_matches_its_prediction(host_root, tmp_path, variant):
    spec = _build(host_root, variant)
    rec, _path = _check(host_root, spec, tmp_path)
    predicted = _cdi_spec.VARIANTS[variant]
    if predicted["predicted_layer"] == "cdi":
        assert rec["status"] == FAIL and rec["signature"] == predicted["predicted_signature"], rec["reason"]
    else:
        assert rec["status"] in (PASS, WARN), rec["reason"]
    # this collection's own spec over the driver's files is accounted for in full (cdi.trust.accounted); the one edit
    # that is not is the mount of a file the driver does not have: the CUDA toolkit's stub, a missing or stale file
    unaccounted = [c["observed"] for c in rec["checks"] if c["id"] == "cdi.trust.accounted" and c["status"] == FAIL]
    not_the_drivers = {"stub_libcuda": "/stubs/libcuda.so -> /usr/local/nvidia/lib64/libcuda.so.1",
                       "missing_hostpath": "/libgpuprobe-missing.so.1 -> /usr/local/nvidia/lib64/libgpuprobe-missing.so.1",
                       "stale_library": "/libcuda.so.%s -> /usr/local/nvidia/lib64/libcuda.so.1" % _cdi_spec.STALE_VERSIONS[0]}
    if variant in not_the_drivers:
        assert len(unaccounted) == 1 and not_the_drivers[variant] in unaccounted[0], unaccounted
    else:
        assert unaccounted == []
    warn = set(c["id"] for c in rec["checks"] if c["status"] == WARN)
    expected_warn = {"no_ptxjit_mount": {"cdi.nvidia.ptxjit"}, "no_uvm_node": {"cdi.nvidia.uvm"},
                     "cgroup_read_only": {"cdi.nvidia.cgroup_write"}, "stub_libcuda": {"cdi.nvidia.libcuda"}}
    assert warn == expected_warn.get(variant, set())


def test_variant_details(host_root):
    assert all(n.get("permissions") == "r" for d in _build(host_root, "cgroup_read_only")["devices"]
               for n in d["containerEdits"]["deviceNodes"])
    assert _build(host_root, "file_mode_0000")["devices"][0]["containerEdits"]["deviceNodes"][0]["fileMode"] == 0
    stale = [m["hostPath"] for m in _build(host_root, "stale_library")["containerEdits"]["mounts"] if "libcuda" in m["hostPath"]]
    assert stale[0].endswith("libcuda.so.470.256.02") and not os.path.exists(stale[0])
    stub = [m["hostPath"] for m in _build(host_root, "stub_libcuda")["containerEdits"]["mounts"] if m["containerPath"].endswith("libcuda.so.1")]
    assert stub[0].endswith("/stubs/libcuda.so")
    with pytest.raises(_cdi_spec.SpecError, match="does not exist"):
        _build(host_root, "stub_libcuda", stub_libcuda="/nope/libcuda.so")


@pytest.mark.parametrize("run_id", ["", "../x", "a/b", "x" * 65, "-a"])
def test_bad_run_ids_refused(run_id, tmp_path):
    with pytest.raises(_cdi_spec.SpecError):
        _cdi_spec.write_spec({}, str(tmp_path), run_id)


def _dead_pid():
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_write_remove_sweep_by_ownership(host_root, tmp_path):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
    d = tmp_path / "run-cdi"
    me = {"host": _owner.this_host(), "pid": os.getpid()}
    path = _cdi_spec.write_spec(_build(host_root, owner=_owner.normalize(me)), str(d), "t1")
    assert path == str(d / "gpuprobe-t1.yaml") and stat.S_IMODE(os.stat(path).st_mode) == 0o644
    dead = {"host": _owner.this_host(), "pid": _dead_pid(), "started": 1}
    _cdi_spec.write_spec(_cdi_spec.build_spec("old", root=str(host_root), driver_root="/usr/local/nvidia", owner=dead),
                         str(d), "old")
    remote = {"host": "controller.example", "pid": os.getpid()}  # another host's pid: only the age can decide
    _cdi_spec.write_spec(_cdi_spec.build_spec("far", root=str(host_root), driver_root="/usr/local/nvidia", owner=remote),
                         str(d), "far")
    (d / "gpuprobe-foreign.yaml").write_text("kind: someone.else/gpu\n")
    # a spec of ANOTHER kind whose name and env even mention our run ids: never ours
    (d / "gpuprobe-t2.yaml").write_text("cdiVersion: 0.5.0\nkind: vendor.example/gpu\ncontainerEdits:\n"
                                        "  env: [GPUPROBE_RUN_ID=t2, GPUPROBE_OWNER=x:1:-]\ndevices: []\n")
    out = _cdi_spec.sweep_specs(str(d))
    assert out["removed"] == [str(d / "gpuprobe-old.yaml")]
    assert sorted(x["run_id"] for x in out["live"]) == ["far", "t1"]
    assert "running" in [x for x in out["live"] if x["run_id"] == "t1"][0]["why"]
    # older than max_age: over, whoever owns it
    aged = _cdi_spec.sweep_specs(str(d), max_age=10, now=__import__("time").time() + 11, keep="t1")
    assert aged["removed"] == [str(d / "gpuprobe-far.yaml")]
    # the caller's own run is over by definition
    assert _cdi_spec.sweep_specs(str(d), run_id="t1")["removed"] == [path]
    assert _cdi_spec.remove_spec(str(d), "t1") is False
    assert sorted(os.listdir(str(d))) == ["gpuprobe-foreign.yaml", "gpuprobe-t2.yaml"]


def test_kind_is_unique_per_run_and_valid():
    kinds = set(_cdi_spec.run_kind(r) for r in ("a", "a-", "a_", "a.", "A1", "20261203-1"))
    assert len(kinds) == 6
    for kind in kinds:
        vendor, cls = kind.split("/")
        assert vendor == "gpuprobe.local" and _cdi_names.validate_vendor_or_class(cls, "class") is None


@pytest.mark.parametrize("gpus, msg", [(["abc"], "not a GPU node"), (["-1"], "not a GPU node"), (["/dev/sda"], "not a GPU node")])
def test_bad_gpus_are_a_clear_error(host_root, gpus, msg):
    with pytest.raises(_cdi_spec.SpecError, match=msg):
        _build(host_root, gpus=gpus)


def _main(module, args, capsys):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            module.main()
    return json.loads(capsys.readouterr().out)


def test_cdi_spec_module_check_mode_present_absent(host_root, tmp_path, capsys):
    d = tmp_path / "m"
    args = {"run_id": "m1", "spec_dir": str(d), "root": str(host_root), "driver_root": "/usr/local/nvidia",
            "variant": "no_uvm_node"}
    out = _main(cdi_spec, dict(args, _ansible_check_mode=True), capsys)
    assert out["changed"] is True and not d.exists()
    assert out["prediction"] == {"layer": "compute", "signature": "compute.cuda.CUDA_ERROR_UNKNOWN",
                                 "description": _cdi_spec.VARIANTS["no_uvm_node"]["description"], "probe_user": None}
    out = _main(cdi_spec, args, capsys)
    assert out["changed"] is True and os.path.exists(out["path"])
    assert out["kind"] == "gpuprobe.local/gpu-m1"
    assert out["devices"] == ["gpuprobe.local/gpu-m1=0", "gpuprobe.local/gpu-m1=1", "gpuprobe.local/gpu-m1=all"]
    assert _main(cdi_spec, args, capsys)["changed"] is False
    facts = _main(cdi_facts, {"spec_dirs": [str(d)], "discover_runtime_dirs": False, "devices": ["gpuprobe.local/gpu-m1=all"]}, capsys)
    record = facts["ansible_facts"]["gpuprobe_cdi"]
    assert facts["changed"] is False and validate_record(record) == []
    assert record["evidence"]["requested_devices"] == ["gpuprobe.local/gpu-m1=all"]
    out = _main(cdi_spec, dict(args, state="absent"), capsys)
    assert out["changed"] is True and not os.path.exists(out["path"])
    assert _main(cdi_spec, dict(args, state="absent"), capsys)["changed"] is False


@pytest.mark.parametrize("extra, msg", [
    ({"gpus": ["abc"]}, "gpus entry 'abc' is not a GPU node"),
    ({"root": "/nonexistent/gpuprobe-root"}, "root /nonexistent/gpuprobe-root is not a directory"),
    ({"max_age": -1}, "max_age must be an integer >= 0"),
    ({"owner": {"pid": "x"}}, "owner.pid 'x' is not an integer"),
    ({"owner": {"pid": 1, "shell": "y"}}, "owner has unknown keys shell"),
])
def test_cdi_spec_module_bad_options_fail_cleanly(host_root, tmp_path, capsys, extra, msg):
    args = {"run_id": "m1", "spec_dir": str(tmp_path / "m"), "root": str(host_root), "driver_root": "/usr/local/nvidia"}
    args.update(extra)
    out = _main(cdi_spec, args, capsys)
    assert out["failed"] is True and msg in out["msg"] and "Traceback" not in json.dumps(out)


def test_cdi_spec_module_refuses_etc_cdi(host_root, capsys):
    out = _main(cdi_spec, {"run_id": "m1", "spec_dir": "/etc/cdi", "root": str(host_root), "driver_root": "/usr/local/nvidia"}, capsys)
    assert out["failed"] is True and "refusing to write CDI specs under /etc/cdi" in out["msg"]


def test_module_variant_choices_are_the_catalogue():
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import VARIANTS  # the module's choices
    doc = __import__("yaml").safe_load(cdi_spec.DOCUMENTATION)
    assert doc["options"]["variant"]["choices"] == list(VARIANTS)
    assert sorted(doc["options"]["variant"]["choices"]) == sorted(_cdi_spec.VARIANTS)


@pytest.mark.parametrize("content", ["cdiVersion: 0.5.0\nkind: vendor.example/gpu\ndevices: []\n",
                                     "cdiVersion: 0.5.0\nkind: gpuprobe.local/gpu-other\ncontainerEdits:\n  env: [GPUPROBE_RUN_ID=other]\n"
                                     "devices: []\n", "not: [valid"])
def test_a_file_of_our_name_that_is_not_this_runs_spec_is_never_overwritten_or_removed(host_root, tmp_path, capsys, content):
    d = tmp_path / "m"
    d.mkdir()
    (d / "gpuprobe-m1.yaml").write_text(content)
    args = {"run_id": "m1", "spec_dir": str(d), "root": str(host_root), "driver_root": "/usr/local/nvidia"}
    for state in ("present", "absent"):
        out = _main(cdi_spec, dict(args, state=state), capsys)
        assert out["failed"] is True and "is not the self-built spec of run m1" in out["msg"], out
    assert (d / "gpuprobe-m1.yaml").read_text() == content


@pytest.mark.parametrize("max_age", [0, 5])
def test_a_spec_of_a_live_owner_is_never_swept_by_age(host_root, tmp_path, max_age):
    """issue 19.4: sweep_specs (and cdi_spec's sweep before writing, and probe_cleanup) really deleted the spec of a
    running run once it was older than max_age; docs/safety.md suggested max_age=0."""
    import subprocess
    import sys
    import time
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        d = tmp_path / "run-cdi"
        owner = _owner.normalize({"pid": proc.pid})
        path = _cdi_spec.write_spec(_cdi_spec.build_spec("busy", root=str(host_root), driver_root="/usr/local/nvidia",
                                                         owner=owner, created=int(time.time()) - 10000), str(d), "busy")
        out = _cdi_spec.sweep_specs(str(d), max_age=max_age)
        assert out["removed"] == [] and [x["run_id"] for x in out["live"]] == ["busy"] and os.path.exists(path)
        swept = _runtime_cleanup.cleanup(runtime="podman", spec_dir=str(d), max_age=max_age, tmp_dir=str(tmp_path))
        assert swept["specs"] == [] and os.path.exists(path)
        assert [x for x in swept["live"] if x.get("spec") == path][0]["why"].endswith("is running")
    finally:
        proc.kill()
        proc.wait()
    assert _cdi_spec.sweep_specs(str(d), max_age=max_age)["removed"] == [path]  # its owner is gone now


def test_two_live_runs_given_the_same_run_id_never_share_or_remove_a_spec(host_root, tmp_path):
    """issue 19 (also-check): two overlapping runs given the same fixed verify_run_id wrote one spec file and each
    run's cleanup could remove the other's. The second run is refused while the first one's owner lives."""
    import subprocess
    import sys
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
    d = str(tmp_path / "run-cdi")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        first = _owner.normalize({"pid": other.pid})
        path = _cdi_spec.ensure_spec("fixed", spec_dir=d, root=str(host_root), driver_root="/usr/local/nvidia",
                                     owner=first)["path"]
        with open(path) as f:
            text = f.read()
        for state in ("present", "absent"):
            with pytest.raises(_cdi_spec.SpecError, match="run id fixed is in use by a live run"):
                _cdi_spec.ensure_spec("fixed", state=state, spec_dir=d, root=str(host_root), driver_root="/usr/local/nvidia")
        swept = _runtime_cleanup.cleanup(run_id="fixed", runtime="podman", spec_dir=d, tmp_dir=str(tmp_path))
        assert swept["specs"] == [] and "also used by the live run" in swept["live"][-1]["why"]
        with open(path) as f:
            assert f.read() == text  # neither rewritten nor removed
        # its own owner still removes it
        assert _cdi_spec.ensure_spec("fixed", state="absent", spec_dir=d, owner=first)["changed"] is True
    finally:
        other.kill()
        other.wait()


def test_a_run_id_whose_previous_owner_is_gone_is_free_again(host_root, tmp_path):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
    d = str(tmp_path / "run-cdi")
    gone = {"host": _owner.this_host(), "pid": _dead_pid(), "started": 1}
    _cdi_spec.ensure_spec("fixed", spec_dir=d, root=str(host_root), driver_root="/usr/local/nvidia", owner=gone)
    out = _cdi_spec.ensure_spec("fixed", spec_dir=d, root=str(host_root), driver_root="/usr/local/nvidia")
    assert out["owner"]["pid"] != gone["pid"]


@pytest.fixture
def protected(tmp_path, monkeypatch):
    """A stand-in for /etc/cdi (the real one is never written, nor created, by a test) reached through other paths:
    a bind mount of it, a bind mount of its parent, a symlink, untidy spellings."""
    import subprocess
    etc = tmp_path / "etc"
    (etc / "cdi").mkdir(parents=True)
    monkeypatch.setattr(_cdi_spec, "PROTECTED_SPEC_DIR", str(etc / "cdi"))
    mounts = []
    if os.geteuid() == 0:
        for src, dst in ((etc / "cdi", tmp_path / "bind-of-cdi"), (etc, tmp_path / "bind-of-etc")):
            dst.mkdir()
            if subprocess.run(["mount", "--bind", str(src), str(dst)], capture_output=True, check=False).returncode == 0:
                mounts.append(dst)
    os.symlink(str(etc / "cdi"), str(tmp_path / "link-to-cdi"))
    yield tmp_path, mounts
    for dst in mounts:
        subprocess.run(["umount", str(dst)], check=False)


def test_the_protected_dir_is_refused_by_every_path_to_it(protected):
    """issue 19 (also-check): refuses() compared path strings, so /etc/cdi reached through a bind mount passed."""
    base, mounts = protected
    cdi = str(base / "etc" / "cdi")
    candidates = [cdi, cdi + "/", cdi + "/sub", str(base / "etc" / "." / "cdi"), str(base / "etc" / "x" / ".." / "cdi"),
                  str(base / "link-to-cdi"), str(base / "link-to-cdi" / "sub" / "deeper")]
    if os.geteuid() == 0:
        assert len(mounts) == 2, "bind mounts are needed for this test as root"
        candidates += [str(mounts[0]), str(mounts[0] / "new-sub"), str(mounts[1] / "cdi"), str(mounts[1] / "cdi" / "x")]
    for candidate in candidates:
        assert _cdi_spec.refuses(candidate), candidate
        with pytest.raises(_cdi_spec.SpecError, match="refusing to write CDI specs under"):
            _cdi_spec.check_options(candidate)
    assert os.listdir(cdi) == []
    for fine in (str(base / "run-cdi"), str(base / "etc"), str(base / "etc" / "cdi2")):
        assert _cdi_spec.refuses(fine) is None, fine
