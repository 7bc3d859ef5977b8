"""Runtime detection follows the configured timeout (issue 34 item 6): every question to an engine while the runtimes
are selected and their CDI configuration read (podman --version / podman info, docker info, the CRI Version and Status
calls, containerd config dump, crio status config), and the runtime layer's own detection, take the run's timeout,
never a fixed 30 s. The engines are replaced at the boundary: the command runner and the CRI client record the timeout
each call was given."""
import importlib
import json

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri
from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine as cdi_engine
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args

layer_mod = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layer")

TIMEOUT = 7
PODMAN_INFO = "4.3.1|runc|runc version 1.1.5|2"
DOCKER_INFO = json.dumps({"ServerVersion": "26.1.5", "CDISpecDirs": ["/etc/cdi", "/var/run/cdi"]})


class Recorder(object):
    """The command runner and the CRI client of the detection, recording (what, timeout) per call."""

    def __init__(self):
        self.calls = []
        self.answer = "containerd"   # the engine the CRI Version call names

    def run(self, argv, timeout=None, **_kwargs):
        self.calls.append((" ".join(str(a) for a in argv[:3]), timeout))
        if argv[1:2] == ["--version"]:
            out = "podman version 4.3.1"
        elif argv[1:2] == ["info"] and "podman" in argv[0]:
            out = PODMAN_INFO
        elif argv[1:2] == ["info"]:
            out = DOCKER_INFO
        else:
            return {"rc": 1, "stdout": "", "stderr": "not here", "error": None}
        return {"rc": 0, "stdout": out, "stderr": "", "error": None}

    def client(self):
        recorder = self

        class Client(object):
            def __init__(self, endpoint, descriptor=None, timeout=None):
                recorder.calls.append(("CRIClient", timeout))
                self.timeout = timeout   # what a call given no timeout gets (_cri.CRIClient.call)

            def version(self, timeout=None):
                recorder.calls.append(("Version", self.timeout if timeout is None else timeout))
                return {"runtime_name": recorder.answer, "runtime_version": "1.7.24", "runtime_api_version": "v1"}

            def call(self, method, request=None, timeout=None):
                recorder.calls.append((method, self.timeout if timeout is None else timeout))
                return {"info": {"config": json.dumps({"enableCDI": True, "cdiSpecDirs": ["/etc/cdi"]})}}

            def close(self):
                pass
        return Client


@pytest.fixture
def recorder(monkeypatch, tmp_path):
    rec = Recorder()
    for mod in (_runtime_select, cdi_engine):
        monkeypatch.setattr(mod, "run", rec.run)
        monkeypatch.setattr(mod, "which", lambda name: "/usr/bin/%s" % name if name in ("podman", "docker", "containerd", "crio") else None)
    monkeypatch.setattr(_cri, "load_libs", lambda: True)
    monkeypatch.setattr(_cri, "CRIClient", rec.client())
    monkeypatch.setattr(cdi_engine, "_proc_cmdlines", lambda name: [(1, ["containerd"], "/usr/bin/containerd")])
    sock = tmp_path / "cri.sock"
    sock.write_text("")
    rec.endpoint = "unix://%s" % sock
    return rec


@pytest.mark.parametrize("runtime,probe_follows", [
    (["podman"], True), (["podman"], False), (["docker"], True), (["containerd"], True), (["crio"], True),
    (["podman", "docker"], True),
])
def test_the_runtime_selection_asks_every_engine_with_the_runtime_timeout(recorder, runtime, probe_follows):
    endpoint = recorder.endpoint if set(runtime) & {"containerd", "crio"} else None
    p = {"root": "/", "runtime": runtime, "runtime_endpoint": endpoint, "cri_descriptor": "/x.desc",
         "runtime_timeout": TIMEOUT}
    recorder.answer = "cri-o" if "crio" in runtime else "containerd"
    engines = _inspect.selected_engines(p, probe_follows=probe_follows)
    assert [e["name"] for e in engines] == runtime
    assert recorder.calls, "no engine was asked"
    assert [c for c in recorder.calls if c[1] != TIMEOUT] == [], recorder.calls


def test_the_runtime_timeout_is_an_option_of_the_inspect_stage_and_checked():
    assert _args.NODE_LAYERS_ARGSPEC["runtime_timeout"] == {"type": "int", "default": 120}
    assert "runtime_timeout" not in _args.VERIFY_NODE_ARGSPEC  # verify_node passes its probe_timeout
    p = dict((name, spec.get("default")) for name, spec in _args.NODE_LAYERS_ARGSPEC.items())
    with pytest.raises(ValueError, match="runtime_timeout must be a number of seconds > 0"):
        _inspect.inspect(dict(p, layers=[], runtime_timeout=-1))


def test_the_runtime_layer_detects_with_the_probe_timeout(monkeypatch):
    asked = []

    def select(requested, timeout=None, **_kwargs):
        asked.append(timeout)
        return [{"name": "podman", "usable": False, "path": None, "reason": "not here"}]
    monkeypatch.setattr(layer_mod, "select_runtimes", select)
    record, probe = layer_mod.record({"run_id": "t1", "image": "localhost/gpuprobe-probe:local", "runtime": "podman",
                                      "cdi_devices": ["nvidia.com/gpu=0"], "timeout": TIMEOUT})
    assert asked == [TIMEOUT] and record["status"] == "NOT_RUN" and probe is None
