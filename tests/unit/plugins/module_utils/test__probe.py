"""Pure parts of the probe script: mountinfo/maps/ldconfig parsing, CUresult names, verification, output folding."""
import json
import os
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract

MOUNTINFO = (
    "76 51 0:41 / / rw,relatime - overlay overlay rw,lowerdir=/var/lib/containers/storage/overlay/l/X\n"
    "77 76 0:44 / /dev rw,nosuid,noexec - tmpfs tmpfs rw,size=65536k,mode=755\n"
    "96 76 254:0 /tmp/gpt/lib/libcuda.so.1 /usr/lib/x86_64-linux-gnu/libcuda.so.1 ro,nosuid,nodev,relatime - ext4 "
    "/dev/vda rw,discard\n"
    "97 76 254:0 /a\\040b /mnt/with\\040space rw shared:5 master:1 - ext4 /dev/vda rw\n"
    "garbage line\n"
)


def test_parse_mountinfo_fields_and_escapes():
    mounts = _probe.parse_mountinfo(MOUNTINFO)
    assert [m["mount_point"] for m in mounts] == ["/", "/dev", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/mnt/with space"]
    lib = mounts[2]
    assert (lib["root"], lib["fstype"], lib["source"], lib["dev"]) == ("/tmp/gpt/lib/libcuda.so.1", "ext4", "/dev/vda", "254:0")
    assert "ro" in lib["options"]
    assert mounts[3]["root"] == "/a b" and mounts[3]["fstype"] == "ext4"  # optional fields skipped


@pytest.mark.parametrize("code,driver_name,expected", [
    (0, None, "CUDA_SUCCESS"),
    (34, None, "CUDA_ERROR_STUB_LIBRARY"),   # the stub's cuGetErrorName answers nothing
    (35, None, "CUDA_ERROR_INSUFFICIENT_DRIVER"),
    (100, None, "CUDA_ERROR_NO_DEVICE"),
    (221, None, "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"),
    (802, None, "CUDA_ERROR_SYSTEM_NOT_READY"),
    (804, None, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"),
    (999, None, "CUDA_ERROR_UNKNOWN"),
    (12345, None, "CUDA_ERROR_12345"),
    (999, "CUDA_ERROR_FROM_DRIVER", "CUDA_ERROR_FROM_DRIVER"),
])
def test_cu_result_name(code, driver_name, expected):
    assert _probe.cu_result_name(code, driver_name) == expected


@pytest.mark.parametrize("code,expected", [(0, "NVML_SUCCESS"), (9, "NVML_ERROR_DRIVER_NOT_LOADED"),
                                           (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"), (77, "NVML_ERROR_77")])
def test_nvml_result_name(code, expected):
    assert _probe.nvml_result_name(code) == expected


def test_verify_values_checks_every_element():
    good = _probe.expected_values(1024)
    assert good[:3] == [7, 10, 13] and good[-1] == 1023 * 3 + 7
    assert _probe.verify_values(good)["ok"]
    bad = list(good)
    bad[1023] = 0xDEADBEEF
    result = _probe.verify_values(bad)
    assert not result["ok"] and result["mismatches"] == 1
    assert result["first_bad"] == {"index": 1023, "expected": 3076, "observed": 0xDEADBEEF}
    short = _probe.verify_values(good[:10], 1024)
    assert not short["ok"] and short["mismatches"] == 1014 and short["first_bad"]["observed"] is None


def test_ptx_kernel_is_jit_portable():
    assert ".target sm_50" in _probe.PTX and ".version 6.0" in _probe.PTX
    assert ".visible .entry %s(" % _probe.KERNEL_NAME in _probe.PTX
    assert "mad.lo.s32 %r6, %r5, %r7, %r8" in _probe.PTX  # out[i] = i * a + b, a and b kernel parameters
    assert "ld.param.u32 %r7, [a]" in _probe.PTX and "ld.param.u32 %r8, [b]" in _probe.PTX


def test_format_uuid():
    assert _probe.format_uuid(bytes(range(16))) == "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f"


def test_path_for_address_and_maps():
    maps = ("7f0000000000-7f0000001000 r--p 00000000 fe:00 12 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n"
            "7f0000001000-7f0000009000 r-xp 00001000 fe:00 12 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n"
            "7f0000009000-7f000000a000 rw-p 00000000 00:00 0 \n")
    assert _probe.path_for_address(maps, 0x7f0000001500).endswith("libcuda.so.580.159.04")
    assert _probe.path_for_address(maps, 0x7f0000009500) is None
    assert _probe.parse_maps_paths(maps) == {"/usr/local/nvidia/lib64/libcuda.so.580.159.04": (0x7f0000000000, 0x7f0000009000)}


def test_parse_ldconfig():
    text = ("4 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibcuda.so.1 (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so.1\n"
            "\tlibcuda.so (libc6,x86-64) => /usr/local/nvidia/lib64/libcuda.so\n")
    found = _probe.parse_ldconfig(text, ("libcuda.so.1", "libnvidia-ml.so.1"))
    assert found == {"libcuda.so.1": ["/usr/local/nvidia/lib64/libcuda.so.1"], "libnvidia-ml.so.1": []}


def _lines(*items):
    return "\n".join(json.dumps(i) for i in items) + "\n"


def test_parse_output_complete_run():
    text = _lines({"kind": "start", "compute": True}, {"kind": "inventory", "nodes": {}},
                  {"kind": "begin", "step": "cuInit"}, {"kind": "step", "step": "cuInit", "ok": True},
                  {"kind": "fact", "cuda_driver_api": 13000}, {"kind": "done"}) + "a stray line\n"
    out = _probe_contract.parse_output(text)
    assert out["complete"] and out["compute_requested"] and out["hung_step"] is None
    assert out["facts"] == {"cuda_driver_api": 13000} and out["noise"] == ["a stray line"]


def test_parse_output_killed_mid_call_names_the_hung_step():
    out = _probe_contract.parse_output(_lines({"kind": "start"}, {"kind": "begin", "step": "cuInit"}))
    assert out["hung_step"] == "cuInit" and not out["complete"] and out["inventory"] is None


def test_main_without_compute_runs_here(capsys):
    assert _probe.main(["probe", json.dumps({"nodes": ["/dev/null", "/nonexistent/node"], "capture_env": False})]) == 0
    out = _probe_contract.parse_output(capsys.readouterr().out)
    nodes = out["inventory"]["nodes"]
    assert nodes["/dev/null"]["type"] == "c" and (nodes["/dev/null"]["major"], nodes["/dev/null"]["minor"]) == (1, 3)
    assert nodes["/dev/null"]["open"] == "OK"
    assert nodes["/nonexistent/node"] == {"path": "/nonexistent/node", "present": False, "stat_error": "ENOENT"}
    assert set(out["inventory"]["env"]) <= {"PATH", "LD_LIBRARY_PATH"}
    assert out["complete"] and out["steps"] == []


def test_main_rejects_bad_config(capsys):
    assert _probe.main(["probe", "{not json"]) == 2
    assert "bad config" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------
# the device loop, run for real on a fake libcuda (tests/unit/fixtures/cuda/fakecuda.py)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fixtures", "cuda"))
import fakecuda  # noqa: E402  pylint: disable=wrong-import-position

G0 = "GPU-00000000-1111-2222-3333-444444444444"
G1 = "GPU-11111111-1111-2222-3333-444444444444"
G2 = "GPU-22222222-1111-2222-3333-444444444444"
PER_DEVICE = ["cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuModuleLoadData", "cuModuleGetFunction", "cuMemAlloc_v2",
              "cuMemsetD32_v2", "cuLaunchKernel", "cuCtxSynchronize", "cuMemcpyDtoH_v2", "verify out[i] == i*3+7",
              "cuMemFree_v2", "cuModuleUnload", "cuDevicePrimaryCtxRelease_v2"]


def _run(lib, config=None):
    return _probe_contract.parse_output(fakecuda.probe_lines(lib, config))


def test_every_device_is_listed_by_uuid_and_verified_on_its_own():
    lib = fakecuda.FakeCuda([G0, G1])
    out = _run(lib)
    assert out["complete"] and out["hung_step"] is None
    assert [(d["ordinal"], d["uuid"], d["name"], d["skipped"]) for d in out["facts"]["devices"]] == [
        (0, G0, "Fake GPU 0", None), (1, G1, "Fake GPU 1", None)]
    glob = [s["call"] for s in out["steps"] if "device" not in s]
    assert glob == ["dlopen(libcuda.so.1)", "cuInit", "cuDriverGetVersion", "cuDeviceGetCount"]
    for ordinal, uuid in ((0, G0), (1, G1)):
        steps = [s for s in out["steps"] if s.get("device") == ordinal]
        assert [s["call"] for s in steps] == ["cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid_v2"] + PER_DEVICE
        verify = [s for s in steps if s["step"] == "verify"][0]
        assert verify["ok"] and verify["checked"] == 1024 and verify["mismatches"] == 0
        assert all(s["uuid"] == uuid for s in steps if s["step"] not in ("cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid"))
    assert lib.contexts == {0: 0, 1: 0}


def test_a_failing_device_is_released_and_the_next_one_still_runs():
    lib = fakecuda.FakeCuda([G0, G1], fail={("cuMemAlloc", 0): 2})
    out = _run(lib)
    failed = _probe_contract.first_failed_step(out["steps"])
    assert (failed["device"], failed["name"]) == (0, "CUDA_ERROR_OUT_OF_MEMORY")
    dev0 = [s["call"] for s in out["steps"] if s.get("device") == 0]
    assert dev0[-2:] == ["cuModuleUnload", "cuDevicePrimaryCtxRelease_v2"]  # what was acquired is released
    assert [s["ok"] for s in out["steps"] if s.get("device") == 1 and s["step"] == "verify"] == [True]
    assert lib.contexts == {0: 0, 1: 0}


def test_skip_uuids_are_listed_never_touched():
    lib = fakecuda.FakeCuda([G0, G1, G2])
    out = _run(lib, {"skip_uuids": [G1.upper()]})  # UUIDs compare without case or prefix
    assert lib.touched() == [0, 2]
    skipped = [d for d in out["facts"]["devices"] if d["skipped"]]
    assert [(d["ordinal"], d["uuid"]) for d in skipped] == [(1, G1)] and "in use" in skipped[0]["skipped"]
    assert not [s for s in out["steps"] if s.get("device") == 1 and s["step"] not in (
        "cuDeviceGet", "cuDeviceGetName", "cuDeviceGetUuid")]


def test_idle_uuids_are_the_only_devices_touched_and_an_empty_list_touches_none():
    lib = fakecuda.FakeCuda([G0, G1, G2], fail={("cuDeviceGetUuid", 2): 1})
    out = _run(lib, {"idle_uuids": [G1.upper()]})  # UUIDs compare without case or prefix
    assert lib.touched() == [1]
    reasons = dict((d["ordinal"], d["skipped"]) for d in out["facts"]["devices"])
    assert reasons[0] == "not known idle: the host's NVML did not report %s idle, not preempting" % G0
    assert reasons[1] is None and reasons[2] == "not known idle: no UUID to match with the idle ones, not preempting"
    lib = fakecuda.FakeCuda([G0, G1])
    _run(lib, {"idle_uuids": []})
    assert lib.touched() == []


def test_only_uuids_limit_the_run_and_an_unknown_uuid_is_left_alone():
    lib = fakecuda.FakeCuda([G0, G1, G2], fail={("cuDeviceGetUuid", 2): 1})
    out = _run(lib, {"only_uuids": [G1]})
    assert lib.touched() == [1]
    reasons = dict((d["ordinal"], d["skipped"]) for d in out["facts"]["devices"])
    assert reasons[0] == "skipped: not among only_uuids" and reasons[1] is None
    assert reasons[2].startswith("UUID unknown")


def test_a_failed_listing_of_one_device_does_not_stop_the_others():
    lib = fakecuda.FakeCuda([G0, G1], fail={("cuDeviceGet", 0): 101})
    out = _run(lib)
    assert [d["listed"] for d in out["facts"]["devices"]] == [False, True]
    assert lib.touched() == [1]


def test_global_failure_stops_before_listing():
    out = _run(fakecuda.FakeCuda([G0], fail={("cuInit", None): 999}))
    assert [s["call"] for s in out["steps"]] == ["dlopen(libcuda.so.1)", "cuInit"]
    assert out["steps"][-1]["name"] == "CUDA_ERROR_UNKNOWN" and "devices" not in out["facts"]


def test_parse_output_names_the_device_of_a_hung_call():
    out = _probe_contract.parse_output(_lines({"kind": "start"}, {"kind": "begin", "step": "cuCtxSynchronize", "device": 3}))
    assert (out["hung_step"], out["hung_device"]) == ("cuCtxSynchronize", 3)
    out = _probe_contract.parse_output(_lines({"kind": "start"}, {"kind": "begin", "step": "cuInit"}))
    assert (out["hung_step"], out["hung_device"]) == ("cuInit", None)


@pytest.mark.parametrize("value,expected", [(G0, G0[4:]), ("MIG-ABC", "abc"), (" gpu-x ", "x"), (None, "")])
def test_norm_uuid(value, expected):
    assert _probe.norm_uuid(value) == expected
