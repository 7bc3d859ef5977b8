"""Where the runtime handler and the live configuration meet the layers: cdi.engine.config when the engine's CDI is off
and NVIDIA's runtime in cdi mode injects (GPU Operator's handlers, recorded from a real containerd 1.7.24:
tests/unit/fixtures/engines/live), the inspect stage's selection with the k8s record's handlers, the start error of an
unknown handler (containerd's recorded words), the verdict naming the handler, and the option's check."""
import json
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _node
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine as E
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine_live as L
from ansible_collections.gpuprobe.layers.plugins.filter.option_errors import role_options
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.options import value_errors
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import handler as H
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import classify_start_error
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import runtime_identity

LIVE = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines", "live")
OPERATOR_ROOT = os.path.join(LIVE, "gpu-operator-root")
SPEC = "/var/run/cdi/nvidia.yaml"
DEVICE = "nvidia.com/gpu=0"


def operator_engine(option=None, enabled=None):
    with open(os.path.join(LIVE, "containerd-1.7.24-status-gpu-operator.json")) as fh:
        config = H.trim_cri_config(L.status_config(json.load(fh)))
    cfg = L.containerd_live(config, "CRI Status (verbose) at unix:///run/containerd/containerd.sock")
    if enabled is not None:
        cfg["enabled"] = enabled
    info = {"name": "containerd", "version": "1.7.24", "endpoint": "unix:///run/containerd/containerd.sock", "cdi_config": cfg}
    info["runtime_handler"] = H.choose(info, option, root=OPERATOR_ROOT)
    return info


def config_check(info):
    files = [{"path": SPEC, "ok": True, "kind": "nvidia.com/gpu", "devices": ["0"]}]
    checks = E.engine_checks([info], files, {DEVICE: SPEC}, [DEVICE])
    return [c for c in checks if c["id"] == "cdi.engine.config"], dict((c["id"], c) for c in checks)


def test_cdi_off_in_containerd_and_the_nvidia_runtime_in_cdi_mode_injects():
    [check], by_id = config_check(operator_engine("nvidia-cdi"))
    assert check["status"] == "PASS", check
    assert "containerd's CDI is off" in check["observed"] and "nvidia-container-runtime.cdi in cdi mode" in check["observed"]
    assert by_id["cdi.engine.handler"]["status"] == "PASS"
    assert "binary /usr/local/nvidia/toolkit/nvidia-container-runtime.cdi" in by_id["cdi.engine.handler"]["observed"]


def test_cdi_off_and_the_legacy_handler_fails_naming_why():
    [check], _by_id = config_check(operator_engine("nvidia-legacy"))
    assert check["status"] == "FAIL"
    assert "enableCDI is false in the running containerd" in check["observed"] and "legacy mode" in check["observed"]


def test_an_unknown_handler_is_a_warn_in_the_cdi_layer_and_the_engine_has_its_say():
    _checks, by_id = config_check(operator_engine("nvidia-kata", enabled=True))
    assert by_id["cdi.engine.handler"]["status"] == "WARN"
    assert "has no handler nvidia-kata (it has nvidia, nvidia-cdi, nvidia-legacy, runc)" in by_id["cdi.engine.handler"]["observed"]
    with open(os.path.join(LIVE, "containerd-1.7.24-runpodsandbox-unknown-handler.txt")) as fh:
        words = fh.read()
    assert classify_start_error(words) == "runtime.start.unknown_handler"


def test_the_verdict_names_the_handler_its_binary_and_the_injector():
    info = operator_engine("nvidia-cdi", enabled=True)
    identity = runtime_identity({"runtime": {"evidence": {"engine": info}}})
    assert identity["handler"] == {"name": "nvidia-cdi", "source": "option",
                                   "binary": "/usr/local/nvidia/toolkit/nvidia-container-runtime.cdi",
                                   "injector": "containerd's CDI (enableCDI true in the running daemon)"}
    assert "handler" not in runtime_identity({"runtime": {"evidence": {"engine": {"name": "podman", "version": "4.3.1"}}}})


def test_k8s_handlers_from_the_k8s_record():
    assert _node.k8s_handlers(None) is None
    assert _node.k8s_handlers({"status": "NOT_RUN", "reason": "no kubeconfig"}) == {"error": "k8s NOT_RUN: no kubeconfig"}
    found = {"node": "gpu-1", "gpu_pods": [], "error": None}
    assert _node.k8s_handlers({"status": "PASS", "evidence": {"runtime_handlers": found}}) is found


def test_selected_engines_choose_the_handler_with_the_k8s_record(monkeypatch):
    info = operator_engine()
    info.pop("runtime_handler")
    cfg = info.pop("cdi_config")
    monkeypatch.setattr(_runtime_select, "select_runtimes", lambda *a, **k: [dict(info, usable=True, cri_config={"x": 1})])
    monkeypatch.setattr(E, "read_engine_config", lambda i, timeout=None: cfg)
    monkeypatch.setattr(H, "NVIDIA_CONFIG", "/nonexistent/config.toml")
    k8s = {"status": "PASS", "evidence": {"runtime_handlers": {"node": "gpu-1", "gpu_pods": [
        {"on_this_node": True, "runtime_class": "nvidia-cdi", "handler": "nvidia-cdi"}]}}}
    p = {"root": "/", "runtime": ["containerd"], "runtime_endpoint": None, "cri_descriptor": None, "runtime_timeout": 5,
         "runtime_handler": None}
    [engine] = _node.selected_engines(p, k8s=k8s)
    assert "cri_config" not in engine      # judged into cdi_config, not carried in the record
    assert (engine["runtime_handler"]["name"], engine["runtime_handler"]["source"]) == ("nvidia-cdi", "k8s")
    [engine] = _node.selected_engines(dict(p, runtime_handler="nvidia-legacy"), k8s=k8s)
    assert (engine["runtime_handler"]["name"], engine["runtime_handler"]["source"]) == ("nvidia-legacy", "option")
    [engine] = _node.selected_engines(p, k8s={"status": "NOT_RUN", "reason": "no kubeconfig"})
    assert engine["runtime_handler"]["source"] == "default" and "k8s NOT_RUN: no kubeconfig" in engine["runtime_handler"]["why"]


@pytest.mark.parametrize("value, ok", [("nvidia-cdi", True), ("", True), (None, True), ("Nvidia", False),
                                       ("a" * 64, False), ("x/y", False)])
def test_the_option_is_a_dns_label(value, ok):
    assert (H.check_handler(value) == (value or None)) if ok else pytest.raises(ValueError, H.check_handler, value)
    errors = value_errors({"verify_probe_runtime_handler": value}, role_options()) if value is not None else []
    assert bool(errors) is not ok, errors
