"""The CRI sweep removes only sandboxes this collection created, in its own namespace (issue 34 item 6): a Pod of
another namespace named and labelled like ours, with a dead owner, stays. The CRI is a stub here (the sandboxes as
ListPodSandbox gives them); tests/integration/test_cri_sweep_namespace.py does the same through a real containerd."""
import importlib
import os
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import CREATED_LABEL, LABEL, OWNER_LABEL

# the modules themselves (the package exports a function named cleanup)
cleanup_mod = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup")
cri_mod = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri")

RUN = "sweep-ns-1"
# a process of this host whose pid now belongs to another process: its run is over
DEAD = _owner.format_owner({"host": _owner.this_host(), "pid": os.getpid(), "started": (_owner.proc_started(os.getpid()) or 0) + 1})


class StubCRI(object):
    """ListPodSandbox (with its label filter) and the removal of a sandbox tree, over a list of sandboxes."""

    def __init__(self, sandboxes):
        self.sandboxes = sandboxes
        self.removed = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def close(self):
        pass

    def list_pod_sandboxes(self, labels=None, timeout=None):  # pylint: disable=unused-argument
        return [s for s in self.sandboxes if all(s["labels"].get(k) == v for k, v in (labels or {}).items())]

    def remove_sandbox_tree(self, sandbox_id, timeout=None):  # pylint: disable=unused-argument
        self.removed.append(sandbox_id)
        self.sandboxes = [s for s in self.sandboxes if s["id"] != sandbox_id]


def _sandbox(sid, namespace, name="gpuprobe-%s-0badc0de" % RUN):
    metadata = {"name": name, "uid": "u-" + sid, "attempt": 0}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"id": sid, "metadata": metadata, "state": "SANDBOX_NOTREADY",
            "labels": {LABEL: RUN, OWNER_LABEL: DEAD, CREATED_LABEL: str(int(time.time()) - 86400)}}


@pytest.fixture
def stub(monkeypatch):
    cri = StubCRI([])
    monkeypatch.setattr(cri_mod.CriEngine, "_client", lambda self, timeout=None: cri)
    monkeypatch.setattr(cleanup_mod, "cri_info", lambda name, endpoint, timeout, descriptor: {
        "name": name, "usable": True, "endpoint": endpoint, "descriptor": descriptor, "reason": None})
    return cri


@pytest.mark.parametrize("namespace", ["default", "kube-system", "gpuprobe-other", "gpuprobe.", "", None])
@pytest.mark.parametrize("sweep", [{"run_id": RUN}, {"max_age": 0}, {}])
def test_a_sandbox_of_another_namespace_is_never_removed(stub, namespace, sweep, tmp_path):
    stub.sandboxes = [_sandbox("foreign", namespace), _sandbox("ours", cri_mod.NAMESPACE)]
    out = cleanup_mod.cleanup(runtime="containerd", endpoint="unix:///run/stub.sock", specs=False, tmp_dir=str(tmp_path),
                              **sweep)
    assert out["errors"] == [], out
    assert stub.removed == ["ours"]  # the control: our leftover of a dead owner goes, the look-alike stays
    assert [s["id"] for s in stub.sandboxes] == ["foreign"]
    assert out["containers"] == ["containerd:gpuprobe-%s-0badc0de" % RUN]


def test_remove_by_name_never_reaches_another_namespace(stub):
    stub.sandboxes = [_sandbox("foreign", "default")]
    engine = cri_mod.CriEngine({"name": "containerd", "endpoint": "unix:///run/stub.sock"})
    assert engine.list_ours() == []
    assert engine.remove("gpuprobe-%s-0badc0de" % RUN) == {"rc": 0, "removed": False, "error": None}
    assert stub.removed == [] and [s["id"] for s in stub.sandboxes] == ["foreign"]
