"""The runtime handler, the injector and the running engine's configuration, through a REAL containerd 1.7.24 (the engines
lab's binary) started privately by containerd_lab.py with runtime handlers of the test's own:

- ``gpuprobe-default`` (the default_runtime_name) and ``gpuprobe-second``: wrappers around runc that record each call;
- ``gpuprobe-refuser``: an OCI runtime binary that refuses every call.

The probe must go through the handler named (the option ``runtime_handler``, else the engine's default from the live
CRI config): the wrapper of that handler, and only it, records the sandbox's and the container's runc calls; the record
names the handler, its binary and the injector. A handler whose binary refuses is FAILED_AT_RUNTIME pointing at runtime;
one the engine does not know is FAIL with containerd's words (RunPodSandbox).

Live configuration: a containerd started with CDI off whose FILE is then edited to on (no restart) is CDI off for the
verdict (FAILED_AT_CDI, cdi.engine.config) with a cdi.engine.file WARN naming both; the mirror case (started on, file
edited off) injects the device (runtime PASS) with the same WARN.

The selection, the cdi layer and the probe are the node's own code (_node.selected_engines, _cdi.layer.record,
_runtime.layer.record); the spec is real (/var/run/cdi, a kind of the test's own), the device a synthetic char node."""
import os

import pytest

import containerd_lab as lab
from test_runtime_podman import IMAGE, Lab

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _node
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration


def _skip_unless_lab(probe_image=True):
    why = lab.missing()
    if why:
        pytest.skip(why)
    if probe_image and not os.path.exists(lab.PROBE_TAR):
        pytest.skip("no probe image archive at %s (scripts/engines.sh start containerd saves it)" % lab.PROBE_TAR)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """containerd with CDI on, three handlers of the test's own, the pause and probe images imported."""
    _skip_unless_lab()
    base = tmp_path_factory.mktemp("ctd-handlers")
    bins = {"gpuprobe-default": lab.recorder(str(base), "gpuprobe-default"),
            "gpuprobe-second": lab.recorder(str(base), "gpuprobe-second"),
            "gpuprobe-refuser": lab.refuser(str(base), "gpuprobe-refuser")}
    d = lab.Containerd(base, enable_cdi=True, default="gpuprobe-default", handlers=bins)
    d.bins = bins
    d.start(images=(lab.PAUSE_TAR, lab.PROBE_TAR))
    yield d
    d.stop()


@pytest.fixture
def synthetic(tmp_path):
    """A synthetic GPU (char nodes, a library file) and a real spec for it in /var/run/cdi."""
    one = Lab(tmp_path)
    one.write_spec(one.full_edits())
    yield one
    if os.path.exists(one.spec_path):
        os.unlink(one.spec_path)


def _engines(d, handler=None):
    """What the node's inspect stage selects and reads: the engine at the daemon's socket, its live CDI configuration
    with the file beside it, the handler and the injector."""
    p = {"root": "/", "runtime": ["containerd"], "runtime_endpoint": d.endpoint, "cri_descriptor": lab.DESCRIPTOR,
         "runtime_timeout": 30, "runtime_handler": handler}
    engines = _node.selected_engines(p)
    assert len(engines) == 1 and engines[0]["usable"], engines
    return engines


def _cdi_record(one, engines):
    record = _cdi.record(spec_dirs=[os.path.dirname(one.spec_path)], discover_runtime_dirs_=False, devices=[one.device],
                         kinds=[one.kind], root="/", runtime="containerd", engines=engines)
    assert validate_record(record) == []
    return record


def _probe(one, engine):
    params = {"run_id": one.run_id, "image": IMAGE, "cdi_devices": [one.device], "expected_edits": one.full_edits(),
              "compute": False, "timeout": 60, "runtime": "containerd", "engine": engine}
    record, _probe_out = _runtime.record(params)
    assert validate_record(record) == []
    with _cri_client(engine) as client:
        assert list(client.list_pod_sandboxes({"gpuprobe.run": one.run_id})) == [], "the probe's sandbox was left"
    return record


def _cri_client(engine):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri  # pylint: disable=import-outside-toplevel
    return _cri.CRIClient(engine["endpoint"], lab.DESCRIPTOR)


def _check(record, check_id):
    return [c for c in record["checks"] if c["id"] == check_id]


def _runc_creates(binary):
    return [line for line in lab.calls(binary) if " create " in " %s " % line]


def test_the_probe_runs_with_the_default_handler_of_the_live_config(daemon, synthetic):
    before = {n: len(_runc_creates(b)) for n, b in daemon.bins.items()}
    [engine] = _engines(daemon)
    handler = engine["runtime_handler"]
    assert (handler["name"], handler["request"], handler["source"], handler["known"]) == ("gpuprobe-default", "", "default", True)
    assert handler["binary"] == daemon.bins["gpuprobe-default"]
    assert handler["injector"]["by"] == "engine"
    record = _probe(synthetic, engine)
    assert record["status"] == "PASS", record["reason"]
    after = {n: len(_runc_creates(b)) for n, b in daemon.bins.items()}
    # the sandbox and the probe container: two runc create calls through the default handler's binary, none elsewhere
    assert after["gpuprobe-default"] - before["gpuprobe-default"] >= 2, lab.calls(daemon.bins["gpuprobe-default"])
    assert (after["gpuprobe-second"], after["gpuprobe-refuser"]) == (before["gpuprobe-second"], before["gpuprobe-refuser"])
    [check] = _check(record, "runtime.engine.handler")
    assert check["status"] == "PASS"
    assert "handler gpuprobe-default (default): binary %s" % daemon.bins["gpuprobe-default"] in check["observed"]
    assert "containerd's CDI (enableCDI true in the running daemon)" in check["observed"]
    verdict = node_verdict({"runtime": record})
    assert verdict["runtime"]["handler"]["name"] == "gpuprobe-default"
    assert verdict["runtime"]["handler"]["binary"] == daemon.bins["gpuprobe-default"]


def test_the_probe_runs_with_the_handler_the_option_names(daemon, synthetic):
    before = {n: len(_runc_creates(b)) for n, b in daemon.bins.items()}
    [engine] = _engines(daemon, "gpuprobe-second")
    assert (engine["runtime_handler"]["request"], engine["runtime_handler"]["source"]) == ("gpuprobe-second", "option")
    assert engine["selected_because"].endswith("; the probe's handler: gpuprobe-second (verify_probe_runtime_handler)")
    cdi = _cdi_record(synthetic, [engine])
    [config] = _check(cdi, "cdi.engine.config")[:1]
    assert config["status"] == "PASS", config
    record = _probe(synthetic, engine)
    assert record["status"] == "PASS", record["reason"]
    after = {n: len(_runc_creates(b)) for n, b in daemon.bins.items()}
    assert after["gpuprobe-second"] - before["gpuprobe-second"] >= 2, lab.calls(daemon.bins["gpuprobe-second"])
    assert after["gpuprobe-default"] == before["gpuprobe-default"]
    assert record["evidence"]["container"]["cri"]["sandbox"]["runtime_handler"] == "gpuprobe-second"
    verdict = node_verdict({"runtime": record})
    assert verdict["runtime"]["handler"] == {"name": "gpuprobe-second", "source": "option", "binary": daemon.bins["gpuprobe-second"],
                                             "injector": "containerd's CDI (enableCDI true in the running daemon)"}


def test_a_handler_whose_binary_refuses_fails_at_runtime(daemon, synthetic):
    [engine] = _engines(daemon, "gpuprobe-refuser")
    record = _probe(synthetic, engine)
    assert record["status"] == "FAIL" and record["points_to"] == "runtime", record
    assert _runc_creates(daemon.bins["gpuprobe-refuser"]), "the refusing binary was not called"
    verdict = node_verdict({"runtime": record})
    assert (verdict["verdict"], verdict["points_to"]) == ("FAILED_AT_RUNTIME", "runtime"), verdict
    assert verdict["runtime"]["handler"]["name"] == "gpuprobe-refuser"


def test_a_handler_the_engine_does_not_know_fails_with_its_words(daemon, synthetic):
    [engine] = _engines(daemon, "nvidia-cdi")
    assert engine["runtime_handler"]["known"] is False
    cdi = _cdi_record(synthetic, [engine])
    [handler_check] = _check(cdi, "cdi.engine.handler")
    assert handler_check["status"] == "WARN" and "gpuprobe-default" in handler_check["observed"]
    record = _probe(synthetic, engine)
    assert (record["status"], record["signature"], record["points_to"]) == ("FAIL", "runtime.start.unknown_handler", "runtime")
    assert 'no runtime for "nvidia-cdi" is configured' in record["reason"]
    verdict = node_verdict({"runtime": record})
    assert verdict["verdict"] == "FAILED_AT_RUNTIME" and 'no runtime for "nvidia-cdi" is configured' in verdict["reason"]


def test_the_mirror_case_started_on_file_edited_off_injects(daemon, synthetic):
    daemon.set_file_cdi(False)
    try:
        [engine] = _engines(daemon)
        assert engine["cdi_config"]["enabled"] is True and engine["cdi_config"]["file"]["enabled"] is False
        cdi = _cdi_record(synthetic, [engine])
        assert [c["status"] for c in _check(cdi, "cdi.engine.config")] == ["PASS"]
        [warn] = _check(cdi, "cdi.engine.file")
        assert warn["status"] == "WARN"
        assert "CDI enabled: the file says off (%s/containerd --config %s config dump), the running daemon on (CRI Status " \
               "(verbose) at %s)" % (lab.BIN, daemon.config, daemon.endpoint) in warn["observed"]
        record = _probe(synthetic, engine)
        assert record["status"] == "PASS", record["reason"]     # the daemon injected the device: it has CDI on
        assert [c["status"] for c in _check(record, "runtime.device_node.present")][:1] == ["PASS"]
    finally:
        daemon.set_file_cdi(True)


def test_started_off_file_edited_on_is_cdi_off_for_the_verdict(tmp_path, synthetic):
    _skip_unless_lab(probe_image=False)
    d = lab.Containerd(tmp_path / "ctd", enable_cdi=False)
    os.makedirs(d.base)
    d.start()
    try:
        d.set_file_cdi(True)
        [engine] = _engines(d)
        assert engine["cdi_config"]["enabled"] is False and engine["cdi_config"]["file"]["enabled"] is True
        cdi = _cdi_record(synthetic, [engine])
        [config] = _check(cdi, "cdi.engine.config")
        assert config["status"] == "FAIL" and "enableCDI is false in the running containerd" in config["observed"]
        [warn] = _check(cdi, "cdi.engine.file")
        assert warn["status"] == "WARN" and "the file says on" in warn["observed"] and "the running daemon off" in warn["observed"]
        verdict = node_verdict({"cdi": cdi})
        assert (verdict["verdict"], verdict["signature"]) == ("FAILED_AT_CDI", "cdi.engine.config"), verdict
    finally:
        d.stop()


def test_k3s_gpu_pods_handler_by_its_rule_when_no_cluster_answers(tmp_path, synthetic, monkeypatch):
    """Issue 44 item 4: a k3s node (tests/unit/fixtures/layouts/k3s) whose containerd (a real one, at k3s's socket) has
    runc the default and the handlers k3s adds for the NVIDIA runtimes it finds, nvidia and nvidia-experimental (here
    wrappers around runc that record their calls). No kubeconfig answers, so k3s's own rule names the GPU Pods'
    handler: runtimeClassName nvidia. The probe's sandbox and container run through nvidia's binary, and only it."""
    import tempfile  # pylint: disable=import-outside-toplevel
    import layoutfixture  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import handler as _handler  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel  # pylint: disable=import-outside-toplevel
    _skip_unless_lab()
    short = tempfile.mkdtemp(prefix="gk3s-", dir="/tmp")     # a socket path has 108 bytes
    node = os.path.join(short, "n")
    layoutfixture.build("k3s", node)
    bins = dict((n, lab.recorder(short, n)) for n in ("nvidia", "nvidia-experimental"))
    d = lab.Containerd(os.path.join(node, "run", "k3s", "containerd"), enable_cdi=True, handlers=bins)
    try:
        d.start(images=(lab.PAUSE_TAR, lab.PROBE_TAR))
        monkeypatch.setenv("HOME", "/root")
        [info] = sel.select_runtimes("auto", root=node, descriptor=lab.DESCRIPTOR)
        assert info["usable"] and info["selection"]["layout"] == "k3s", info
        engine = describe(info)
        engine["cdi_config"] = read_engine_config(engine)
        handler = _handler.attach(engine, None, {"error": "k8s NOT_RUN: no kubeconfig"})
        assert (handler["name"], handler["request"], handler["source"], handler["binary"]) == (
            "nvidia", "nvidia", "distribution", bins["nvidia"]), handler
        assert handler["why"].startswith("k3s: GPU Pods name runtimeClassName nvidia (k3s ships the RuntimeClasses nvidia, "
                                         "nvidia-experimental, nvidia-cdi;"), handler["why"]
        assert "the running engine has the handler nvidia (the k8s layer could not read them (k8s NOT_RUN: no kubeconfig))" in handler["why"]
        assert ", handler nvidia (the distribution's rule), the CRI endpoint of the kubelet inside k3s server" in engine["selected_because"]
        record = _probe(synthetic, engine)
        assert record["status"] == "PASS", record["reason"]
        assert len(_runc_creates(bins["nvidia"])) >= 2 and _runc_creates(bins["nvidia-experimental"]) == []
        assert record["evidence"]["container"]["cri"]["sandbox"]["runtime_handler"] == "nvidia"
    finally:
        d.stop()
        import shutil  # pylint: disable=import-outside-toplevel
        shutil.rmtree(short, ignore_errors=True)
