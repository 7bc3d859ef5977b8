"""_nvml.read_nvml against a fake pynvml module that raises the real pynvml.NVMLError instances."""
import os

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host import nvml as _nvml

nv = hf.real_pynvml


def test_reads_every_attribute_and_shuts_down():
    fake = hf.fake_pynvml([hf.gpu(0, mig=(0, 0), processes=[11, 12]), hf.gpu(1, persistence=0, compute_mode=3)])
    ev = _nvml.read_nvml(fake)
    assert ev["ok"] and ev["error"] is None and ev["gpu_count"] == 2 and ev["errors"] == {}
    g0, g1 = ev["gpus"]
    assert set(g0.pop("health")) >= {"ecc_mode", "ecc_errors", "remapped_rows", "pcie", "fabric", "errors"}
    assert g0 == {"index": 0, "name": "NVIDIA H200", "uuid": hf.gpu(0)["uuid"], "pci_bus_id": "00000000:06:00.0", "minor_number": 0,
                  "mig_mode": {"current": 0, "pending": 0}, "mig_devices": [], "persistence_mode": True, "compute_mode": "Default",
                  "memory_total_bytes": hf.H200_MEMORY, "errors": {},
                  "compute_processes": [{"pid": 11, "used_gpu_memory_bytes": 1 << 20, "gpu_instance_id": None, "compute_instance_id": None},
                                        {"pid": 12, "used_gpu_memory_bytes": 1 << 20, "gpu_instance_id": None, "compute_instance_id": None}]}
    assert (g1["persistence_mode"], g1["compute_mode"], g1["mig_mode"], g1["mig_devices"]) == (False, "Exclusive_Process", None, None)
    assert "mig_mode" in g1["errors"]
    assert "nvmlDeviceGetMaxMigDeviceCount" not in fake.calls  # MIG disabled / not supported: no MIG device is asked for
    assert fake.calls[0] == "nvmlInit" and fake.calls[-1] == "nvmlShutdown"


@pytest.mark.parametrize("code,name", [
    (nv.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    (nv.NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"),
    (nv.NVML_ERROR_NO_PERMISSION, "NVML_ERROR_NO_PERMISSION"),
])
def test_init_error_is_exact(code, name):
    ev = _nvml.read_nvml(hf.fake_pynvml([hf.gpu()], init_error=code))
    assert not ev["ok"] and ev["gpus"] == [] and ev["gpu_count"] is None
    assert ev["error"] == "%s (%s, code %d)" % (nv.NVMLError(code), name, code)
    assert _nvml.error_meaning(ev["error"]) == _nvml.NVML_ERROR_MEANINGS.get(name)


def test_per_call_errors_keep_the_gpu():
    fail = {(0, "nvmlDeviceGetMemoryInfo"): nv.NVML_ERROR_UNKNOWN, (0, "nvmlDeviceGetPciInfo"): nv.NVML_ERROR_TIMEOUT}
    fake = hf.fake_pynvml([hf.gpu()], fail=fail)
    g = _nvml.read_nvml(fake)["gpus"][0]
    assert g["name"] == "NVIDIA H200" and g["minor_number"] == 0
    assert g["memory_total_bytes"] is None and g["pci_bus_id"] is None
    assert g["errors"]["memory_total_bytes"] == "Unknown Error (NVML_ERROR_UNKNOWN, code 999)"
    assert "NVML_ERROR_TIMEOUT" in g["errors"]["pci_bus_id"]


def test_handle_error_leaves_identity_empty():
    fake = hf.fake_pynvml([hf.gpu()], fail={(0, "nvmlDeviceGetHandleByIndex"): nv.NVML_ERROR_GPU_IS_LOST})
    g = _nvml.read_nvml(fake)["gpus"][0]
    assert g["name"] is None and "NVML_ERROR_GPU_IS_LOST" in g["errors"]["handle"]


def test_library_not_found_retries_with_the_driver_root_library():
    fake = hf.fake_pynvml([hf.gpu()], init_error=nv.NVML_ERROR_LIBRARY_NOT_FOUND)
    loaded = []

    def loader(path):  # the ctypes boundary: on a GPU node this is dlopen(path, RTLD_GLOBAL)
        loaded.append(path)
        fake.state["init_error"] = None

    ev = _nvml.read_nvml(fake, fallback_library="/usr/local/nvidia/lib64/libnvidia-ml.so.1", loader=loader)
    assert ev["ok"] and ev["library_path"] == "/usr/local/nvidia/lib64/libnvidia-ml.so.1" and ev["error"] is None
    assert loaded == ["/usr/local/nvidia/lib64/libnvidia-ml.so.1"] and fake.calls.count("nvmlInit") == 2


def test_fallback_failure_reports_both_errors():
    fake = hf.fake_pynvml([hf.gpu()], init_error=nv.NVML_ERROR_LIBRARY_NOT_FOUND)

    def loader(path):
        raise OSError("%s: cannot open shared object file" % path)

    ev = _nvml.read_nvml(fake, fallback_library="/x/libnvidia-ml.so.1", loader=loader)
    assert not ev["ok"] and ev["library_path"] is None
    assert ev["error"].startswith("NVML Shared Library Not Found (NVML_ERROR_LIBRARY_NOT_FOUND, code 12); after loading /x/libnvidia-ml.so.1: OSError")


def test_other_init_errors_do_not_trigger_the_fallback():
    fake = hf.fake_pynvml([hf.gpu()], init_error=nv.NVML_ERROR_DRIVER_NOT_LOADED)
    ev = _nvml.read_nvml(fake, fallback_library="/x/libnvidia-ml.so.1", loader=lambda p: pytest.fail("loaded %s" % p))
    assert not ev["ok"] and fake.calls == ["nvmlInit"]


@pytest.mark.parametrize("value,text", [(13000, "13.0"), (12020, "12.2"), (11080, "11.8"), (None, None)])
def test_cuda_version_text(value, text):
    assert _nvml.cuda_version_text(value) == text


def test_import_pynvml_returns_module_or_error(monkeypatch):
    module, error = _nvml.import_pynvml()
    assert module is nv and error is None
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    module, error = _nvml.import_pynvml()
    assert module is None and error.startswith("ModuleNotFoundError: ")


def test_isolated_reader_returns_what_read_nvml_returns():
    gpus = [hf.gpu(0, mig=(0, 0), processes=[7]), hf.gpu(1), hf.gpu(2, mig_devices=[hf.mig_device(2, gi=1)])]
    isolated, direct = _nvml.read_nvml_isolated(hf.fake_pynvml(gpus), timeout=20), _nvml.read_nvml(hf.fake_pynvml(gpus))
    for ev in (isolated, direct):   # the seconds between the two replay counter readings differ from run to run
        for gpu in ev["gpus"]:
            assert 0 <= gpu["health"]["pcie"].pop("replay_interval_s") < 5
    assert isolated == direct


def test_isolated_reader_reports_a_dead_child():
    fake = hf.fake_pynvml([hf.gpu()])
    fake.nvmlInit = lambda: os._exit(3)
    ev = _nvml.read_nvml_isolated(fake, timeout=20)
    assert not ev["ok"] and ev["error"] == "the NVML reader died without an answer"


# what the fake NVML gives per MIG device: the SRAM count 0, NVML_ERROR_NOT_SUPPORTED for the other non-DRAM memories
_NS = "Not Supported (NVML_ERROR_NOT_SUPPORTED, code 3)"
MIG_HEALTH = {"sram_uncorrected_volatile": {"l1_cache": None, "l2_cache": None, "register_file": None, "texture_memory": None,
                                            "texture_shm": None, "cbu": None, "sram": 0},
              "errors": dict(("sram_" + k, _NS) for k in ("l1_cache", "l2_cache", "register_file", "texture_memory",
                                                          "texture_shm", "cbu"))}


def test_reads_mig_devices_of_a_mig_enabled_gpu():
    devs = [hf.mig_device(0, gi=1), hf.mig_device(0, gi=2, ci=0, profile="3g.71gb")]
    fake = hf.fake_pynvml([hf.gpu(0, mig_devices=devs), hf.gpu(1, mig=(0, 1))])
    g0, g1 = _nvml.read_nvml(fake)["gpus"]
    assert g0["mig_mode"] == {"current": 1, "pending": 1} and g0["errors"] == {}
    assert g0["mig_devices"] == [
        {"slot": 0, "uuid": devs[0]["uuid"], "name": "NVIDIA H200 MIG 1g.18gb", "profile": "1g.18gb", "gi": 1, "ci": 0,
         "compute_processes": [], "errors": {}, "health": MIG_HEALTH},
        {"slot": 1, "uuid": devs[1]["uuid"], "name": "NVIDIA H200 MIG 3g.71gb", "profile": "3g.71gb", "gi": 2, "ci": 0,
         "compute_processes": [], "errors": {}, "health": MIG_HEALTH}]
    # the empty slots 2..6 answered NOT_FOUND: not an error, not a device
    assert fake.calls.count("nvmlDeviceGetMigDeviceHandleByIndex") == 7
    # MIG pending but not current: no MIG device to ask for
    assert g1["mig_devices"] == [] and g1["errors"] == {}


def test_mig_device_errors_are_kept_per_device_and_per_gpu():
    devs = [hf.mig_device(0, gi=1), hf.mig_device(0, gi=2)]
    fail = {((0, 0), "nvmlDeviceGetMigDeviceHandleByIndex"): nv.NVML_ERROR_UNKNOWN,
            ((0, 1), "nvmlDeviceGetComputeInstanceId"): nv.NVML_ERROR_NO_PERMISSION}
    g = _nvml.read_nvml(hf.fake_pynvml([hf.gpu(0, mig_devices=devs)], fail=fail))["gpus"][0]
    first, second = g["mig_devices"]
    assert first["uuid"] is None and first["errors"] == {"handle": "Unknown Error (NVML_ERROR_UNKNOWN, code 999)"}
    assert second["uuid"] == devs[1]["uuid"] and second["gi"] == 2 and second["ci"] is None
    assert "NVML_ERROR_NO_PERMISSION" in second["errors"]["ci"]
    g = _nvml.read_nvml(hf.fake_pynvml([hf.gpu(0, mig_devices=devs)],
                                       fail={(0, "nvmlDeviceGetMaxMigDeviceCount"): nv.NVML_ERROR_NOT_SUPPORTED}))["gpus"][0]
    assert g["mig_devices"] is None and "NVML_ERROR_NOT_SUPPORTED" in g["errors"]["mig_devices"] and g["uuid"] == hf.gpu(0)["uuid"]


@pytest.mark.parametrize("name,profile", [
    ("NVIDIA H200 MIG 1g.18gb", "1g.18gb"),
    ("NVIDIA A100-SXM4-40GB MIG 1c.3g.20gb", "1c.3g.20gb"),
    ("NVIDIA H200", None),
    (None, None),
])
def test_mig_profile(name, profile):
    assert _nvml.mig_profile(name) == profile
