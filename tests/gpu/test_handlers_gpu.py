"""COMPUTE_VERIFIED through containerd 1.7.24 with a SECOND runtime handler (issue 35 item 6), on the GPU host.

A private containerd (tests/integration/containerd_lab.py: its own socket, root, state; the lab's pause and probe
images, which `scripts/engines.sh start containerd` leaves in .build/engines/run) runs with CDI on, runc as its default
handler and ``gpuprobe-second``: a wrapper around the same runc that records each call. The node's own selection
(_node.selected_engines with ``runtime_handler: gpuprobe-second``, as verify_probe_runtime_handler passes it) reads the
running daemon's CRI config; the probe runs with that handler (RunPodSandboxRequest.runtime_handler) and the verdict
must be COMPUTE_VERIFIED naming the handler, its binary and the injector (containerd's CDI), with the wrapper's log
showing the sandbox's and the container's runc calls. scripts/gpu-engines.sh runs it beside test_engines_gpu.py.

Environment: GPUPROBE_GPU=1 (else skipped); GPUPROBE_ENGINES must name containerd; GPUPROBE_EVIDENCE_DIR: the records,
untouched, as containerd-handler-full.json.
"""
import os
import sys

import pytest

from test_runtime_compute_gpu import host_record, run_variant  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _node

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import containerd_lab as lab  # noqa: E402  pylint: disable=wrong-import-position

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]
HANDLER = "gpuprobe-second"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    if "containerd" not in os.environ.get("GPUPROBE_ENGINES", "podman,containerd,docker").split(","):
        pytest.skip("containerd is not among GPUPROBE_ENGINES")
    why = lab.missing() or (None if os.path.exists(lab.PROBE_TAR) else "no probe image archive at %s" % lab.PROBE_TAR)
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("ctd-handler-gpu")
    second = lab.recorder(str(base), HANDLER)
    d = lab.Containerd(base, enable_cdi=True, handlers={HANDLER: second})
    d.second = second
    d.start(images=(lab.PAUSE_TAR, lab.PROBE_TAR))
    yield d
    d.stop()


def test_compute_verified_through_a_second_handler(host_record, daemon):  # noqa: F811  pylint: disable=redefined-outer-name
    [engine] = _node.selected_engines({"root": "/", "runtime": ["containerd"], "runtime_endpoint": daemon.endpoint,
                                       "cri_descriptor": lab.DESCRIPTOR, "runtime_timeout": 60, "runtime_handler": HANDLER})
    handler = engine["runtime_handler"]
    assert (handler["name"], handler["request"], handler["known"], handler["binary"]) == (HANDLER, HANDLER, True, daemon.second)
    before = len(lab.calls(daemon.second))
    records, _probe, verdict = run_variant("full", host_record, name="containerd-handler-full", engine={
        "runtime": "containerd", "runtime_endpoint": daemon.endpoint, "cri_descriptor": lab.DESCRIPTOR, "engine": engine})
    assert records["runtime"]["status"] == "PASS", records["runtime"]["reason"]
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert verdict["runtime"]["handler"] == {"name": HANDLER, "source": "option", "binary": daemon.second,
                                             "injector": "containerd's CDI (enableCDI true in the running daemon)"}
    creates = [line for line in lab.calls(daemon.second)[before:] if " create " in " %s " % line]
    assert len(creates) >= 2, lab.calls(daemon.second)   # the sandbox and the probe container went through the handler
    assert records["runtime"]["evidence"]["container"]["cri"]["sandbox"]["runtime_handler"] == HANDLER
