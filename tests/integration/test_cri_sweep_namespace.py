"""The sweep through a REAL containerd 1.7.24 over the CRI (scripts/engines.sh start, a private socket): a Pod sandbox
in another namespace, named and labelled like ours, with a dead owner, is never removed (issue 34 item 6); the same
sandbox in the collection's own namespace is (the control: the sweep would have removed a real leftover).

Skipped when the engines were not fetched (scripts/engines.sh fetch). containerd is stopped at the end only when this
module started it (other modules of the session may use it)."""
import importlib
import os
import subprocess
import sys
import time
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import engines as _runtime_engines
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import CREATED_LABEL, LABEL, OWNER_LABEL

cri_mod = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri")

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines"))
SCRIPT = os.path.join(ROOT, "scripts", "engines.sh")
ENDPOINT = "unix://" + os.path.join(ENGINES, "run", "containerd", "containerd.sock")


def _sh(*args, timeout=300):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(os.environ, PYTHON=sys.executable))


@pytest.fixture(scope="module")
def containerd():
    if os.geteuid() != 0:
        pytest.skip("needs root")
    if not os.path.isfile(os.path.join(ENGINES, "containerd", ".deb")):
        pytest.skip("engines not fetched (containerd): run scripts/engines.sh fetch")
    r = _sh("stubs", timeout=120)
    if r.returncode != 0:
        pytest.skip("no CRI descriptor: %s" % r.stderr[-300:])
    descriptor = r.stdout.strip()
    r = _sh("start", "containerd")
    assert r.returncode == 0, r.stderr
    started = "already running" not in r.stderr + r.stdout
    try:
        yield descriptor
    finally:
        if started:
            _sh("stop", "containerd", timeout=120)


def test_a_pod_of_another_namespace_like_ours_with_a_dead_owner_stays(containerd):
    descriptor = containerd
    run_id = "nsweep" + uuid.uuid4().hex[:8]
    name = "gpuprobe-%s-0badc0de" % run_id
    # a process of this host whose pid now belongs to another process: the run is over
    dead = _owner.format_owner({"host": _owner.this_host(), "pid": os.getpid(),
                                "started": (_owner.proc_started(os.getpid()) or 0) + 1})
    labels = {LABEL: run_id, OWNER_LABEL: dead, CREATED_LABEL: str(int(time.time()) - 86400)}
    client = _cri.CRIClient(ENDPOINT, descriptor)
    ids = {}
    try:
        for namespace in ("default", cri_mod.NAMESPACE):
            config = client.sandbox_config(name, str(uuid.uuid4()), namespace=namespace, labels=labels)
            ids[namespace] = client.run_pod_sandbox(config, timeout=60)

        def present():
            listed = dict((s["id"], s["metadata"]["namespace"]) for s in client.list_pod_sandboxes({LABEL: run_id}))
            return sorted(listed[i] for i in ids.values() if i in listed)
        assert present() == ["default", cri_mod.NAMESPACE]
        for sweep in ({"max_age": 0}, {"run_id": run_id}):
            out = _runtime_cleanup.cleanup(runtime="containerd", endpoint=ENDPOINT, descriptor=descriptor, specs=False, **sweep)
            assert out["errors"] == [], out
        assert present() == ["default"], "the sweep removed a sandbox of another namespace (or left its own)"
        assert out["containers"] == [] or out["containers"] == ["containerd:%s" % name]
        # the adapter's own removal by name reaches no other namespace either
        adapter = _runtime_engines.adapter(dict(_runtime_select.cri_info("containerd", ENDPOINT, 30, descriptor)))
        assert adapter.remove(name)["removed"] is False
        assert present() == ["default"]
    finally:
        for sandbox in ids.values():
            client.remove_sandbox_tree(sandbox, timeout=60)
        client.close()
