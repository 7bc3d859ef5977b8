"""Pure parts of the probe script: mountinfo/maps/ldconfig parsing, CUresult names, verification, output folding."""
import json

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _probe

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
    assert "mad.lo.s32 %r6, %r5, 3, 7" in _probe.PTX  # out[i] = i * 3 + 7, as verify expects


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
    out = _probe.parse_output(text)
    assert out["complete"] and out["compute_requested"] and out["hung_step"] is None
    assert out["facts"] == {"cuda_driver_api": 13000} and out["noise"] == ["a stray line"]


def test_parse_output_killed_mid_call_names_the_hung_step():
    out = _probe.parse_output(_lines({"kind": "start"}, {"kind": "begin", "step": "cuInit"}))
    assert out["hung_step"] == "cuInit" and not out["complete"] and out["inventory"] is None


def test_main_without_compute_runs_here(capsys):
    assert _probe.main(["probe", json.dumps({"nodes": ["/dev/null", "/nonexistent/node"], "capture_env": False})]) == 0
    out = _probe.parse_output(capsys.readouterr().out)
    nodes = out["inventory"]["nodes"]
    assert nodes["/dev/null"]["type"] == "c" and (nodes["/dev/null"]["major"], nodes["/dev/null"]["minor"]) == (1, 3)
    assert nodes["/dev/null"]["open"] == "OK"
    assert nodes["/nonexistent/node"] == {"path": "/nonexistent/node", "present": False, "stat_error": "ENOENT"}
    assert set(out["inventory"]["env"]) <= {"PATH", "LD_LIBRARY_PATH"}
    assert out["complete"] and out["steps"] == []


def test_main_rejects_bad_config(capsys):
    assert _probe.main(["probe", "{not json"]) == 2
    assert "bad config" in capsys.readouterr().out
