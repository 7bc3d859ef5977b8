"""The host layer on the real reference GPU host (H200, driver 580.159.04 in /usr/local/nvidia).

Run there with GPUPROBE_GPU=1 (scripts/gpu-e2e.sh); skipped everywhere else. Nothing is faked.
"""
import os
import stat

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.busy import gpu_compute_processes
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.layer import record as host_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN, validate_record

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs the GPU host (GPUPROBE_GPU=1)")]
DRIVER = os.environ.get("GPUPROBE_EXPECT_DRIVER", "580.159.04")


@pytest.fixture(scope="module")
def record():
    return host_record(root="/")


def test_host_layer_passes(record):
    assert validate_record(record) == []
    # host.health.* WARNs (a PCIe replay, an application's Xid 13 earlier in this boot) are the machine's history,
    # recorded by tests/gpu/test_health_gpu.py; every other check PASSes or did not run
    other = [c for c in record["checks"] if c["status"] not in (PASS, NOT_RUN) and not (
        c["status"] == WARN and c["id"].startswith("host.health."))]
    assert record["status"] in (PASS, WARN) and other == [], (record["reason"], other)


def test_an_nvidia_h200_through_nvml(record):
    nvml = record["evidence"]["nvml"]
    assert nvml["ok"] and nvml["gpu_count"] >= 1
    assert any("H200" in g["name"] for g in nvml["gpus"])
    assert all(g["uuid"].startswith("GPU-") and isinstance(g["minor_number"], int) for g in nvml["gpus"])
    assert gpu_compute_processes(record) is not None


def test_driver_version_agrees_everywhere(record):
    ev = record["evidence"]
    assert ev["nvml"]["driver_version"] == DRIVER
    assert ev["kernel_module"]["proc_driver_version"] == DRIVER == ev["kernel_module"]["sys_module_version"]
    assert ev["libraries"]["libcuda"]["version"] == DRIVER == ev["libraries"]["libnvidia-ml"]["version"]
    assert record["versions"]["driver"] == DRIVER and record["versions"]["kernel_module"] == DRIVER


def test_device_nodes_are_char_devices(record):
    nodes = record["evidence"]["device_nodes"]
    for path in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"):
        assert nodes[path]["exists"] and nodes[path]["type"] == "char", path
        st = os.stat(path)
        assert stat.S_ISCHR(st.st_mode) and (os.major(st.st_rdev), os.minor(st.st_rdev)) == (nodes[path]["major"], nodes[path]["minor"])
    assert (nodes["/dev/nvidiactl"]["major"], nodes["/dev/nvidiactl"]["minor"]) == (195, 255)
    assert (nodes["/dev/nvidia-uvm"]["minor"], nodes["/dev/nvidia-uvm-tools"]["minor"]) == (0, 1)


def test_driver_root_is_usr_local_nvidia(record):
    assert record["evidence"]["driver_root"] == "/usr/local/nvidia"
    assert record["evidence"]["libraries"]["libcuda"]["path"].startswith("/usr/local/nvidia/lib")


def test_inventory_row_per_nvml_gpu_cross_checked_with_procfs(record):
    """evidence.gpus (docs/contract.md): one NVML row per GPU, its node, and NVML = /proc/driver/nvidia/gpus per GPU."""
    ev = record["evidence"]
    rows = ev["gpus"]
    assert [r["uuid"] for r in rows] == [g["uuid"] for g in ev["nvml"]["gpus"]] and rows
    for row in rows:
        assert row["source"] == "nvml" and row["device_node"] == "/dev/nvidia%d" % row["minor"]
        assert row["pci_bus_id"] and os.path.isdir("/proc/driver/nvidia/gpus/%s" % row["pci_bus_id"])
        assert row["compute_processes"] is not None and row["mig"]["mode_current"] in ("enabled", "disabled")
    identity = [c for c in record["checks"] if c["id"] == "host.gpu.identity"]
    assert len(identity) == len(rows) and {c["status"] for c in identity} == {PASS}, identity
