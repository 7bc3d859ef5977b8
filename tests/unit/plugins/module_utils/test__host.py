"""Host layer over fixture trees (real files, real mknod char devices) with NVML faked at the pynvml boundary."""
import os
import sys
import time

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host import busy as _busy
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import catalogue as _catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import procfs as _procfs
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, validate_record

nv = hf.real_pynvml


def checks(record, check_id, subject=None):
    return [c for c in record["checks"] if c["id"] == check_id and (subject is None or c["subject"] == subject)]


def one(record, check_id, subject=None):
    found = checks(record, check_id, subject)
    assert len(found) == 1, (check_id, subject, record["checks"])
    return found[0]


def host(root, gpus=1, **kw):
    fake = kw.pop("fake", None) or hf.fake_pynvml([hf.gpu(i) for i in range(gpus)])
    record = _host.record(root=str(root), pynvml_module=fake, **kw)
    assert validate_record(record) == []
    return record


@pytest.fixture
def h200(tmp_path):
    return hf.build_node(tmp_path)


def test_one_h200_passes_with_full_evidence(h200):
    record = host(h200)
    assert record["status"] == PASS, [c for c in record["checks"] if c["status"] != PASS]
    assert record["reason"] is None and record["signature"] is None
    ev = record["evidence"]
    assert ev["driver_root"] == "/usr/local/nvidia"
    assert ev["libraries"]["libcuda"] == {"path": "/usr/local/nvidia/lib64/libcuda.so.580.159.04", "version": "580.159.04",
                                          "versions_present": ["580.159.04"]}
    assert ev["libraries"]["libnvidia-ml"]["version"] == "580.159.04"
    assert ev["kernel_module"]["proc_driver_version"] == ev["kernel_module"]["sys_module_version"] == "580.159.04"
    assert ev["modules_loaded"] == {"nvidia": True, "nvidia_uvm": True, "nvidia_modeset": False, "nvidia_drm": False, "nouveau": False}
    assert ev["device_nodes"]["/dev/nvidia0"] == {"exists": True, "type": "char", "major": 195, "minor": 0, "mode": "0666",
                                                  "uid": 0, "gid": 0, "owner": "root", "group": "root"}
    assert (ev["device_nodes"]["/dev/nvidiactl"]["major"], ev["device_nodes"]["/dev/nvidiactl"]["minor"]) == (195, 255)
    assert (ev["device_nodes"]["/dev/nvidia-uvm-tools"]["major"], ev["device_nodes"]["/dev/nvidia-uvm-tools"]["minor"]) == (238, 1)
    assert ev["device_nodes"]["/dev/nvidia-modeset"]["exists"] is False
    nvml = ev["nvml"]
    assert nvml["ok"] and nvml["error"] is None and nvml["gpu_count"] == 1
    assert (nvml["driver_version"], nvml["nvml_version"], nvml["cuda_driver_version"], nvml["cuda_driver_version_int"]) == (
        "580.159.04", "13.580.159.04", "13.0", 13000)
    g = nvml["gpus"][0]
    assert (g["name"], g["minor_number"], g["mig_mode"], g["persistence_mode"], g["compute_mode"]) == (
        "NVIDIA H200", 0, None, True, "Default")
    assert g["errors"]["mig_mode"].startswith("Not Supported (NVML_ERROR_NOT_SUPPORTED")
    assert record["versions"] == {"driver": "580.159.04", "nvml": "13.580.159.04", "cuda_driver_api": "13.0", "kernel_module": "580.159.04"}
    agree = one(record, "host.driver.version_agreement")
    assert agree["status"] == PASS and agree["observed"].count("580.159.04") == 5
    assert one(record, "host.device_node.uvm", "/dev/nvidia-uvm")["expected"] == "char 238:0"
    assert one(record, "host.nvml.mig_mode", "GPU 0")["status"] == PASS
    unclaimed = one(record, "host.device_node.unclaimed")
    assert unclaimed["status"] == PASS and unclaimed["observed"] == "1 node(s), each a GPU's (nvml)"
    assert ev["gpus"] == [{"index": 0, "uuid": hf.gpu(0)["uuid"], "minor": 0, "pci_bus_id": "0000:06:00.0", "name": "NVIDIA H200",
                           "memory_total_bytes": hf.H200_MEMORY, "device_node": "/dev/nvidia0", "source": "nvml", "compute_processes": [],
                           "mig": {"mode_current": "disabled", "mode_pending": "disabled", "instances": []}}]
    # no /proc/driver/nvidia/gpus in this tree: the identity is not cross-checked, and says so
    identity = one(record, "host.gpu.identity", "GPU 0")
    assert identity["status"] == NOT_RUN and identity["observed"].endswith("not cross-checked: /proc/driver/nvidia/gpus absent")
    # tools are not probed under a fixture root
    assert {c["status"] for c in checks(record, "host.tool.podman")} == {NOT_RUN}
    assert ev["tools"] == {} and ev["tools_probed"] is False


def test_no_gpu_tree_fails_with_no_driver_reason_and_exact_evidence(tmp_path):
    root = hf.build_node(tmp_path, kernel_version=None, lib_version=None, modules=())
    fake = hf.fake_pynvml(init_error=nv.NVML_ERROR_LIBRARY_NOT_FOUND)
    record = host(root, fake=fake)
    assert record["status"] == FAIL and record["signature"] == "host.driver.present"
    assert record["reason"].startswith("no NVIDIA driver / device nodes: /proc/driver/nvidia/version absent")
    assert "no /dev/nvidia* device nodes" in record["reason"]
    assert "NVML: NVML Shared Library Not Found (NVML_ERROR_LIBRARY_NOT_FOUND, code 12)" in record["reason"]
    assert one(record, "host.nvml.init")["status"] == FAIL
    assert one(record, "host.driver_root.detected")["status"] == FAIL
    assert one(record, "host.device_node.present", "/dev/nvidia[0-9]*")["observed"] == "none"
    assert one(record, "host.device_node.unclaimed")["status"] == NOT_RUN
    assert record["evidence"]["gpus"] == [] and record["evidence"]["procfs_gpus"] is None
    assert one(record, "host.driver.version_agreement")["status"] == NOT_RUN
    assert record["versions"] == {"driver": None, "nvml": None, "cuda_driver_api": None, "kernel_module": None}


def test_eight_gpus_with_one_node_missing(tmp_path):
    root = hf.build_node(tmp_path, gpus=8, skip_nodes=("/dev/nvidia5",))
    record = host(root, gpus=8)
    assert record["status"] == FAIL
    # one check says it (no second count check repeating the same missing node)
    assert [(c["id"], c["subject"]) for c in record["checks"] if c["status"] == FAIL] == [("host.gpu.device_node", "/dev/nvidia5")]
    node = one(record, "host.gpu.device_node", "/dev/nvidia5")
    assert node["observed"] == "absent" and node["expected"] == "char 195:5 (GPU 5 %s, minor 5 from nvml)" % hf.gpu(5)["uuid"]
    assert record["signature"] == "host.gpu.device_node"
    assert len(checks(record, "host.nvml.gpu")) == 8
    assert [r["device_node"] for r in record["evidence"]["gpus"]] == ["/dev/nvidia%d" % i if i != 5 else None for i in range(8)]


@pytest.mark.parametrize("kernel,lib,nvml_driver", [
    ("580.95.05", "580.159.04", "580.159.04"),
    ("580.159.04", "580.95.05", "580.159.04"),
    ("580.159.04", "580.159.04", "575.57.08"),
])
def test_kernel_library_nvml_version_mismatch_names_all_three(tmp_path, kernel, lib, nvml_driver):
    root = hf.build_node(tmp_path, kernel_version=kernel, lib_version=lib)
    record = host(root, fake=hf.fake_pynvml([hf.gpu()], driver=nvml_driver))
    agree = one(record, "host.driver.version_agreement")
    assert agree["status"] == FAIL and record["status"] == FAIL
    for part in ("NVML %s" % nvml_driver, "/proc/driver/nvidia/version %s" % kernel, "libcuda.so suffix %s" % lib,
                 "libnvidia-ml.so suffix %s" % lib):
        assert part in agree["observed"]
    assert record["signature"] == "host.driver.version_agreement"


def test_driver_library_version_mismatch_at_nvml_init_keeps_other_checks(tmp_path):
    root = hf.build_node(tmp_path, kernel_version="580.95.05", lib_version="580.159.04")
    fake = hf.fake_pynvml([hf.gpu()], init_error=nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    record = host(root, fake=fake)
    init = one(record, "host.nvml.init")
    exact = str(nv.NVMLError(nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH))
    assert init["status"] == FAIL and init["observed"] == "%s (NVML_ERROR_LIB_RM_VERSION_MISMATCH, code 18)" % exact
    assert init["hint"].startswith("Driver/library version mismatch")
    assert one(record, "host.nvml.gpu")["status"] == FAIL and exact in one(record, "host.nvml.gpu")["observed"]
    # every other check still ran: nodes, modules, libraries, and the version comparison without NVML
    assert one(record, "host.device_node.present", "/dev/nvidiactl")["status"] == PASS
    assert one(record, "host.device_node.uvm", "/dev/nvidia-uvm")["status"] == PASS
    assert {c["status"] for c in checks(record, "host.library.present")} == {PASS}
    agree = one(record, "host.driver.version_agreement")
    assert agree["status"] == FAIL and "NVML unavailable (%s" % exact in agree["observed"]
    # the root cause (kernel module 580.95.05 vs libraries 580.159.04) is the signature, not its NVML symptom
    assert record["signature"] == "host.driver.version_agreement"


def test_pynvml_missing_fails_nvml_checks_with_import_error(h200, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    record = _host.record(root=str(h200))
    init = one(record, "host.nvml.init")
    assert init["status"] == FAIL and init["observed"].startswith("pynvml cannot be imported: ModuleNotFoundError: import of pynvml halted")
    assert one(record, "host.nvml.gpu")["status"] == FAIL
    assert one(record, "host.driver.version_agreement")["status"] == PASS  # kernel module and libraries still agree
    assert one(record, "host.device_node.unclaimed")["status"] == NOT_RUN
    assert record["signature"] == "host.nvml.init"


def test_nouveau_loaded_fails(tmp_path):
    root = hf.build_node(tmp_path, kernel_version=None, lib_version=None, modules=("nouveau", "drm"))
    record = host(root, fake=hf.fake_pynvml(init_error=nv.NVML_ERROR_DRIVER_NOT_LOADED))
    nouveau = one(record, "host.kernel_module.nouveau")
    assert nouveau["status"] == FAIL and nouveau["observed"] == "loaded (/proc/modules)"
    assert record["evidence"]["modules_loaded"]["nouveau"] is True
    assert one(record, "host.nvml.init")["observed"] == "Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED, code 9)"


def test_wrong_minor_fails(tmp_path):
    root = hf.build_node(tmp_path, rdev={"/dev/nvidia0": (195, 1)})
    record = host(root)
    minor = one(record, "host.device_node.minor", "/dev/nvidia0")
    assert minor["status"] == FAIL and (minor["expected"], minor["observed"]) == ("195:0", "195:1")
    assert record["status"] == FAIL and record["signature"] == "host.device_node.minor"


def test_missing_nvidia_uvm_says_cuda_fails_while_nvml_works(tmp_path):
    root = hf.build_node(tmp_path, skip_nodes=("/dev/nvidia-uvm",))
    record = host(root)
    uvm = one(record, "host.device_node.uvm", "/dev/nvidia-uvm")
    assert uvm["status"] == FAIL and uvm["observed"] == "absent"
    assert "CUDA will fail" in uvm["hint"] and "CUDA_ERROR_UNKNOWN" in uvm["hint"] and "nvidia-smi still work" in uvm["hint"]
    assert one(record, "host.nvml.init")["status"] == PASS
    assert record["signature"] == "host.device_node.uvm"


def test_nvidia_uvm_module_not_loaded_fails(tmp_path):
    root = hf.build_node(tmp_path, modules=("nvidia",))
    loaded = one(host(root), "host.kernel_module.loaded", "nvidia_uvm")
    assert loaded["status"] == FAIL and "CUDA_ERROR_UNKNOWN" in loaded["hint"]


def test_regular_file_in_place_of_device_node(tmp_path):
    root = hf.build_node(tmp_path, skip_nodes=("/dev/nvidiactl",))
    open(os.path.join(root, "dev", "nvidiactl"), "w").close()
    record = host(root)
    c = one(record, "host.device_node.char_device", "/dev/nvidiactl")
    assert c["status"] == FAIL and c["observed"].startswith("file")


def test_restricted_node_mode_warns(tmp_path):
    root = hf.build_node(tmp_path)
    os.chmod(os.path.join(root, "dev", "nvidia0"), 0o660)
    record = host(root)
    assert one(record, "host.device_node.mode", "/dev/nvidia0")["status"] == WARN
    assert record["status"] == WARN and "0660" in record["reason"]


@pytest.mark.parametrize("attrs,check_id,status", [
    ({"persistence": 0}, "host.nvml.persistence_mode", WARN),
    ({"compute_mode": 2}, "host.nvml.compute_mode", FAIL),
    ({"compute_mode": 3}, "host.nvml.compute_mode", WARN),
    ({"mig": (1, 1)}, "host.nvml.mig_mode", WARN),
    ({"mig": (0, 1)}, "host.nvml.mig_mode", WARN),
    ({"mig": (0, 0)}, "host.nvml.mig_mode", PASS),
])
def test_gpu_modes(h200, attrs, check_id, status):
    record = host(h200, fake=hf.fake_pynvml([hf.gpu(**attrs)]))
    assert one(record, check_id, "GPU 0")["status"] == status
    assert record["status"] == status


def test_one_failing_attribute_does_not_lose_the_gpu(h200):
    fake = hf.fake_pynvml([hf.gpu()], fail={(0, "nvmlDeviceGetPersistenceMode"): nv.NVML_ERROR_NO_PERMISSION})
    record = host(h200, fake=fake)
    g = record["evidence"]["nvml"]["gpus"][0]
    assert g["name"] == "NVIDIA H200" and g["persistence_mode"] is None
    assert one(record, "host.nvml.gpu", "GPU 0")["status"] == PASS
    pm = one(record, "host.nvml.persistence_mode", "GPU 0")
    assert pm["status"] == NOT_RUN and "Insufficient Permissions" in pm["observed"]


def test_unreadable_identity_fails_the_gpu(h200):
    fake = hf.fake_pynvml([hf.gpu()], fail={(0, "nvmlDeviceGetUUID"): nv.NVML_ERROR_GPU_IS_LOST})
    gpu_check = one(host(h200, fake=fake), "host.nvml.gpu", "GPU 0")
    assert gpu_check["status"] == FAIL and "NVML_ERROR_GPU_IS_LOST" in gpu_check["observed"]


def test_nvml_disabled_by_option(h200):
    record = _host.record(root=str(h200), use_nvml=False)
    for cid in ("host.nvml.init", "host.nvml.gpu"):
        c = one(record, cid)
        assert c["status"] == NOT_RUN and c["observed"] == "disabled by option (nvml: false)"
    assert record["status"] == PASS  # device nodes, modules, libraries and versions still checked


def test_no_nvml_gpus_fails(h200):
    gpu_check = one(host(h200, gpus=0), "host.nvml.gpu")
    assert gpu_check["status"] == FAIL and gpu_check["observed"] == "NVML reports 0 GPUs"


@pytest.mark.parametrize("driver_root,lib_dir", [
    ("/usr/local/nvidia", "lib64"),
    ("/run/nvidia/driver", "usr/lib/x86_64-linux-gnu"),
    ("/home/kubernetes/bin/nvidia", "lib64"),
    ("/", "usr/lib/x86_64-linux-gnu"),
])
def test_driver_root_detected(tmp_path, driver_root, lib_dir):
    root = hf.build_node(tmp_path, driver_root=driver_root, lib_dir=lib_dir)
    record = host(root)
    assert record["evidence"]["driver_root"] == driver_root
    assert record["evidence"]["libraries"]["libcuda"]["path"] == os.path.join(driver_root, lib_dir, "libcuda.so.580.159.04")
    assert record["status"] == PASS


def test_links_into_another_root_do_not_make_a_driver_root(tmp_path):
    # Ubuntu on the reference host: /usr/lib/libcuda.so.1 links into /usr/local/nvidia/lib64
    root = hf.build_node(tmp_path)
    os.makedirs(os.path.join(root, "usr/lib"))
    os.symlink("/usr/local/nvidia/lib64/libcuda.so.580.159.04", os.path.join(root, "usr/lib/libcuda.so.580.159.04"))
    assert host(root)["evidence"]["driver_root"] == "/usr/local/nvidia"


def test_given_driver_root_without_libraries_fails(h200):
    record = host(h200, driver_root="/opt/nothing")
    d = one(record, "host.driver_root.detected")
    assert d["status"] == FAIL and d["subject"] == "/opt/nothing"


def test_missing_ptxjitcompiler_fails(tmp_path):
    root = hf.build_node(tmp_path, libs=("libcuda", "libnvidia-ml"))
    c = one(host(root), "host.library.present", "libnvidia-ptxjitcompiler")
    assert c["status"] == FAIL and "CUDA_ERROR_JIT_COMPILER_NOT_FOUND" in c["hint"]


def test_soname_link_picks_the_version_among_leftovers(h200):
    d = os.path.join(h200, "usr/local/nvidia/lib64")
    open(os.path.join(d, "libcuda.so.590.1.1"), "w").close()
    lib = host(h200)["evidence"]["libraries"]["libcuda"]
    assert lib["version"] == "580.159.04" and lib["versions_present"] == ["580.159.04", "590.1.1"]


def test_sys_module_fallback_when_proc_modules_is_missing(h200):
    os.unlink(os.path.join(h200, "proc/modules"))
    os.makedirs(os.path.join(h200, "sys/module/nvidia_uvm"), exist_ok=True)
    open(os.path.join(h200, "sys/module/nvidia_uvm/initstate"), "w").close()
    record = host(h200)
    assert record["evidence"]["modules_source"] == "/sys/module"
    assert one(record, "host.kernel_module.loaded", "nvidia")["status"] == PASS
    assert one(record, "host.kernel_module.loaded", "nvidia_uvm")["status"] == PASS


def test_gpu_compute_processes(h200):
    record = host(h200, fake=hf.fake_pynvml([hf.gpu(0, processes=[4242]), hf.gpu(1)]))
    assert _busy.gpu_compute_processes(record) == [
        {"gpu_index": 0, "gpu_uuid": hf.gpu(0)["uuid"], "pid": 4242, "used_gpu_memory_bytes": 1 << 20}]
    failing = hf.fake_pynvml([hf.gpu()], fail={(0, "nvmlDeviceGetComputeRunningProcesses"): nv.NVML_ERROR_NOT_SUPPORTED})
    assert _busy.gpu_compute_processes(host(h200, fake=failing)) is None
    assert _busy.gpu_compute_processes(_host.record(root=str(h200), use_nvml=False)) is None


@pytest.mark.parametrize("text,version", [
    (hf.PROC_VERSION % "580.159.04", "580.159.04"),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\nGCC version:  gcc 12\n", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.15  Release Build\n", "570.86.15"),
    ("garbage", None),
    (None, None),
])
def test_parse_proc_driver_version(text, version):
    assert _procfs.parse_proc_driver_version(text) == version


@pytest.mark.parametrize("text,version", [
    ("NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d", "1.17.8"),
    ("podman version 4.3.1", "4.3.1"),
    ("Docker version 28.2.2, build e6534b4", "28.2.2"),
    ("containerd github.com/containerd/containerd v1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", "1.7.27"),
    ("runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1", "1.1.5+ds1"),
    ("no version here", None),
])
def test_parse_tool_version(text, version):
    assert _host.parse_tool_version(text) == version


def test_parse_proc_devices_reads_only_character_devices():
    text = "Character devices:\n  1 mem\n195 nvidia-frontend\n238 nvidia-uvm\n\nBlock devices:\n  7 loop\n195 notachar\n"
    assert _procfs.parse_proc_devices(text) == {"mem": 1, "nvidia-frontend": 195, "nvidia-uvm": 238}


_HAS_GPU = os.path.exists("/dev/nvidiactl") or os.environ.get("GPUPROBE_GPU") == "1"


@pytest.mark.skipif(_HAS_GPU, reason="this machine has an NVIDIA device: tests/gpu/test_host_gpu.py covers it")
def test_real_node_without_gpu_fails_honestly():
    """The same code path as on the H200, on this machine (no driver): FAIL with the exact evidence, no traceback."""
    record = _host.record(root="/")
    assert validate_record(record) == []
    assert record["status"] == FAIL and record["signature"] == "host.driver.present"
    assert record["reason"].startswith("no NVIDIA driver / device nodes: ")
    nvml_checks = [c for c in record["checks"] if c["id"].startswith("host.nvml.")]
    assert nvml_checks and {c["status"] for c in nvml_checks} <= {FAIL, NOT_RUN}
    error = record["evidence"]["nvml"]["error"]
    assert error and one(record, "host.nvml.init")["observed"] == error
    assert error in record["reason"]
    assert record["evidence"]["tools_probed"] is True
    assert set(record["evidence"]["tools"]) == set(_catalogue.TOOLS)
    for name, info in record["evidence"]["tools"].items():
        status = one(record, "host.tool.%s" % name)["status"]
        assert status == (NOT_RUN if info is None else PASS if info["version"] else WARN)


def test_libcuda_root_wins_over_an_nvml_only_root(tmp_path):
    root = hf.build_node(tmp_path)
    os.makedirs(os.path.join(root, "lib"))
    open(os.path.join(root, "lib", "libnvidia-ml.so.580.159.04"), "w").close()
    assert host(root)["evidence"]["driver_root"] == "/usr/local/nvidia"


def test_hung_nvml_is_killed_and_reported(h200):
    fake = hf.fake_pynvml([hf.gpu()])
    fake.nvmlInit = lambda: time.sleep(60)
    t0 = time.monotonic()
    record = _host.record(root=str(h200), pynvml_module=fake, nvml_timeout=1)
    assert time.monotonic() - t0 < 20
    init = one(record, "host.nvml.init")
    assert init["status"] == FAIL and init["observed"].startswith("timeout after 1s: NVML did not answer")
    assert one(record, "host.device_node.uvm", "/dev/nvidia-uvm")["status"] == PASS


# --- per-GPU inventory (evidence.gpus, docs/contract.md I1) -------------------------------------------------------

def inventory_checks(record):
    return [c for c in record["checks"] if c["id"].startswith(("host.gpu.", "host.mig.", "host.device_node.unclaimed"))]


@pytest.mark.parametrize("count", [1, 4, 8])
def test_inventory_of_every_gpu_cross_checked_with_procfs(tmp_path, count):
    gpus = hf.node_gpus(count)
    root = hf.build_node(tmp_path, gpus=gpus, procfs=True)
    record = host(root, fake=hf.fake_pynvml(gpus))
    assert record["status"] == PASS, [c for c in record["checks"] if c["status"] != PASS and c["id"] != "host.tool.podman"]
    rows = record["evidence"]["gpus"]
    assert [(r["index"], r["minor"], r["uuid"], r["device_node"], r["source"]) for r in rows] == [
        (i, i, hf.gpu(i)["uuid"], "/dev/nvidia%d" % i, "nvml") for i in range(count)]
    assert [r["pci_bus_id"] for r in rows] == ["0000:%02x:00.0" % (6 + i) for i in range(count)]
    assert all(r["compute_processes"] == [] and r["memory_total_bytes"] == hf.H200_MEMORY for r in rows)
    assert [c["status"] for c in checks(record, "host.gpu.identity")] == [PASS] * count
    assert [c["subject"] for c in checks(record, "host.gpu.device_node")] == ["/dev/nvidia%d" % i for i in range(count)]
    assert one(record, "host.device_node.unclaimed")["observed"] == "%d node(s), each a GPU's (nvml)" % count
    assert len(record["evidence"]["procfs_gpus"]) == count
    assert not checks(record, "host.mig.instance")


@pytest.mark.parametrize("how", ["init_error", "import_error", "disabled"])
def test_without_nvml_the_rows_come_from_procfs(tmp_path, monkeypatch, how):
    root = hf.build_node(tmp_path, gpus=4, procfs=True)
    if how == "init_error":
        record = host(root, fake=hf.fake_pynvml(hf.node_gpus(4), init_error=nv.NVML_ERROR_DRIVER_NOT_LOADED))
    elif how == "import_error":
        monkeypatch.setitem(sys.modules, "pynvml", None)
        record = _host.record(root=str(root))
    else:
        record = _host.record(root=str(root), use_nvml=False)
    assert validate_record(record) == []
    rows = record["evidence"]["gpus"]
    assert [(r["index"], r["minor"], r["uuid"], r["pci_bus_id"], r["name"], r["device_node"], r["source"]) for r in rows] == [
        (None, i, hf.gpu(i)["uuid"], "0000:%02x:00.0" % (6 + i), "NVIDIA H200", "/dev/nvidia%d" % i, "procfs") for i in range(4)]
    # what procfs does not say stays unknown
    assert all(r["memory_total_bytes"] is None and r["compute_processes"] is None for r in rows)
    assert all(r["mig"] == {"mode_current": None, "mode_pending": None, "instances": []} for r in rows)
    identity = checks(record, "host.gpu.identity")
    assert [c["status"] for c in identity] == [NOT_RUN] * 4 and all("not cross-checked: NVML" in c["observed"] for c in identity)
    assert [c["status"] for c in checks(record, "host.gpu.device_node")] == [PASS] * 4
    assert one(record, "host.device_node.unclaimed")["observed"] == "4 node(s), each a GPU's (procfs)"
    assert not checks(record, "host.device_node.present", "/dev/nvidia[0-9]*")  # the per-GPU checks say it


@pytest.mark.parametrize("procfs,subject,observed", [
    # procfs says minor 7 where NVML says 1
    ([hf.gpu(0), hf.gpu(1, minor=7)], "GPU 1", "minor differs (procfs 7)"),
    ([hf.gpu(0), hf.gpu(1, uuid="GPU-00000000-dead-beef-0000-000000000001")], "GPU 1",
     "uuid differs (procfs GPU-00000000-dead-beef-0000-000000000001)"),
    # the same UUID on another bus: joined by UUID, the bus id differs
    ([hf.gpu(0), hf.gpu(1, pci="00000000:41:00.0")], "GPU 1", "pci_bus_id differs (procfs 0000:41:00.0)"),
    # procfs has no entry at all for NVML's GPU 1
    ([hf.gpu(0)], "GPU 1", "no /proc/driver/nvidia/gpus/<bus id>/information for this GPU (procfs lists 0000:06:00.0)"),
])
def test_nvml_procfs_mismatch_fails_identity(tmp_path, procfs, subject, observed):
    gpus = hf.node_gpus(2)
    root = hf.build_node(tmp_path, gpus=gpus, procfs=procfs)
    record = host(root, fake=hf.fake_pynvml(gpus))
    identity = one(record, "host.gpu.identity", subject)
    assert identity["status"] == FAIL and observed in identity["observed"], identity
    assert one(record, "host.gpu.identity", "GPU 0")["status"] == PASS
    assert record["status"] == FAIL and record["signature"] == "host.gpu.identity"


def test_procfs_gpu_that_nvml_does_not_enumerate(tmp_path):
    root = hf.build_node(tmp_path, gpus=2, procfs=True)
    record = host(root, gpus=1)
    extra = one(record, "host.gpu.identity", "GPU 0000:07:00.0")
    assert extra["status"] == FAIL
    assert extra["observed"] == "/proc/driver/nvidia/gpus/0000:07:00.0/information lists a GPU NVML does not enumerate: " \
                                "uuid %s, minor 1, bus 0000:07:00.0" % hf.gpu(1)["uuid"]
    stale = one(record, "host.device_node.unclaimed", "/dev/nvidia1")
    assert stale["status"] == WARN and stale["observed"] == "no GPU of the inventory (nvml: minors 0) has minor 1"


def test_excluded_gpu_in_procfs_only_warns(tmp_path):
    root = hf.build_node(tmp_path, gpus=2, procfs=True)
    info = os.path.join(root, "proc/driver/nvidia/gpus/0000:07:00.0/information")
    os.chmod(info, 0o644)
    with open(info) as f:
        text = f.read().replace("GPU Excluded:\t No", "GPU Excluded:\t Yes")
    with open(info, "w") as f:
        f.write(text)
    record = host(root, gpus=1)
    extra = one(record, "host.gpu.identity", "GPU 0000:07:00.0")
    assert extra["status"] == WARN and extra["observed"].endswith("(GPU Excluded: Yes)")


def test_stale_node_without_gpu_warns(tmp_path):
    root = hf.build_node(tmp_path, gpus=3, procfs=hf.node_gpus(2))
    record = host(root, gpus=2)
    assert record["status"] == WARN and record["signature"] is None
    assert [(c["id"], c["subject"]) for c in record["checks"] if c["status"] == WARN] == [("host.device_node.unclaimed", "/dev/nvidia2")]


def test_node_missing_for_gpu_3_of_8_with_procfs(tmp_path):
    gpus = hf.node_gpus(8)
    root = hf.build_node(tmp_path, gpus=gpus, procfs=True, skip_nodes=("/dev/nvidia3",))
    record = host(root, fake=hf.fake_pynvml(gpus))
    assert [(c["id"], c["subject"], c["observed"]) for c in record["checks"] if c["status"] == FAIL] == [
        ("host.gpu.device_node", "/dev/nvidia3", "absent")]
    assert record["evidence"]["gpus"][3]["device_node"] is None
    assert record["signature"] == "host.gpu.device_node"
    assert [c["status"] for c in checks(record, "host.gpu.identity")] == [PASS] * 8  # the GPU itself is fine


def test_duplicate_minor_fails_identity_of_both(tmp_path):
    gpus = [hf.gpu(0), hf.gpu(1, minor=0)]
    root = hf.build_node(tmp_path, gpus=1)
    record = host(root, fake=hf.fake_pynvml(gpus))
    for subject, other in (("GPU 0", "GPU 1"), ("GPU 1", "GPU 0")):
        c = one(record, "host.gpu.identity", subject)
        assert c["status"] == FAIL and "minor 0 shared with %s" % other in c["observed"]


MIG = {0: [hf.mig_device(0, gi=1), hf.mig_device(0, gi=2, profile="2g.35gb")], 5: [hf.mig_device(5, gi=7, ci=1, profile="1g.18gb")]}


def mig_node(tmp_path, count=8, mig=None, **kw):
    gpus = hf.node_gpus(count, mig=MIG if mig is None else mig)
    root = hf.build_node(tmp_path, gpus=gpus, procfs=True, mig=True, **kw)
    return root, gpus


def test_mig_instances_with_caps_minors_and_nodes(tmp_path):
    root, gpus = mig_node(tmp_path)
    record = host(root, fake=hf.fake_pynvml(gpus))
    table = hf.mig_minors_table(8)
    rows = record["evidence"]["gpus"]
    assert rows[0]["mig"] == {"mode_current": "enabled", "mode_pending": "enabled", "instances": [
        {"uuid": d["uuid"], "gi": d["gi"], "ci": d["ci"], "profile": d["profile"],
         "caps_minors": {"gi": table["gpu0/gi%d/access" % d["gi"]], "ci": table["gpu0/gi%d/ci%d/access" % (d["gi"], d["ci"])]},
         "compute_processes": []}
        for d in MIG[0]]}
    assert rows[5]["mig"]["instances"][0]["caps_minors"] == {"gi": table["gpu5/gi7/access"], "ci": table["gpu5/gi7/ci1/access"]}
    assert all(r["mig"]["instances"] == [] and r["mig"]["mode_current"] == "disabled" for i, r in enumerate(rows) if i not in MIG)
    inst = checks(record, "host.mig.instance")
    assert [(c["subject"], c["status"]) for c in inst] == [
        ("GPU 0 gi1/ci0 %s" % MIG[0][0]["uuid"], PASS), ("GPU 0 gi2/ci0 %s" % MIG[0][1]["uuid"], PASS),
        ("GPU 5 gi7/ci1 %s" % MIG[5][0]["uuid"], PASS)]
    gi_minor = table["gpu0/gi1/access"]
    assert inst[0]["observed"].startswith("/dev/nvidia-caps/nvidia-cap%d char 241:%d" % (gi_minor, gi_minor))
    # MIG enabled is the known WARN of host.nvml.mig_mode; nothing fails
    assert record["status"] == WARN and not [c for c in record["checks"] if c["status"] == FAIL]
    assert one(record, "host.device_node.minor", "/dev/nvidia-caps/nvidia-cap%d" % gi_minor)["expected"] == "241:%d" % gi_minor


def test_missing_caps_node_fails_the_mig_instance(tmp_path):
    ci_minor = hf.mig_minors_table(8)["gpu5/gi7/ci1/access"]
    root, gpus = mig_node(tmp_path, skip_nodes=("/dev/nvidia-caps/nvidia-cap%d" % ci_minor,))
    record = host(root, fake=hf.fake_pynvml(gpus))
    c = one(record, "host.mig.instance", "GPU 5 gi7/ci1 %s" % MIG[5][0]["uuid"])
    assert c["status"] == FAIL and c["observed"].endswith("/dev/nvidia-caps/nvidia-cap%d absent" % ci_minor)
    assert "/proc/driver/nvidia/capabilities/gpu5/mig/gi7/access" in c["hint"]
    assert record["signature"] == "host.mig.instance"


def test_mig_without_mig_minors_cannot_tell_the_caps_nodes(tmp_path):
    root, gpus = mig_node(tmp_path, count=1, mig={0: MIG[0]})
    os.unlink(os.path.join(root, "proc/driver/nvidia-caps/mig-minors"))
    record = host(root, fake=hf.fake_pynvml(gpus))
    assert record["evidence"]["mig_minors_read"] is False
    for c in checks(record, "host.mig.instance"):
        assert c["status"] == NOT_RUN
        assert c["observed"] == "no caps minor for the gi and ci in /proc/driver/nvidia-caps/mig-minors (unreadable)"


def test_mig_instances_from_procfs_when_nvml_is_absent(tmp_path):
    root, gpus = mig_node(tmp_path, count=2, mig={1: [hf.mig_device(1, gi=3, ci=0)]})
    record = _host.record(root=str(root), use_nvml=False)
    table = hf.mig_minors_table(2)
    assert record["evidence"]["gpus"][1]["mig"] == {"mode_current": None, "mode_pending": None, "instances": [
        {"uuid": None, "gi": 3, "ci": 0, "profile": None,
         "caps_minors": {"gi": table["gpu1/gi3/access"], "ci": table["gpu1/gi3/ci0/access"]}, "compute_processes": None}]}
    assert one(record, "host.mig.instance", "GPU 0000:07:00.0 gi3/ci0")["status"] == PASS


def test_mig_enabled_without_devices_warns(h200):
    record = host(h200, fake=hf.fake_pynvml([hf.gpu(0, mig=(1, 1))]))
    c = one(record, "host.mig.instance", "GPU 0")
    assert c["status"] == WARN and c["observed"] == "MIG enabled and no MIG device: CUDA sees no device on this GPU"


@pytest.mark.parametrize("fail,status,observed", [
    ({(0, "nvmlDeviceGetMaxMigDeviceCount"): nv.NVML_ERROR_NO_PERMISSION}, NOT_RUN, "not enumerated: Insufficient Permissions"),
    ({((0, 0), "nvmlDeviceGetMigDeviceHandleByIndex"): nv.NVML_ERROR_UNKNOWN}, NOT_RUN, "GPU instance id not read"),
])
def test_mig_read_errors_are_not_run_and_keep_the_gpu(tmp_path, fail, status, observed):
    root, gpus = mig_node(tmp_path, count=1, mig={0: MIG[0][:1]})
    record = host(root, fake=hf.fake_pynvml(gpus, fail=fail))
    c = [c for c in checks(record, "host.mig.instance") if c["status"] != PASS]
    assert len(c) == 1 and c[0]["status"] == status and c[0]["observed"].startswith(observed)
    assert one(record, "host.nvml.gpu", "GPU 0")["status"] == PASS
    assert record["evidence"]["gpus"][0]["uuid"] == hf.gpu(0)["uuid"]


def test_compute_processes_per_row(h200):
    record = host(h200, fake=hf.fake_pynvml([hf.gpu(0, processes=[4242])]))
    assert record["evidence"]["gpus"][0]["compute_processes"] == [{"pid": 4242, "used_gpu_memory_bytes": 1 << 20,
                                                                   "gpu_instance_id": None, "compute_instance_id": None}]
    failing = hf.fake_pynvml([hf.gpu()], fail={(0, "nvmlDeviceGetComputeRunningProcesses"): nv.NVML_ERROR_NOT_SUPPORTED})
    assert host(h200, fake=failing)["evidence"]["gpus"][0]["compute_processes"] is None


@pytest.mark.parametrize("text,bus", [
    ("00000000:06:00.0", "0000:06:00.0"),
    ("0000:C1:00.0", "0000:c1:00.0"),
    ("00000001:0A:1F.7", "0001:0a:1f.7"),
    ("01.00.0", "01.00.0"),
    ("", None),
    (None, None),
])
def test_normalize_bus_id(text, bus):
    assert _procfs.normalize_bus_id(text) == bus


@pytest.mark.parametrize("text,fields", [
    (hf.INFORMATION.format(name="NVIDIA H200", irq=0, uuid="GPU-x", bus="0000:06:00.0", minor=3, driver="580.159.04"),
     {"Model": "NVIDIA H200", "GPU UUID": "GPU-x", "Bus Location": "0000:06:00.0", "Device Minor": "3", "GPU Excluded": "No"}),
    # an older driver: no UUID line, "Blacklisted" instead of "GPU Excluded"
    ("Model: \t\t Tesla V100-SXM2-16GB\nIRQ:   \t\t 47\nBus Location: \t 0000:1a:00.0\nDevice Minor: \t 2\nBlacklisted:\t No\n",
     {"Model": "Tesla V100-SXM2-16GB", "Bus Location": "0000:1a:00.0", "Device Minor": "2", "Blacklisted": "No"}),
])
def test_parse_gpu_information(text, fields):
    parsed = _procfs.parse_gpu_information(text)
    assert dict((k, parsed.get(k)) for k in fields) == fields


def test_parse_mig_minors():
    assert _procfs.parse_mig_minors("config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\n\ngarbage\n") == {
        "config": 1, "monitor": 2, "gpu0/gi0/access": 3, "gpu0/gi0/ci0/access": 4}


def test_procfs_gpu_instance_without_compute_instance_warns(tmp_path):
    root, _gpus = mig_node(tmp_path, count=1, mig={0: [hf.mig_device(0, gi=4, ci=0)]})
    ci_dir = os.path.join(root, "proc/driver/nvidia/capabilities/gpu0/mig/gi4/ci0")
    os.unlink(os.path.join(ci_dir, "access"))
    os.rmdir(ci_dir)
    record = _host.record(root=str(root), use_nvml=False)
    assert record["evidence"]["gpus"][0]["mig"]["instances"] == [
        {"uuid": None, "gi": 4, "ci": None, "profile": None, "caps_minors": {"gi": hf.mig_minors_table(1)["gpu0/gi4/access"], "ci": None},
         "compute_processes": None}]
    c = one(record, "host.mig.instance", "GPU 0000:06:00.0 gi4")
    assert c["status"] == WARN and c["observed"] == "GPU instance without a compute instance: not usable by CUDA"


def test_identity_nvml_could_not_read_is_no_disagreement(tmp_path):
    gpus = hf.node_gpus(2)
    root = hf.build_node(tmp_path, gpus=gpus, procfs=True)
    record = host(root, fake=hf.fake_pynvml(gpus, fail={(1, "nvmlDeviceGetUUID"): nv.NVML_ERROR_GPU_IS_LOST}))
    assert one(record, "host.nvml.gpu", "GPU 1")["status"] == FAIL  # said once, where NVML failed
    identity = one(record, "host.gpu.identity", "GPU 1")
    assert identity["status"] == PASS and "uuid %s" % hf.gpu(1)["uuid"] in identity["observed"]  # joined by bus id
    assert record["evidence"]["gpus"][1]["uuid"] is None and record["signature"] == "host.nvml.gpu"
