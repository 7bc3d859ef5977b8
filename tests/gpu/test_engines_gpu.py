"""COMPUTE_VERIFIED through every engine the GPU host runs (issue 25), each by the GPU's UUID, and one failing drill per
engine landing in the right layer: containerd 1.7.24 over the CRI (a pod sandbox and a container whose CDI device
comes as the CDIDevices field and the cdi.k8s.io/ annotation), dockerd 26.1.5 with its CDI feature, and the lab's
podman. scripts/gpu-engines.sh starts the engines and runs this (the lead runs it on the H200).

Environment: GPUPROBE_GPU=1 (else skipped); GPUPROBE_ENGINES (comma list, default podman,containerd,docker): an
engine whose socket is not up is skipped with the reason; the sockets as scripts/engines.sh env prints them
(GPUPROBE_CRI_ENDPOINT, GPUPROBE_CRI_DESCRIPTOR, GPUPROBE_DOCKER_HOST); GPUPROBE_EVIDENCE_DIR: the records, untouched,
as <engine>-<variant>.json.
"""
import os

import pytest

from test_runtime_compute_gpu import assert_accounted, host_record, run_variant  # noqa: F401  pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import adapters as _runtime_adapters

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

ENGINES = os.environ.get("GPUPROBE_ENGINES", "podman,containerd,docker").split(",")
OPTIONS = {
    "podman": {"runtime": "podman"},
    "containerd": {"runtime": "containerd", "runtime_endpoint": os.environ.get("GPUPROBE_CRI_ENDPOINT"),
                   "cri_descriptor": os.environ.get("GPUPROBE_CRI_DESCRIPTOR")},
    "docker": {"runtime": "docker", "runtime_endpoint": os.environ.get("GPUPROBE_DOCKER_HOST")},
}


@pytest.fixture(params=ENGINES)
def engine(request):
    options = dict((k, v) for k, v in OPTIONS[request.param].items() if v)
    info = _runtime_adapters.detect_runtime(options["runtime"], endpoint=options.get("runtime_endpoint"),
                                            descriptor=options.get("cri_descriptor"))
    if not info["usable"]:
        pytest.skip("%s is not usable here: %s" % (request.param, info["reason"]))
    return options


def test_compute_verified_by_uuid(host_record, engine):  # noqa: F811  pylint: disable=redefined-outer-name
    records, probe, verdict = run_variant("full", host_record, engine=engine, name="%s-full" % engine["runtime"])
    runtime = records["runtime"]
    assert runtime["evidence"]["engine"]["name"] == engine["runtime"]
    assert runtime["status"] == "PASS", runtime["reason"]
    assert probe["runtime"].startswith(engine["runtime"] + " ")
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert_accounted(records)  # every edit as the generators' shapes, whatever the engine
    host_uuids = [g["uuid"] for g in host_record["evidence"]["nvml"]["gpus"]]
    rows = records["compute"]["evidence"]["gpus"]
    assert rows and all(r["status"] == "PASS" and r["seen_in_container"] and r["uuid"] in host_uuids for r in rows), rows


def test_a_failing_drill_lands_in_its_layer(host_record, engine):  # noqa: F811  pylint: disable=redefined-outer-name
    """No libnvidia-ptxjitcompiler mount: cuInit and the context work, the PTX load fails; the runtime applied every
    edit and the host control passed, so the spec (cdi.nvidia.ptxjit) is the cause, whatever the engine."""
    records, _probe, verdict = run_variant("no_ptxjit_mount", host_record, engine=engine,
                                           name="%s-no_ptxjit_mount" % engine["runtime"])
    assert records["runtime"]["status"] == "PASS", records["runtime"]["reason"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", records["compute"]["reason"]
    assert verdict["verdict"] == "FAILED_AT_COMPUTE"
    assert (verdict["points_to"], [b["check"] for b in verdict["because"]]) == ("cdi", ["cdi.nvidia.ptxjit"]), verdict
