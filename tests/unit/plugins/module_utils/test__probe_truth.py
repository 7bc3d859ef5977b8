"""Issue 18, the probe's side: no PASS the probe did not earn. Each class is parametrised over its members:
output bound to the run (token, noise, cross-check), a kernel the caller draws per run, the proof bound to the
host's driver (compute.driver.binding), a crash that is not a timeout, the host control on the container's GPUs,
the loader's words on a failed dlopen, MIG proofs (shared containers, drivers < 470). Probe output comes from the
real probe code running on a fake libcuda (tests/unit/fixtures/cuda)."""
import hashlib
import io
import contextlib
import json
import os
import stat
import subprocess
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import digest as _common_digest
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import assess as _compute_assess
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import catalogue as _compute_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import host_control as _compute_host_control
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "cuda"))
import fakecuda  # noqa: E402  pylint: disable=wrong-import-position

U0 = "GPU-00000000-1111-2222-3333-444444444444"
U1 = "GPU-11111111-1111-2222-3333-444444444444"
TOKEN = "0123456789abcdef"


def _idle(*uuids, **evidence):
    gpus = [{"index": i, "uuid": u, "compute_processes": []} for i, u in enumerate(uuids)]
    ev = {"nvml": dict({"ok": True, "gpus": gpus}, **evidence.pop("nvml", {}))}
    ev.update(evidence)
    return {"evidence": ev}


def _expected(*uuids):
    return [{"uuid": u, "index": i, "minor": i, "name": "NVIDIA H200", "mig_uuid": None} for i, u in enumerate(uuids)]


def _control(status="PASS"):
    def runner(_host_record, _timeout, _uuid, only_uuids=None, idle_uuids=None):  # pylint: disable=unused-argument
        return {"status": status, "reason": None if status == "PASS" else "x", "python": "python3", "steps": [],
                "facts": {}}, {}, {}
    return runner


def _lines(items):
    return "".join(json.dumps(i) + "\n" for i in items)


def _with_token(lib, config=None, token=TOKEN):
    """The real probe's lines with this run's token (emit writes it on every line once main set it)."""
    saved = _probe.TOKEN
    _probe.TOKEN = token
    try:
        return fakecuda.probe_lines(lib, config)
    finally:
        _probe.TOKEN = saved


def _container(text, token=TOKEN, kernel=None, **extra):
    probe = _probe_contract.parse_output(text, token=token, kernel=kernel)
    probe.update({"executed": True, "cdi_devices": ["k/gpu=0"], "runtime": "podman 4.3.1", "container_name": "gpuprobe-t-1",
                  "timed_out": False, "rc": 0})
    probe.update(extra)
    return probe


def _record(probe, host=None, expected=(U0,), control="PASS", **kw):
    record = _compute_layer.record(probe, host_record=host or _idle(U0, U1), host_runner=_control(control),
                                   expected_gpus=_expected(*expected), **kw)
    assert validate_record(record) == []
    return record


def _checks(record, check_id):
    return [c for c in record["checks"] if c["id"] == check_id]


# ---- output bound to this run ---------------------------------------------------------------------------------

FORGED = [
    ("wrong token", {"kind": "step", "step": "verify", "ok": True, "device": 0, "uuid": U0, "token": "f" * 16}),
    ("no token", {"kind": "step", "step": "verify", "ok": True, "device": 0, "uuid": U0}),
    ("token of another type", {"kind": "done", "token": 1234}),
    ("a forged done", {"kind": "done", "token": "nope"}),
    ("a JSON list", [{"kind": "done", "token": TOKEN}]),
    ("not JSON", "Fatal error in a library: all is well"),
]


@pytest.mark.parametrize("name,line", FORGED, ids=[f[0] for f in FORGED])
def test_only_lines_with_this_runs_token_are_read_the_rest_is_counted_noise(name, line):  # pylint: disable=unused-argument
    """A run that failed at cuInit, with a foreign line that claims success: the line changes nothing."""
    real = _with_token(fakecuda.FakeCuda([U0], fail={("cuInit", None): 999}))
    text = real.replace("\n", "\n" + (line if isinstance(line, str) else json.dumps(line)) + "\n", 1)
    parsed = _probe_contract.parse_output(text, token=TOKEN)
    clean = _probe_contract.parse_output(real, token=TOKEN)
    assert parsed["noise_count"] == 1 and len(parsed["noise"]) == 1
    assert (parsed["steps"], parsed["complete"], parsed["facts"]) == (clean["steps"], clean["complete"], clean["facts"])
    record = _record(_container(text))
    assert record["status"] == "FAIL" and record["signature"] == "compute.cuda.CUDA_ERROR_UNKNOWN"
    assert "1 noise lines ignored" in _checks(record, "compute.probe.output")[0]["observed"]


def test_every_line_of_the_real_probe_carries_its_token(tmp_path):
    """The real script run as the runtime runs it (python3 -I -S probe.py CONFIG): every line has the token."""
    config = dict(_probe_contract.new_run_keys(), compute=False, nodes=[])
    proc = subprocess.run([sys.executable] + list(_probe_contract.ISOLATED_FLAGS) + [_probe.__file__, json.dumps(config)],
                          capture_output=True, text=True, timeout=60, check=True)
    items = [json.loads(line) for line in proc.stdout.splitlines()]
    assert items and all(i["token"] == config["token"] for i in items)
    parsed = _probe_contract.parse_output(proc.stdout, token=config["token"])
    assert parsed["complete"] and parsed["noise_count"] == 0 and parsed["start"]["isolated"] is True
    assert _probe_contract.parse_output(proc.stdout, token="0" * 16)["start"] is None  # another run's token reads nothing


def _tamper_dlopen_path(probe):
    probe["inventory"]["libraries"] = {_probe.LIBCUDA: {"ok": True, "path": "/other/libcuda.so.1",
                                                        "realpath": "/other/libcuda.so.1"}}


def _tamper_digest(probe):
    probe["steps"][0]["identity"] = {"sha256": "a" * 64}
    probe["inventory"]["libraries"] = {_probe.LIBCUDA: dict(probe["steps"][0], identity={"sha256": "b" * 64})}


def _tamper_unlisted_device(probe):
    probe["steps"].append(dict(probe["steps"][-1], device=7, uuid=U1))


def _tamper_uuid(probe):
    step = next(s for s in probe["steps"] if s.get("step") == "verify")
    step["uuid"] = U1


def _tamper_kernel(probe):
    step = next(s for s in probe["steps"] if s.get("step") == "verify")
    step["a"], step["b"] = 3, 7


def _tamper_version(probe):
    probe["facts"].pop("cuda_driver_api")


TAMPERED = [
    ("dlopen step names another file than the inventory", _tamper_dlopen_path, "the dlopen step loaded path"),
    ("dlopen step digest differs from the inventory's", _tamper_digest, "digest differs"),
    ("a step of a device the list does not hold", _tamper_unlisted_device, "which the device list does not hold"),
    ("a step naming another UUID than the list", _tamper_uuid, "names UUID"),
    ("a kernel verified with other a and b", _tamper_kernel, "this run asked for a=5 b=11"),
    ("cuDriverGetVersion without its version", _tamper_version, "no version was reported"),
]


@pytest.mark.parametrize("name,tamper,said", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_step_lines_that_contradict_the_probes_own_observations_fail(name, tamper, said):  # pylint: disable=unused-argument
    config = {"a": 5, "b": 11}
    probe = _container(_with_token(fakecuda.FakeCuda([U0]), config), kernel=(5, 11))
    assert _record(dict(probe))["status"] == "PASS"  # untouched: it verifies
    tamper(probe)
    probe["inconsistent"] = _probe_contract.cross_check(probe, (5, 11))
    record = _record(probe)
    assert record["status"] == "FAIL"
    assert any(said in c["observed"] for c in _checks(record, "compute.probe.output") if c["status"] == "FAIL")


# ---- a kernel drawn per run -----------------------------------------------------------------------------------

@pytest.mark.parametrize("a,b", [(5, 11), (2, 1), (65001, 65536), (3, 8), (4, 7)])
def test_a_library_that_fakes_the_old_fixed_kernel_fails_verification(a, b):
    honest = _record(_container(_with_token(fakecuda.FakeCuda([U0]), {"a": a, "b": b}), kernel=(a, b)))
    assert honest["status"] == "PASS"
    canned = _record(_container(_with_token(fakecuda.FakeCuda([U0], canned=True), {"a": a, "b": b}), kernel=(a, b)))
    assert canned["status"] == "FAIL" and canned["signature"] == "compute.verify.mismatch"
    verify = _checks(canned, "compute.kernel.verify")[0]
    assert verify["expected"] == "out[i] == i*%d+%d for every i" % (a, b)


def test_run_keys_differ_per_run():
    keys = [_probe_contract.new_run_keys() for _run in range(20)]
    assert len(set(k["token"] for k in keys)) == 20
    assert len(set((k["a"], k["b"]) for k in keys)) > 1
    assert all(2 <= k["a"] <= 65001 and 1 <= k["b"] <= 65536 for k in keys)


# ---- the proof bound to the host's driver ---------------------------------------------------------------------

DRIVER = "580.159.04"
CONTENT = b"\x7fELF the host driver's libcuda " * 100


def _driver_root(tmp_path, content=CONTENT, name="libcuda.so.%s" % DRIVER):
    lib = tmp_path / "drv" / "lib64"
    lib.mkdir(parents=True, exist_ok=True)
    (lib / name).write_bytes(content)
    return str(tmp_path)


def _host(root, cuda=12080, nvml=True, driver_root="/drv", version=DRIVER):
    nv = {"cuda_driver_version_int": cuda, "driver_version": version} if nvml else {
        "ok": False, "error": "pynvml cannot be imported", "cuda_driver_version_int": None, "driver_version": None}
    return _idle(U0, nvml=nv, root=root, driver_root=driver_root,
                 kernel_module={"proc_driver_version": version, "sys_module_version": version})


LIBDIR = "/usr/lib/x86_64-linux-gnu"


def _mapped(path, content, why="name"):
    """One entry of the probe's mapped_libraries line (None content: not hashed)."""
    identity = {"path": path, "error": "EACCES: Permission denied"} if content is None else {
        "path": path, "size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    return {"path": path, "realpath": path, "why": why, "identity": identity}


def _loaded(content=CONTENT, cuda=None, mapped=()):
    """A container run whose libcuda has ``content``; ``mapped``: the other driver libraries its probe mapped
    ((path, content) each; None: no mapped_libraries line at all, as an older probe)."""
    probe = _container(_with_token(fakecuda.FakeCuda([U0])))
    probe["steps"][0]["identity"] = {"path": "%s/libcuda.so.%s" % (LIBDIR, DRIVER), "size": len(content),
                                     "sha256": hashlib.sha256(content).hexdigest()}
    if mapped is not None:
        probe["mapped_libraries"] = {"libraries": [_mapped("%s/libcuda.so.%s" % (LIBDIR, DRIVER), content)] + [
            _mapped(path, data, why) for path, data, why in mapped]}
    if cuda is not None:
        probe["facts"]["cuda_driver_api"] = cuda
    return probe


BINDING = [
    ("the host's file and version", {}, {}, "PASS", "PASS"),
    ("another file (same version)", {"content": b"a fake libcuda that answers success"}, {}, "FAIL", "FAIL"),
    ("another CUDA driver version", {"cuda": 12020}, {}, "FAIL", "FAIL"),
    ("both differ", {"content": b"other", "cuda": 13000}, {}, "FAIL", "FAIL"),
    ("no NVML on the host", {}, {"nvml": False}, "NOT_RUN", "PASS"),
    ("no driver root file for the running version", {}, {"version": "590.1"}, "NOT_RUN", "PASS"),
    ("no driver root", {}, {"driver_root": None}, "NOT_RUN", "PASS"),
]


@pytest.mark.parametrize("name,container,host,binding,status", BINDING, ids=[b[0] for b in BINDING])
def test_the_container_driver_must_be_the_hosts(tmp_path, name, container, host, binding, status):  # pylint: disable=unused-argument,too-many-arguments
    root = _driver_root(tmp_path)
    # without NVML the busy state is unknown too: allow_busy_gpu lets the probe run, the binding cannot be told
    record = _record(_loaded(**container), host=_host(root, **host), allow_busy_gpu=not host.get("nvml", True))
    checks = _checks(record, "compute.driver.binding")
    assert [c["status"] for c in checks] == [binding]
    assert record["status"] == status
    if binding == "FAIL":
        # the host control passed: the injection (refined to the spec by the verdict's cdi evidence)
        assert record["signature"] == "compute.driver.binding" and record["points_to"] == "runtime"
        said = checks[0]["observed"]
        assert ("is not the driver root's" in said) == ("content" in container)
        assert ("cuDriverGetVersion" in said) == ("cuda" in container)
    if binding == "NOT_RUN":
        assert "unknown on the host" in checks[0]["observed"]
    run = record["evidence"]["driver_binding"]["runs"][0]
    assert run["status"] == binding


NVML = b"\x7fELF the host driver's NVML " * 50
PTXJIT = b"\x7fELF the host driver's JIT compiler " * 50
HOST_FILES = {"libnvidia-ml": NVML, "libnvidia-ptxjitcompiler": PTXJIT}

LIBRARIES = [
    # (name, mapped besides libcuda: (container path, content, why), driver root files, binding, in the observation)
    ("NVML and the JIT compiler the driver root's",
     [("%s/libnvidia-ml.so.1" % LIBDIR, NVML, "name, spec mount"), ("%s/libnvidia-ptxjitcompiler.so.1" % LIBDIR, PTXJIT, "name")],
     HOST_FILES, "PASS", "every driver library mapped in the probe is the driver root's: libcuda.so.%s, "
                         "libnvidia-ml.so.1, libnvidia-ptxjitcompiler.so.1" % DRIVER),
    ("a versioned name (nvidia-ctk's symlink resolved)", [("%s/libnvidia-ml.so.%s" % (LIBDIR, DRIVER), NVML, "name")],
     HOST_FILES, "PASS", "libnvidia-ml.so.%s" % DRIVER),
    ("an impostor NVML", [("%s/libnvidia-ml.so.1" % LIBDIR, b"\x7fELF code of the spec's own", "name, spec mount")],
     HOST_FILES, "FAIL", "the loaded %s/libnvidia-ml.so.1 (" % LIBDIR),
    ("an impostor JIT compiler", [("%s/libnvidia-ptxjitcompiler.so.1" % LIBDIR, b"other", "name")],
     HOST_FILES, "FAIL", "is not the driver root's /drv/lib64/libnvidia-ptxjitcompiler.so.%s" % DRIVER),
    ("the driver root has no NVML of the running version", [("%s/libnvidia-ml.so.1" % LIBDIR, NVML, "name")],
     {"libnvidia-ptxjitcompiler": PTXJIT}, "NOT_RUN", "no libnvidia-ml.so.%s in the driver root /drv" % DRIVER),
    ("a spec-mounted library of no driver", [("/opt/evil/libevil.so", b"evil", "spec mount")],
     HOST_FILES, "NOT_RUN", "/opt/evil/libevil.so: nothing of the host's to compare with: no libevil.so.%s" % DRIVER),
    ("a library the probe could not hash", [("%s/libnvidia-ml.so.1" % LIBDIR, None, "name")],
     HOST_FILES, "NOT_RUN", "the probe did not hash %s/libnvidia-ml.so.1: EACCES" % LIBDIR),
    ("no mapped_libraries line (an older probe)", None, HOST_FILES, "NOT_RUN", "the probe reported no mapped libraries"),
    ("an impostor beside one not hashed", [("%s/libnvidia-ml.so.1" % LIBDIR, b"x", "name"),
                                           ("%s/libnvidia-ptxjitcompiler.so.1" % LIBDIR, None, "name")],
     HOST_FILES, "FAIL", "libnvidia-ml.so.1"),
]


@pytest.mark.parametrize("name,mapped,files,binding,said", LIBRARIES, ids=[x[0] for x in LIBRARIES])
def test_every_driver_library_the_probe_mapped_must_be_the_hosts(tmp_path, name, mapped, files, binding, said):  # noqa: E501 pylint: disable=unused-argument,too-many-arguments
    """Issue 42 item 3: the binding covers NVML, the JIT compiler and anything the probe's process mapped from a spec
    mount: the same content as the driver root's libX.so.<driver version>, else FAIL naming it; no such host file
    (or no digest) NOT_RUN naming it, never PASS."""
    root = _driver_root(tmp_path)
    for stem, content in files.items():
        _driver_root(tmp_path, content, name="%s.so.%s" % (stem, DRIVER))
    record = _record(_loaded(mapped=mapped), host=_host(root))
    checks = _checks(record, "compute.driver.binding")
    assert [c["status"] for c in checks] == [binding] and said in checks[0]["observed"], checks
    run = record["evidence"]["driver_binding"]["runs"][0]
    assert run["status"] == binding
    if binding == "FAIL":
        assert record["status"] == "FAIL" and record["signature"] == "compute.driver.binding"
        assert checks[0]["subject"] == "container: %s" % ", ".join(
            os.path.basename(r["path"]) for r in run["libraries"] if r["status"] == "FAIL")
    if mapped is not None:  # every row names the driver root file it was compared with, and the host side holds it
        host = record["evidence"]["driver_binding"]["host"]["libraries"]
        assert [r["host_name"] for r in run["libraries"]][:1] == ["libcuda.so.%s" % DRIVER]
        assert all(r["host_name"] in host for r in run["libraries"] if r["host_name"])


def test_an_old_probe_without_a_digest_cannot_bind(tmp_path):
    probe = _container(_with_token(fakecuda.FakeCuda([U0])))
    record = _record(probe, host=_host(_driver_root(tmp_path)))
    assert [c["status"] for c in _checks(record, "compute.driver.binding")] == ["NOT_RUN"]


def test_the_host_file_digest_is_cached_by_identity(tmp_path):
    root = _driver_root(tmp_path)
    path = os.path.join(root, "drv", "lib64", "libcuda.so.%s" % DRIVER)
    first = _common_digest.file_digest(path)
    second = _common_digest.file_digest(path)
    assert first["sha256"] == hashlib.sha256(CONTENT).hexdigest() and not first["cached"] and second["cached"]
    with open(path, "ab") as f:  # another size: hashed again
        f.write(b"x")
    third = _common_digest.file_digest(path)
    assert not third["cached"] and third["sha256"] == hashlib.sha256(CONTENT + b"x").hexdigest()


def test_the_probe_records_the_loaded_files_identity(tmp_path):
    path = tmp_path / "libx.so"
    path.write_bytes(CONTENT)
    ident = _probe.file_identity(str(path))
    st = os.stat(str(path))
    assert (ident["size"], ident["dev"], ident["ino"]) == (len(CONTENT), st.st_dev, st.st_ino)
    assert ident["sha256"] == hashlib.sha256(CONTENT).hexdigest() and ident["sha256_ms"] >= 0
    assert "error" in _probe.file_identity(str(tmp_path / "absent"))


# ---- a crash is not a timeout ---------------------------------------------------------------------------------

def _cut(text, after_step=None, begin=None):
    """The probe's lines up to (and with) the first step ``after_step``, plus a begin line of ``begin``."""
    out = []
    for line in text.splitlines():
        item = json.loads(line)
        if item.get("kind") == "done":
            continue
        out.append(line)
        if after_step and item.get("kind") == "step" and item.get("step") == after_step:
            break
    if begin:
        out.append(json.dumps({"kind": "begin", "step": begin, "token": TOKEN}))
    return "\n".join(out) + "\n"


CRASHES = [
    ("SIGSEGV after a verified kernel", "verify", None, 139, True, "after verify: SIGSEGV (exit status 139)"),
    ("SIGABRT inside cuInit", "dlopen", "cuInit", 134, True, "in cuInit (begun, never returned): SIGABRT"),
    ("SIGKILL (out of memory) in cuModuleLoadData", "cuCtxSetCurrent", "cuModuleLoadData", 137, True, "SIGKILL"),
    ("the host probe killed by SIGSEGV", "verify", None, -11, False, "SIGSEGV (exit status -11)"),
    ("a plain non-zero exit", "cuInit", None, 1, True, "after cuInit: exit status 1"),
]


@pytest.mark.parametrize("name,after,begin,rc,in_container,said", CRASHES, ids=[c[0] for c in CRASHES])
def test_a_crash_names_its_step_and_signal_and_is_not_a_timeout(  # pylint: disable=unused-argument,too-many-arguments
        name, after, begin, rc, in_container, said):
    text = _cut(_with_token(fakecuda.FakeCuda([U0])), after, begin)
    probe = _container(text, rc=rc, where="container" if in_container else "host")
    outcome = _compute_assess.assess(probe, False, 30)
    assert outcome["signature"] == "compute.probe.crashed" and said in outcome["reason"]
    if in_container:
        record = _record(probe)
        assert record["status"] == "FAIL" and record["signature"] == "compute.probe.crashed"
        assert "within" not in record["reason"]


def test_a_kill_at_the_timeout_stays_a_timeout():
    text = _cut(_with_token(fakecuda.FakeCuda([U0])), "dlopen", "cuInit")
    record = _record(_container(text, rc=None, timed_out=True))
    assert record["signature"] == "compute.timeout"


def test_a_non_zero_exit_after_the_done_line_is_a_warn_not_a_failure():
    record = _record(_container(_with_token(fakecuda.FakeCuda([U0])), rc=139))
    assert record["status"] == "WARN" and [r["status"] for r in record["evidence"]["gpus"]] == ["PASS"]
    assert [c["status"] for c in _checks(record, "compute.probe.finished")] == ["WARN"]


# ---- the host control proves the container's GPUs -------------------------------------------------------------

@pytest.mark.parametrize("name", ["CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_MPS_PIPE_DIRECTORY",
                                  "CUDA_MPS_LOG_DIRECTORY", "PYTHONPATH", "PYTHONHOME"])
def test_the_host_control_does_not_inherit_gpu_selection(name):
    env, _dirs = _compute_host_control.host_control_env(None, environ={name: "1", "PATH": "/bin", "LD_LIBRARY_PATH": "/x"})
    assert name not in env and env["PATH"] == "/bin" and env["LD_LIBRARY_PATH"] == "/x"


def _fake_python(tmp_path):
    """A program named python3 that records its argv and environment and prints a probe that failed at dlopen."""
    record = tmp_path / "seen.json"
    prog = tmp_path / "bin" / "python3"
    prog.parent.mkdir()
    prog.write_text("#!%s\nimport json, os, sys\njson.dump({'argv': sys.argv, 'env': dict(os.environ)}, open(%r, 'w'))\n"
                    "c = json.loads(sys.argv[-1])\n"
                    "print(json.dumps({'kind': 'start', 'compute': True, 'token': c['token']}))\n" % (sys.executable, str(record)))
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    return str(prog), record


def test_the_real_host_control_runs_isolated_without_cuda_variables(tmp_path, monkeypatch):
    prog, seen = _fake_python(tmp_path)
    for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"):
        monkeypatch.setenv(key, "1")
    result, _parsed, _outcome = _compute_host_control.run_host_control(None, 30, python=prog, only_uuids=[U0, U1])
    data = json.loads(seen.read_text())
    assert data["argv"][1:3] == ["-I", "-S"]
    assert "CUDA_VISIBLE_DEVICES" not in data["env"] and "CUDA_DEVICE_ORDER" not in data["env"]
    assert {"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"} <= set(result["env_cleared"])
    assert result["status"] == "FAIL"  # started, listed nothing, no done line
    assert [(g["uuid"], g["status"]) for g in result["gpus"]] == [(U0, "FAIL"), (U1, "FAIL")]


def test_the_host_control_on_this_gpu_less_host_fails_at_dlopen_per_gpu():
    result, _parsed, _outcome = _compute_host_control.run_host_control(None, 60, only_uuids=[U0])
    assert result["status"] == "FAIL" and result["failed_step"] == "dlopen"
    assert result["gpus"] == [{"uuid": U0, "status": "FAIL", "signature": result["signature"], "step": "dlopen",
                               "reason": result["reason"]}]


PARTIAL = [
    ("one of two GPUs not listed by the control", [U0], [U0, U1], {}, "WARN", {U0: "PASS", U1: "FAIL"}),
    ("one GPU busy on the host (not known idle there)", [U0, U1], [U0, U1], {"idle_uuids": [U0]}, "WARN",
     {U0: "PASS", U1: "NOT_RUN"}),
    ("every GPU proven", [U0, U1], [U0, U1], {}, "PASS", {U0: "PASS", U1: "PASS"}),
    ("a GPU failing its kernel on the host", [U0, U1], [U0, U1], {"fail": {("cuLaunchKernel", 1): 719}}, "FAIL",
     {U0: "PASS", U1: "FAIL"}),
]


@pytest.mark.parametrize("name,listed,asked,extra,status,gpus", PARTIAL, ids=[p[0] for p in PARTIAL])
def test_the_host_control_is_pass_only_when_every_gpu_it_was_asked_for_verified(  # pylint: disable=unused-argument,too-many-arguments
        name, listed, asked, extra, status, gpus):
    config = {"only_uuids": asked}
    if extra.get("idle_uuids"):
        config["idle_uuids"] = extra["idle_uuids"]
    parsed = _probe_contract.parse_output(_with_token(fakecuda.FakeCuda(listed, fail=extra.get("fail")), config), token=TOKEN)
    parsed.update(rc=0, where="host")
    outcome = _compute_assess.assess(parsed, False, 30)
    rows, failed_step = _compute_host_control.control_gpus(parsed, asked)
    got, reason = _compute_host_control.control_status(outcome, rows)
    assert got == status and failed_step is None
    assert dict((r["uuid"], r["status"]) for r in rows) == gpus
    if status == "WARN":
        assert reason.startswith("partial: ") and all(u in reason for u, s in gpus.items() if s != "PASS")


def test_a_host_control_failing_globally_names_its_step():
    parsed = _probe_contract.parse_output(_with_token(fakecuda.FakeCuda([U0], fail={("cuInit", None): 100})), token=TOKEN)
    rows, failed_step = _compute_host_control.control_gpus(parsed, [U0])
    assert failed_step == "cuInit" and rows[0]["step"] == "cuInit" and rows[0]["status"] == "FAIL"


def test_compute_record_carries_the_controls_gpus_and_failed_step():
    record = _record(_container(_with_token(fakecuda.FakeCuda([U0]))))
    control = record["evidence"]["host_control"]
    assert "gpus" in control and "failed_step" in control
    off = _compute_layer.record(_container(_with_token(fakecuda.FakeCuda([U0]))), host_record=_idle(U0),
                                host_control=False, expected_gpus=_expected(U0))
    assert off["evidence"]["host_control"]["gpus"] == [] and off["evidence"]["host_control"]["failed_step"] is None


# ---- the loader's words ---------------------------------------------------------------------------------------

DLERRORS = [
    ("/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.34' not found (required by /usr/lib/x86_64-linux-gnu/libcuda.so.1)",
     "image_glibc"),
    ("/lib64/libc.so.6: version `GLIBC_2.28' not found (required by /usr/lib64/libcuda.so.1)", "image_glibc"),
    ("/lib/libm.so.6: version 'GLIBC_2.29' not found (required by libcuda.so.1)", "image_glibc"),
    ("libnvidia-ptxjitcompiler.so.1: cannot open shared object file: No such file or directory", "dependency"),
    ("libfoo.so.2: cannot open shared object file: No such file or directory", "dependency"),
    ("libcuda.so.1: cannot open shared object file: No such file or directory", "libcuda"),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1: invalid ELF header", "libcuda"),
    ("/usr/lib/x86_64-linux-gnu/libcuda.so.1: file too short", "libcuda"),
    ("/usr/lib/libcuda.so.1: wrong ELF class: ELFCLASS32", "libcuda"),
]


@pytest.mark.parametrize("error,klass", DLERRORS)
def test_a_failed_dlopen_says_what_the_loader_said_and_which_class(error, klass):
    assert _probe_contract.dlopen_class(error) == klass
    probe = _container(_lines([{"kind": "start", "compute": True, "token": TOKEN},
                               {"kind": "step", "step": "dlopen", "call": "dlopen(libcuda.so.1)", "ok": False, "rc": None,
                                "name": "DLOPEN_FAILED", "error": error, "token": TOKEN},
                               {"kind": "done", "token": TOKEN}]))
    record = _record(probe)
    assert record["signature"] == "compute.dlopen.%s" % klass
    assert error in record["reason"]  # the loader's words, in the reason's hint
    if klass == "image_glibc":
        assert record["points_to"] == "image" and _compute_catalogue.SIGNATURES[record["signature"]]["points_to"] == "image"


# ---- MIG ------------------------------------------------------------------------------------------------------

class FakeCudaV1(fakecuda.FakeCuda):
    """A driver < 470: only the unversioned cuDeviceGetUuid, which gives a MIG device its parent GPU's UUID."""

    def __init__(self, uuids, parents):
        fakecuda.FakeCuda.__init__(self, uuids)
        self.parents = parents

    def __getattribute__(self, name):
        if name == "cuDeviceGetUuid_v2":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def cuDeviceGetUuid(self, ref, dev):
        raw = bytes.fromhex(_probe.norm_uuid(self.parents[dev.value]).replace("-", ""))
        for i, b in enumerate(raw):
            ref._obj[i] = b  # pylint: disable=protected-access
        return self._rc("cuDeviceGetUuid", dev.value)


MIG_A = "MIG-0a0a0a0a-0000-4000-8000-00000000000a"
MIG_B = "MIG-0b0b0b0b-0000-4000-8000-00000000000b"


def _mig_expected(*migs):
    return [{"uuid": U0, "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": m} for m in migs]


def test_the_probe_records_which_symbol_gave_the_uuid():
    v2 = _probe_contract.parse_output(_with_token(fakecuda.FakeCuda([MIG_A])), token=TOKEN)
    v1 = _probe_contract.parse_output(_with_token(FakeCudaV1([MIG_A], [U0])), token=TOKEN)
    assert v2["facts"]["devices"][0]["uuid_symbol"] == "cuDeviceGetUuid_v2"
    assert v1["facts"]["devices"][0]["uuid_symbol"] == "cuDeviceGetUuid"


@pytest.mark.parametrize("lib,proven", [
    (lambda: fakecuda.FakeCuda([MIG_A]), True),
    (lambda: FakeCudaV1([MIG_A], [U0]), False),      # v1: the parent's UUID, proves no instance
    (lambda: FakeCudaV1([MIG_A], [MIG_A]), False),   # even a v1 answer that looks right is not the _v2 proof
], ids=["v2", "v1-parent-uuid", "v1-mig-uuid"])
def test_a_mig_row_is_proven_only_by_the_v2_symbol(lib, proven):
    expected = _mig_expected(MIG_A)
    record = _compute_layer.record(_container(_with_token(lib())), host_record=_idle(U0), host_runner=_control(),
                                   expected_gpus=expected)
    row = [r for r in record["evidence"]["gpus"] if r["expected"]][0]
    assert (row["status"] == "PASS") is proven
    if not proven:
        assert row["signature"] == "compute.gpu.missing" and record["status"] == "FAIL"


@pytest.mark.parametrize("migs", [[MIG_A, MIG_B], [MIG_A, MIG_B, "MIG-0c0c0c0c-0000-4000-8000-00000000000c"]],
                         ids=["two", "three"])
def test_mig_instances_in_one_shared_container_are_not_run_never_missing(migs):
    record = _compute_layer.record(_container(_with_token(fakecuda.FakeCuda([MIG_A]))), host_record=_idle(U0),
                                   host_runner=_control(), expected_gpus=_mig_expected(*migs))
    rows = [r for r in record["evidence"]["gpus"] if r["expected"]]
    assert rows[0]["status"] == "PASS"
    assert all(r["status"] == "NOT_RUN" and r["signature"] is None and "per_device" in r["reason"] for r in rows[1:])
    assert record["status"] == "WARN" and record["signature"] is None


def test_per_device_containers_prove_each_mig_instance():
    probes = [_container(_with_token(fakecuda.FakeCuda([m]))) for m in (MIG_A, MIG_B)]
    for p, m in zip(probes, (MIG_A, MIG_B)):
        p.update(requested_devices=["k/mig=%s" % m], compute_requested=True)
    record = _compute_layer.record({"executed": True, "containers": probes, "compute_requested": True},
                                   host_record=_idle(U0), host_runner=_control(), expected_gpus=_mig_expected(MIG_A, MIG_B))
    assert [r["status"] for r in record["evidence"]["gpus"] if r["expected"]] == ["PASS", "PASS"]
    assert len(_checks(record, "compute.driver.binding")) == 2  # one per container run


# ---- the inventory resolves paths for the runtime layer ---------------------------------------------------------

def test_resolved_paths_are_the_realpaths_inside(tmp_path):
    (tmp_path / "usr" / "lib64").mkdir(parents=True)
    (tmp_path / "lib64").symlink_to("usr/lib64")
    (tmp_path / "usr" / "lib64" / "libcuda.so.1").write_text("x")
    # a path not there (yet) still resolves through the symlinks that are: where runc would create it
    paths = [str(tmp_path / "lib64" / "libcuda.so.1"), str(tmp_path / "lib64" / "absent"), "relative/path"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            _probe.main(["probe", json.dumps({"compute": False, "resolve_paths": paths, "token": TOKEN})])
    finally:
        _probe.TOKEN = None
    inventory = _probe_contract.parse_output(out.getvalue(), token=TOKEN)["inventory"]
    assert inventory["resolved_paths"] == {paths[0]: str(tmp_path / "usr" / "lib64" / "libcuda.so.1"),
                                           paths[1]: str(tmp_path / "usr" / "lib64" / "absent")}


# ---- two or more MIG devices: one container each ----------------------------------------------------------------

@pytest.mark.parametrize("isolation,devices,migs,want", [
    ("shared", ["k/mig=a", "k/mig=b"], [MIG_A, MIG_B], "per_device"),
    ("shared", ["k/mig=a", "k/mig=b", "k/mig=c"], [MIG_A, MIG_B, "MIG-c"], "per_device"),
    ("shared", ["k/all"], [MIG_A, MIG_B], "shared"),          # one CDI device gives both: rows NOT_RUN instead
    ("shared", ["k/mig=a"], [MIG_A], "shared"),
    ("shared", ["k/gpu=0", "k/gpu=1"], [], "shared"),         # whole GPUs: one process sees them all
    ("per_device", ["k/mig=a", "k/mig=b"], [MIG_A, MIG_B], "per_device"),
])
def test_two_or_more_mig_devices_get_one_container_each(isolation, devices, migs, want):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._node import probe as _node_probe  # pylint: disable=import-outside-toplevel
    got, why = _node_probe.isolation_for(isolation, devices, _mig_expected(*migs) if migs else _expected(U0, U1))
    assert got == want
    assert (why is not None) == (want != isolation)


def test_the_node_probe_runs_mig_devices_per_device(monkeypatch, tmp_path):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._node import probe as _node_probe  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import not_run  # pylint: disable=import-outside-toplevel
    seen = {}

    def runtime_facts(params, check_mode=False):  # pylint: disable=unused-argument
        seen.update(params)
        return not_run("runtime", "not under test"), None
    monkeypatch.setattr(_node_probe, "runtime_record", runtime_facts)
    p = dict((k, v.get("default")) for k, v in _args.NODE_PROBE_ARGSPEC.items())
    spec = tmp_path / "k.yaml"  # the spec the cdi layer read, unchanged since (the probe call rechecks it)
    spec.write_text("cdiVersion: 0.5.0\nkind: k/mig\n")
    digest = hashlib.sha256(spec.read_bytes()).hexdigest()
    p.update(run_id="t-mig", host_control=False, records={"host": None, "cdi": {"layer": "cdi", "status": "PASS", "evidence": {
        "requested_devices": ["k/mig=a", "k/mig=b"], "identity": {"expected_gpus": _mig_expected(MIG_A, MIG_B)},
        "device_sources": {"k/mig=a": str(spec), "k/mig=b": str(spec)}, "files": [{"path": str(spec), "sha256": digest}]}}})
    out = _node_probe.probe(p)
    assert seen["isolation"] == "per_device"
    assert "one CUDA process enumerates a single MIG instance" in out["records"]["runtime"]["evidence"]["isolation_forced"]
