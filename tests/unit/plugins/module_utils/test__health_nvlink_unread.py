"""host.health.nvlink when the NVLink fabric (or the links) could not be read: unread is unknown, not absent. Every way
of not reading the fabric (a pynvml without the call, NVML_ERROR_UNKNOWN, a lost GPU, no permission, a timeout, the
versioned call refused and the first one failing, an exception) leaves GPU links that are all inactive NOT_RUN as
unknown, never "the GPU has no NVLink fabric" and never a FAIL on a guess; what was read (a link down while others are
up) still FAILs."""
import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import evaluate as _host_evaluate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS

nv = hf.real_pynvml
A, I = nv.NVML_NVLINK_STATE_ACTIVE, nv.NVML_NVLINK_STATE_INACTIVE
V, V1 = "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"


def _without_calls(fake):
    del fake.nvmlDeviceGetGpuFabricInfoV, fake.nvmlDeviceGetGpuFabricInfo


def _raising(fake):
    def boom(handle, ref):
        raise RuntimeError("the driver's answer could not be decoded")
    fake.nvmlDeviceGetGpuFabricInfoV = boom


def _only_v1(fake):
    del fake.nvmlDeviceGetGpuFabricInfoV


# (fail codes per call, a change to the fake, what the fabric check's observation names)
NOT_READ = {
    "pynvml without the call": ({}, _without_calls, "this pynvml has no nvmlDeviceGetGpuFabricInfo"),
    "NVML_ERROR_UNKNOWN": ({V: nv.NVML_ERROR_UNKNOWN}, None, "NVML_ERROR_UNKNOWN"),
    "GPU lost": ({V: nv.NVML_ERROR_GPU_IS_LOST}, None, "NVML_ERROR_GPU_IS_LOST"),
    "no permission": ({V: nv.NVML_ERROR_NO_PERMISSION}, None, "NVML_ERROR_NO_PERMISSION"),
    "timeout": ({V: nv.NVML_ERROR_TIMEOUT}, None, "NVML_ERROR_TIMEOUT"),
    "versioned call refused, first call unknown": (
        {V: nv.NVML_ERROR_ARGUMENT_VERSION_MISMATCH, V1: nv.NVML_ERROR_UNKNOWN}, None, "NVML_ERROR_UNKNOWN"),
    "first call only, it fails": ({V1: nv.NVML_ERROR_UNKNOWN}, _only_v1, "NVML_ERROR_UNKNOWN"),
    "an exception": ({}, _raising, "RuntimeError: the driver's answer could not be decoded"),
}


def record_of(root, gpu, fail=None, change=None):
    fake = hf.fake_pynvml([gpu], fail=dict(((0, name), code) for name, code in (fail or {}).items()))
    if change:
        change(fake)
    return _host_evaluate.evaluate(_host.collect_evidence(root=str(root), pynvml_module=fake))


def check(record, check_id):
    (found,) = [c for c in record["checks"] if c["id"] == check_id]
    return found


@pytest.mark.parametrize("mig", [False, True], ids=["mig off", "mig on"])
@pytest.mark.parametrize("way", sorted(NOT_READ))
def test_links_all_inactive_with_the_fabric_unread_are_unknown_not_absent(tmp_path, way, mig):
    fail, change, named = NOT_READ[way]
    extra = {"mig_devices": [hf.mig_device(0, gi=1)]} if mig else {}
    record = record_of(hf.build_node(tmp_path), hf.gpu(0, **dict(hf.nvlink_gpu([I] * 18), **extra)), fail, change)
    link, fabric = check(record, "host.health.nvlink"), check(record, "host.health.fabric")
    assert link["status"] == NOT_RUN, link
    assert link["observed"].startswith("not read: the NVLink fabric (") and named in link["observed"], link
    assert "should be up is unknown" in link["observed"] and "inactive: links 0-17" in link["observed"]
    assert "no NVLink fabric" not in link["observed"] and "has no" not in link["observed"].replace("this pynvml has no", "")
    assert fabric["status"] == NOT_RUN and named in fabric["observed"], fabric
    assert any("host.health.nvlink" in item for item in record["not_proven"])


@pytest.mark.parametrize("way", sorted(NOT_READ))
def test_what_was_read_still_judges_with_the_fabric_unread(tmp_path, way):
    """One link down while the others are up: NVLink is in use, the fabric is not needed to say so (DCGM FAILs it)."""
    fail, change, _named = NOT_READ[way]
    record = record_of(hf.build_node(tmp_path), hf.gpu(0, **hf.nvlink_gpu([A] * 17 + [I])), fail, change)
    assert check(record, "host.health.nvlink")["status"] == FAIL
    record = record_of(hf.build_node(tmp_path / "up"), hf.gpu(0, **hf.nvlink_gpu([A] * 18)), fail, change)
    assert check(record, "host.health.nvlink")["status"] == PASS


@pytest.mark.parametrize("fail,status,observed", [
    # the fabric read: registration completed, every link down: FAIL (as before)
    ({}, FAIL, "inactive: links 0-17"),
    # NVML says the GPU has no fabric (the call answers NOT_SUPPORTED): read, not unknown; nothing says links should be up
    ({V: nv.NVML_ERROR_NOT_SUPPORTED}, NOT_RUN, "no NVLink is up and NVML reports no NVLink fabric for the GPU (Not Supported"),
])
def test_a_fabric_that_was_read_is_judged_as_before(tmp_path, fail, status, observed):
    link = check(record_of(hf.build_node(tmp_path), hf.gpu(0, **hf.nvlink_gpu([I] * 18)), fail), "host.health.nvlink")
    assert link["status"] == status and link["observed"].startswith(observed), link


@pytest.mark.parametrize("fail,change,observed", [
    ({}, lambda fake: delattr(fake, "nvmlDeviceGetNvLinkState"), "not read: this pynvml has no nvmlDeviceGetNvLinkState"),
    ({"nvmlDeviceGetNvLinkState": nv.NVML_ERROR_UNKNOWN}, None, "not read: Unknown Error (NVML_ERROR_UNKNOWN, code 999) on links 0-"),
    ({"nvmlDeviceGetNvLinkState": nv.NVML_ERROR_GPU_IS_LOST}, None, "not read: GPU is lost (NVML_ERROR_GPU_IS_LOST"),
])
def test_links_that_could_not_be_read_are_unknown(tmp_path, fail, change, observed):
    link = check(record_of(hf.build_node(tmp_path), hf.gpu(0, **hf.nvlink_gpu([I] * 18)), fail, change), "host.health.nvlink")
    assert link["status"] == NOT_RUN and link["observed"].startswith(observed), link
