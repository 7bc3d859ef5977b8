"""The spec did it, the runtime is blamed; the right name on the wrong library (issue 32), with REAL podman + runc,
synthetic device nodes (mknod), tiny real ELF libraries built here with gcc (each with a chosen -Wl,-soname) and real
CDI injection from /var/run/cdi. The cdi record comes from the cdi layer on the same spec file, the verdict is the
real one. Each member is tried with the cdi record (the cdi check says it first, ``because``) and without it (the one
rule alone: the edit applied as asked at which the failure sits, named with the runtime's or the loader's words).

- a device node whose cgroup permissions deny the driver's open(O_RDWR): no r, no w, neither;
- a libcuda on a noexec mount, a libcuda mounted where the image's loader does not look;
- the PTX JIT compiler CUDA loads by name (a fake libcuda here dlopens libnvidia-ptxjitcompiler.so.1 at
  cuModuleLoadData and looks up the JIT's entry point, as the driver does): NVML's library mounted under its name (the
  SONAME says so), the JIT compiler on a noexec mount, or where no loader looks.

The lab's files, nodes and env stand in for a driver, and no generator writes them (nor a library at /opt/gpu): the
cdi layer is told they are the site's declared trusted edits (trusted_edits, ``accounted.declaring``); undeclared,
each such node is FAILED_AT_CDI by cdi.trust.accounted and no container starts (``_undeclared``).
"""
import os
import shutil
import subprocess

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from accounted import declaring
from test_attribution_podman import _cdi_record, _node_edits, _records, _statuses, _undeclared, tools  # noqa: F401 pylint: disable=unused-import
from test_runtime_podman import GPU_A, LIB_IN_CONTAINER, idle_host, lab, podman_env, probe_image  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_DRIVER = os.path.join(HERE, "..", "unit", "fixtures", "host", "fake_driver.c")
PTXJIT = "libnvidia-ptxjitcompiler.so.1"
PTXJIT_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu/" + PTXJIT
JIT_ENTRY = "__cuda_CallJitEntryPoint"
# cuModuleLoadData as the driver does it: the PTX JIT compiler is loaded by name, its entry point looked up; without
# it, CUDA_ERROR_JIT_COMPILER_NOT_FOUND (221). The rest of the fake driver (fake_driver.c) answers as a GPU would.
JIT_WRAPPER = r"""
#include <dlfcn.h>
typedef int CUresult;
CUresult fake_module_load(void **module, const void *image);
CUresult cuModuleLoadData(void **module, const void *image) {
    void *jit = dlopen("%s", RTLD_NOW | RTLD_LOCAL);
    if (!jit || !dlsym(jit, "%s")) return 221;
    return fake_module_load(module, image);
}
CUresult cuGetErrorName(CUresult rc, const char **name) { (void)rc; (void)name; return 1; }
""" % (PTXJIT, JIT_ENTRY)


def _cc():
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("needs a C compiler")
    return cc


def _so(path, soname, source):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".c", "w") as f:
        f.write(source)
    subprocess.run([_cc(), "-shared", "-fPIC", "-Wl,-soname,%s" % soname, "-o", path, path + ".c"], check=True,
                   capture_output=True, timeout=120)
    return path


def _jit_libcuda(lab_):
    """A libcuda.so.1 that needs the PTX JIT compiler at cuModuleLoadData (fake_driver.c with the wrapper above)."""
    path = os.path.join(lab_.lib, "jit", "libcuda.so.1")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    wrapper = path + ".wrap.c"
    with open(wrapper, "w") as f:
        f.write(JIT_WRAPPER)
    renamed = path + ".o"  # its own cuModuleLoadData and cuGetErrorName renamed: the wrapper's stand in
    subprocess.run([_cc(), "-c", "-fPIC", "-DcuModuleLoadData=fake_module_load", "-DcuGetErrorName=fake_error_name",
                    "-o", renamed, FAKE_DRIVER], check=True, capture_output=True, timeout=120)
    subprocess.run([_cc(), "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", path, renamed, wrapper, "-ldl"],
                   check=True, capture_output=True, timeout=120)
    return path


def _verdicts(records):
    """The verdict with every record, and with the runtime and compute records alone (the rule, without the cdi
    layer's checks)."""
    alone = dict((k, v) for k, v in records.items() if k in ("runtime", "compute"))
    return node_verdict(records), node_verdict(alone)


def _blocked_undeclared(lab_):
    """Undeclared, the lab's spec (written last) is FAILED_AT_CDI by cdi.trust.accounted and the gate blocks the probe."""
    (verdict, signature, edits), gate = _undeclared(lab_)
    assert (verdict, signature, gate) == ("FAILED_AT_CDI", "cdi.trust.accounted", "blocked by cdi FAIL"), edits


# ---------------------------------------------------------------------------------------------------
# device nodes: the driver opens them O_RDWR (195:0 is not in the runtime's default allow-list: the spec's rule decides)

@pytest.mark.parametrize("permissions", ["w", "wm", "r", "rm", "m"])
def test_a_node_whose_cgroup_permissions_deny_open_is_the_spec_s(lab, permissions):  # noqa: F811 pylint: disable=redefined-outer-name
    edits = _node_edits(lab)
    edits["deviceNodes"].append(lab.node("nvidia1", 195, 0, permissions=permissions))
    records = _records(lab, edits)
    assert records["runtime"]["signature"] == "runtime.device_node.open.EPERM", records["runtime"]["reason"]
    lacking = dict((access, WARN if access not in permissions else PASS) for access in "rw")
    assert _statuses(records["cdi"], "cdi.nvidia.cgroup_read") == [lacking["r"]]
    assert _statuses(records["cdi"], "cdi.nvidia.cgroup_write") == [lacking["w"]]
    full, alone = _verdicts(records)
    _blocked_undeclared(lab)
    assert (full["verdict"], full["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), full["reason"]
    assert set(b["check"] for b in full["because"]) == set(
        "cdi.nvidia.cgroup_%s" % name for name, access in (("read", "r"), ("write", "w")) if access not in permissions)
    assert (alone["verdict"], alone["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), alone["reason"]
    assert "the runtime did what the spec said: deviceNode /dev/nvidia1 permissions %s; the runtime said: open(O_RDWR) " \
           "EPERM" % permissions in alone["reason"]


def test_a_node_the_spec_grants_rw_is_not_put_on_the_spec(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    """The control: with r and w the cgroup lets open() through; what the node answers (no driver here: ENXIO) is not
    what the spec asked for, and the rule names no edit."""
    edits = _node_edits(lab)
    edits["deviceNodes"].append(lab.node("nvidia1", 195, 0, permissions="rw"))
    records = _records(lab, edits)
    assert records["runtime"]["signature"] != "runtime.device_node.open.EPERM", records["runtime"]["reason"]
    assert _statuses(records["cdi"], "cdi.nvidia.cgroup_read") == [PASS]
    for verdict in _verdicts(records):
        assert "the runtime did what the spec said" not in verdict["reason"], verdict["reason"]


# ---------------------------------------------------------------------------------------------------
# libcuda: on a noexec mount, or where the image's loader does not look

def test_a_libcuda_on_a_noexec_mount_is_the_spec_s(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    """The loader names only the library ("libcuda.so.1: failed to map segment from shared object"), so the runtime's
    loader check cannot say which file it refused and FAILs; the mount was made exactly as asked (noexec included)."""
    edits = _node_edits(lab)
    edits["mounts"][0]["options"].append("noexec")
    records = _records(lab, edits)
    assert _statuses(records["cdi"], "cdi.nvidia.libcuda_noexec") == [WARN]
    assert _statuses(records["runtime"], "runtime.mount.source") == [PASS, PASS]  # noexec, as asked
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == FAIL and "failed to map segment" in loader["observed"], loader
    full, alone = _verdicts(records)
    _blocked_undeclared(lab)
    assert (full["verdict"], full["signature"], full["points_to"]) == (
        "FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi"), full["reason"]
    assert "cdi.nvidia.libcuda_noexec" in [b["check"] for b in full["because"]], full["because"]
    assert (alone["verdict"], alone["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), alone["reason"]
    assert "the runtime did what the spec said: mount %s -> %s; the runtime said: libcuda.so.1: failed to map segment" % (
        edits["mounts"][0]["hostPath"], LIB_IN_CONTAINER) in alone["reason"]


@pytest.mark.parametrize("place", ["/opt/gpu", "/usr/local/nvidia/lib64"])
def test_a_libcuda_mounted_where_the_loader_does_not_look_is_the_spec_s(lab, place):  # noqa: F811 pylint: disable=redefined-outer-name
    edits = _node_edits(lab)
    edits["mounts"][0]["containerPath"] = place + "/libcuda.so.1"
    records = _records(lab, edits)
    assert _statuses(records["cdi"], "cdi.nvidia.libcuda_path") == [WARN]
    assert _statuses(records["runtime"], "runtime.mount.present") == [PASS, PASS]   # mounted exactly where asked
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == FAIL and "cannot open shared object file" in loader["observed"], loader
    full, alone = _verdicts(records)
    _blocked_undeclared(lab)
    assert (full["verdict"], full["signature"], full["points_to"]) == (
        "FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi"), full["reason"]
    assert "cdi.nvidia.libcuda_path" in [b["check"] for b in full["because"]]
    assert (alone["verdict"], alone["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), alone["reason"]
    assert "the runtime did what the spec said: mount %s -> %s/libcuda.so.1; the runtime said: libcuda.so.1: cannot open " \
           "shared object file" % (edits["mounts"][0]["hostPath"], place) in alone["reason"]


# ---------------------------------------------------------------------------------------------------
# the PTX JIT compiler: the right name on the wrong library, on a noexec mount, or where no loader looks

def _jit_records(lab_, jit_source, container_path=PTXJIT_IN_CONTAINER, extra=()):
    libcuda = _jit_libcuda(lab_)
    edits = {"env": ["FAKE_GPU_UUID=%s" % GPU_A, "FAKE_GPU_NAME=NVIDIA H200", "FAKE_CUDA_DRIVER_VERSION=13000"],
             "deviceNodes": [lab_.node("nvidia0", 1, 3), lab_.node("nvidiactl", 1, 5), lab_.node("nvidia-uvm", 1, 7)],
             "mounts": [{"hostPath": libcuda, "containerPath": LIB_IN_CONTAINER, "options": ["ro", "nosuid", "nodev", "bind"]},
                        {"hostPath": jit_source, "containerPath": container_path,
                         "options": ["ro", "nosuid", "nodev", "bind"] + list(extra)}]}
    lab_.write_spec(edits)
    cdi = _cdi_record(lab_, declaring(edits))
    runtime, probe = lab_.run(cdi["evidence"]["expected_edits"], host=idle_host())
    assert probe is not None, runtime["reason"]
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(), host_runner=verdictlab.passing_control,
                                    timeout=30)
    assert validate_record(compute) == []
    return {"cdi": cdi, "runtime": runtime, "compute": compute}


def _jit(lab_, name, soname=PTXJIT, entry=True):
    return _so(os.path.join(lab_.lib, "jit-src", name), soname,
               "int %s(void) { return 0; }\n" % (JIT_ENTRY if entry else "nvmlInit_v2"))


def test_the_jit_compiler_the_spec_mounts_rightly_lets_ptx_load(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    """The control: the JIT compiler under its own name, SONAME and place: PTX load passes."""
    records = _jit_records(lab, _jit(lab, "libnvidia-ptxjitcompiler.so.580.159.04"))
    assert _statuses(records["cdi"], "cdi.host.library_soname") == [PASS, PASS]
    steps = records["compute"]["evidence"]["container"]["steps"]
    assert [s for s in steps if not s.get("ok")] == [] and [s["ok"] for s in steps if s["step"] == "verify"] == [True]


def test_nvml_s_library_mounted_as_the_jit_compiler_is_a_cdi_fail_that_explains_the_jit_failure(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    nvml = _jit(lab, "libnvidia-ml.so.580.159.04", soname="libnvidia-ml.so.1", entry=False)
    records = _jit_records(lab, nvml)
    soname = [c for c in records["cdi"]["checks"] if c["id"] == "cdi.host.library_soname" and c["subject"] == PTXJIT_IN_CONTAINER]
    assert [c["status"] for c in soname] == [FAIL] and "libnvidia-ml.so.1" in soname[0]["observed"], soname
    assert records["runtime"]["status"] == PASS, records["runtime"]["reason"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", records["compute"]["reason"]
    full, alone = _verdicts(records)
    assert (full["verdict"], full["signature"], full["points_to"]) == (
        "FAILED_AT_CDI", "cdi.host.library_soname", "cdi"), full["reason"]
    assert (alone["verdict"], alone["points_to"]) == ("FAILED_AT_COMPUTE", "cdi"), alone["reason"]
    assert "mount %s -> %s explains compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND at cuModuleLoadData" % (
        nvml, PTXJIT_IN_CONTAINER) in alone["reason"]


@pytest.mark.parametrize("how,check", [("noexec", "cdi.nvidia.ptxjit_noexec"), ("place", "cdi.nvidia.ptxjit_path")])
def test_a_jit_compiler_the_loader_cannot_use_as_mounted_is_the_spec_s(lab, how, check):  # noqa: F811 pylint: disable=redefined-outer-name
    jit = _jit(lab, "libnvidia-ptxjitcompiler.so.580.159.04")
    if how == "noexec":
        records = _jit_records(lab, jit, extra=["noexec"])
    else:
        records = _jit_records(lab, jit, container_path="/opt/jit/" + PTXJIT)
    assert _statuses(records["cdi"], check) == [WARN]
    assert records["runtime"]["status"] in (PASS, WARN) and not [
        c for c in records["runtime"]["checks"] if c["id"].startswith("runtime.mount.") and c["status"] != PASS]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", records["compute"]["reason"]
    full, alone = _verdicts(records)
    _blocked_undeclared(lab)
    assert (full["verdict"], full["points_to"]) == ("FAILED_AT_COMPUTE", "cdi"), full["reason"]
    assert check in [b["check"] for b in full["because"]], full["because"]
    assert (alone["verdict"], alone["points_to"]) == ("FAILED_AT_COMPUTE", "cdi"), alone["reason"]
    assert "explains compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND at cuModuleLoadData" in alone["reason"]


def test_a_libcuda_a_directory_mount_of_the_spec_gives_is_the_spec_s_not_the_image_s(lab):  # noqa: F811 pylint: disable=redefined-outer-name
    """A directory mounted over the image's library directory gives libcuda.so.1: the loader check says so (it said
    "the spec mounts no libcuda; the loader resolved the image's ..."), and a failure of that libcuda is the mount's."""
    edits = _node_edits(lab)
    directory = os.path.join(lab.base, "drvdir")
    verdictlab.compile_libcuda(os.path.join(directory, "libcuda.so.1"), 100)
    edits["mounts"] = [{"hostPath": directory, "containerPath": "/usr/lib/x86_64-linux-gnu", "options": ["ro", "bind"]}]
    records = _records(lab, edits)
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == PASS and "the directory the spec mounts at /usr/lib/x86_64-linux-gnu" in loader["expected"], loader
    assert "the image's" not in loader["observed"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE", records["compute"]["reason"]
