"""gpuprobe.layers.host_facts main() through patch_module_args, over fixture trees (pynvml faked in sys.modules)."""
import json

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, validate_record
from ansible_collections.gpuprobe.layers.plugins.modules import host_facts


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            host_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0, out
    return out


@pytest.mark.parametrize("check_mode", [False, True])
def test_main_returns_only_facts_unchanged(tmp_path, capsys, monkeypatch, check_mode):
    root = hf.build_node(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", hf.fake_pynvml([hf.gpu()]))
    args = {"root": str(root)}
    if check_mode:
        args["_ansible_check_mode"] = True
    out = run_main(capsys, args)
    assert out["changed"] is False and "failed" not in out
    assert set(out) - {"invocation"} == {"changed", "ansible_facts"}
    record = out["ansible_facts"]["gpuprobe_host"]
    assert validate_record(record) == []
    assert record["status"] == PASS and record["evidence"]["driver_root"] == "/usr/local/nvidia"
    assert record["evidence"]["nvml"]["gpus"][0]["name"] == "NVIDIA H200"


def test_main_options_nvml_false_and_driver_root(tmp_path, capsys):
    root = hf.build_node(tmp_path, driver_root="/run/nvidia/driver", lib_dir="usr/lib/x86_64-linux-gnu")
    out = run_main(capsys, {"root": str(root), "nvml": False, "driver_root": "/run/nvidia/driver"})
    record = out["ansible_facts"]["gpuprobe_host"]
    assert record["evidence"]["driver_root"] == "/run/nvidia/driver" and record["evidence"]["driver_root_given"] == "/run/nvidia/driver"
    init = [c for c in record["checks"] if c["id"] == "host.nvml.init"][0]
    assert init["status"] == NOT_RUN and init["observed"] == "disabled by option (nvml: false)"
    assert record["status"] == PASS


def test_main_on_a_node_without_gpu_exits_cleanly(tmp_path, capsys, monkeypatch):
    root = hf.build_node(tmp_path, kernel_version=None, lib_version=None, modules=())
    monkeypatch.setitem(__import__("sys").modules, "pynvml",
                        hf.fake_pynvml(init_error=hf.real_pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    out = run_main(capsys, {"root": str(root)})
    record = out["ansible_facts"]["gpuprobe_host"]
    assert record["status"] == FAIL and record["reason"].startswith("no NVIDIA driver / device nodes: ")


def test_main_rejects_unknown_options(capsys):
    with patch_module_args({"bogus": 1}):
        with pytest.raises(SystemExit) as exc:
            host_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 1 and "bogus" in out["msg"]


def test_main_thresholds_and_dcgm_diag_options(tmp_path, capsys, monkeypatch):
    root = hf.build_node(tmp_path)
    monkeypatch.setitem(__import__("sys").modules, "pynvml", hf.fake_pynvml([hf.gpu(pcie=dict(
        hf.H200_READINGS["pcie"], nvmlDeviceGetPcieReplayCounter=17))]))
    out = run_main(capsys, {"root": str(root), "health_thresholds": {"pcie_replay_warn": 20}, "dcgm_diag": 1})
    record = out["ansible_facts"]["gpuprobe_host"]
    assert record["evidence"]["health"]["thresholds"]["pcie_replay_warn"] == 20
    replay = [c for c in record["checks"] if c["id"] == "host.health.pcie_replay"][0]
    # the option sets the since-load limit (DCGM's rate rule beside it is worded after it)
    assert (replay["status"], replay["expected"].split(" since")[0], replay["observed"].split(" ")[0]) == (PASS, "< 20", "17")
    dcgm = [c for c in record["checks"] if c["id"] == "host.health.dcgm_diag"]
    assert [(c["status"], c["observed"]) for c in dcgm] == [(NOT_RUN, "dcgmi diag only runs when root is /")]


def test_main_refuses_an_unknown_threshold(capsys):
    with patch_module_args({"health_thresholds": {"replays": 3}}):
        with pytest.raises(SystemExit) as exc:
            host_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 1 and out["msg"].startswith("health_thresholds: unknown threshold 'replays' (known: ")
