"""Why a host.health.* check was NOT_RUN, said truthfully: not asked is not "not exposed". Every health check that can
be NOT_RUN is made NOT_RUN by the host layer itself, in each of its ways (not asked, no NVML, a GPU in use, no such part,
not available on the node or in this mode, skipped by DCGM, not exposed, an error), and the report words each by its
reason; the reading nobody asked for (dcgm_diag at its default) is never reported as not exposed."""
import copy
import re

import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import reasons as _health_reasons
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import evaluate as _host_evaluate
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as _report_render

nv = hf.real_pynvml
I = nv.NVML_NVLINK_STATE_INACTIVE


def _dcgm(**d):
    def change(ev):
        ev["health"]["dcgm_diag"] = dict({"asked": 1, "ran": False, "tests": []}, **d)
    return change


def _kernel_log(error):
    def change(ev):
        ev["health"]["kernel_log"] = {"source": None, "error": error, "events": [], "lines": 0}
    return change


def _dcgm_skip(ev):
    ev["health"]["dcgm_diag"] = {"asked": 1, "ran": True, "rc": 0, "tests": [
        {"category": "software", "test": "software", "entity": 0, "status": "Skip", "warnings": [], "info": []}]}


def _gpu(**over):
    return {"gpus": [hf.gpu(0, **over)]}


def _errors(**codes):
    return _gpu(nvml_errors=dict(hf.healthy()["nvml_errors"], **codes))


# (scenario, fake NVML options, collect_evidence options, a change to the evidence, check, reason)
CASES = [
    # the default run of a node tree (root is not /): dcgmi diag not asked, the kernel log not readable here
    ("default", _gpu(), {}, None, "host.health.dcgm_diag", "not_asked"),
    ("default", _gpu(), {}, None, "host.health.xid", "not_available"),
    ("default", _gpu(), {}, None, "host.health.retired_pages", "not_exposed"),     # Hopper remaps rows instead
    ("default", _gpu(), {}, None, "host.health.nvlink", "not_exposed"),            # a PCIe H200: NVML gives no link
    ("default", _gpu(), {}, None, "host.health.fabric", "not_there"),              # no NVSwitch fabric
    # dcgmi diag asked, and why it did not run
    ("dcgm asked, node tree", _gpu(), {"dcgm_diag": 1}, None, "host.health.dcgm_diag", "not_available"),
    ("dcgmi absent", _gpu(), {}, _dcgm(why="dcgmi is not installed (no DCGM on this node)"), "host.health.dcgm_diag", "not_available"),
    ("check mode", _gpu(), {}, _dcgm(why="check mode: dcgmi diag -r 3 loads the GPU, not run (level 1 does not)"),
     "host.health.dcgm_diag", "not_available"),
    ("GPU busy", _gpu(), {}, _dcgm(why="GPU in use, not preempting: 1 compute process(es) on GPU-x: dcgmi diag not run"),
     "host.health.dcgm_diag", "held_back"),
    ("busy unknown", _gpu(), {}, _dcgm(why="cannot tell whether the GPUs are in use (no NVML list of compute processes): "
                                           "dcgmi diag not run"), "host.health.dcgm_diag", "held_back"),
    ("dcgmi failed to start", _gpu(), {}, _dcgm(ran=True, error="[Errno 8] Exec format error", rc=None),
     "host.health.dcgm_diag", "error"),
    ("DCGM skipped", _gpu(), {}, _dcgm_skip, "host.health.dcgm_diag", "skipped"),
    # the kernel log
    ("no kernel log tool", _gpu(), {}, _kernel_log("journalctl: not installed; dmesg: not installed"), "host.health.xid", "not_available"),
    ("dmesg refused", _gpu(), {}, _kernel_log("journalctl -k -b --no-pager -q -o cat: rc 1: No journal files were found.; dmesg "
                                              "--notime: rc 1: dmesg: read kernel buffer failed: Operation not permitted"),
     "host.health.xid", "error"),
    # NVML: off by option, or giving nothing
    ("nvml off", _gpu(), {"use_nvml": False}, None, "host.health.ecc_errors", "not_asked"),
    ("no driver", _gpu(), {}, None, "host.health.temperature", "no_nvml"),
    # a reading NVML refused, or could not give
    ("not supported", _errors(nvmlDeviceGetTemperature=nv.NVML_ERROR_NOT_SUPPORTED), {}, None, "host.health.temperature", "not_exposed"),
    ("no permission", _errors(nvmlDeviceGetEccMode=nv.NVML_ERROR_NO_PERMISSION), {}, None, "host.health.ecc_mode", "not_exposed"),
    ("GPU lost", _errors(nvmlDeviceGetEccMode=nv.NVML_ERROR_GPU_IS_LOST), {}, None, "host.health.ecc_mode", "error"),
    ("unknown error", _errors(nvmlDeviceGetPcieReplayCounter=nv.NVML_ERROR_UNKNOWN), {}, None, "host.health.pcie_replay", "error"),
    ("timeout", _errors(nvmlDeviceGetRemappedRows=nv.NVML_ERROR_TIMEOUT), {}, None, "host.health.row_remap", "error"),
    ("clock unsupported", _errors(nvmlDeviceGetCurrentClocksEventReasons=nv.NVML_ERROR_NOT_SUPPORTED), {}, None,
     "host.health.clock_events", "not_exposed"),
    ("width unsupported", _errors(nvmlDeviceGetCurrPcieLinkWidth=nv.NVML_ERROR_NOT_SUPPORTED), {}, None,
     "host.health.pcie_link", "not_exposed"),
    ("fields unsupported", _gpu(recovery_action=(nv.NVML_ERROR_NOT_SUPPORTED, 0), reset_fields={}), {}, None,
     "host.health.recovery_action", "not_exposed"),
    ("ecc unknown", _errors(nvmlDeviceGetTotalEccErrors=nv.NVML_ERROR_UNKNOWN), {}, None, "host.health.ecc_errors", "error"),
    # an older pynvml
    ("old pynvml", dict(_gpu(), legacy=True), {}, None, "host.health.recovery_action", "not_available"),
    ("old pynvml", dict(_gpu(), legacy=True), {}, None, "host.health.fabric", "not_available"),
    ("old pynvml", dict(_gpu(), legacy=True), {}, None, "host.health.nvlink", "not_available"),
    # NVLink: MIG mode, the fabric unread
    ("MIG NVLink", _gpu(mig_devices=[hf.mig_device(0, gi=1)], **hf.nvlink_gpu([I] * 18)), {}, None, "host.health.nvlink", "not_there"),
    ("fabric unknown", dict(_gpu(**hf.nvlink_gpu([I] * 18)), fail={(0, "nvmlDeviceGetGpuFabricInfoV"): nv.NVML_ERROR_UNKNOWN}),
     {}, None, "host.health.nvlink", "error"),
    ("fabric unknown", dict(_gpu(**hf.nvlink_gpu([I] * 18)), fail={(0, "nvmlDeviceGetGpuFabricInfoV"): nv.NVML_ERROR_UNKNOWN}),
     {}, None, "host.health.fabric", "error"),
    # a MIG device whose counts NVML does not give
    ("MIG counts", _gpu(mig_devices=[hf.mig_device(0, gi=1, sram={})]), {}, None, "host.health.mig_ecc", "not_exposed"),
    # no handle for the GPU
    ("no handle", dict(_gpu(), fail={(0, "nvmlDeviceGetHandleByIndex"): nv.NVML_ERROR_GPU_IS_LOST}), {}, None,
     "host.health.ecc_mode", "error"),
]


def _record(root, fake_kw, options, change):
    fake_kw = copy.deepcopy(fake_kw)
    evidence = _host.collect_evidence(root=str(root), pynvml_module=hf.fake_pynvml(**fake_kw), **options)
    if change:
        change(evidence)
    return _host_evaluate.evaluate(evidence)


@pytest.mark.parametrize("scenario,fake_kw,options,change,check_id,why", CASES,
                         ids=["%s-%s" % (c[0], c[4][len("host.health."):]) for c in CASES])
def test_each_way_a_health_check_is_not_run_has_its_reason(tmp_path, scenario, fake_kw, options, change, check_id, why):
    if scenario == "no driver":
        fake_kw = dict(fake_kw, init_error=nv.NVML_ERROR_DRIVER_NOT_LOADED)
    record = _record(hf.build_node(tmp_path), fake_kw, options, change)
    found = [c for c in record["checks"] if c["id"] == check_id and c["status"] == NOT_RUN]
    assert found, [c for c in record["checks"] if c["id"] == check_id]
    assert set(_health_reasons.reason(c["observed"]) for c in found) == {why}, found


def test_every_health_check_that_can_be_not_run_is_in_the_table():
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host.catalogue import HEALTH_CHECKS as CHECKS
    assert set(c[4] for c in CASES) == set(CHECKS)
    assert set(c[5] for c in CASES) == set(_health_reasons.WORDS)


def _renderings(report):
    return {"markdown": _report_render.render_markdown(report), "html": _report_render.render_html(report)}


def test_the_report_says_not_asked_of_what_was_not_asked_never_not_exposed(tmp_path):
    hosts = [{"name": "gpu-%02d" % i, "records": {"host": _record(hf.build_node(tmp_path / str(i)), _gpu(), {}, None)}}
             for i in range(3)]
    report = F.build_report(hosts, "2026-12-04T12:00:00Z")
    why = dict((g["reason"], dict((c["check"], c) for c in g["checks"])) for g in report["health"]["not_read_why"])
    assert why["not_asked"]["host.health.dcgm_diag"] == {"check": "host.health.dcgm_diag", "gpus": 0, "hosts": 3}
    assert "host.health.dcgm_diag" not in why.get("not_exposed", {})
    assert why["not_exposed"]["host.health.retired_pages"] == {"check": "host.health.retired_pages", "gpus": 3, "hosts": 3}
    lines = _health_reasons.not_read_lines(report["health"]["not_read_why"])
    assert "Not asked in this run: host.health.dcgm_diag on 3 hosts" in lines
    assert any(line.startswith("Not exposed by the driver or the VM") and "host.health.retired_pages on 3 GPUs (3 hosts)" in line
               for line in lines)
    for fmt, text in _renderings(report).items():
        exposed = [line for line in text.splitlines() if "not exposed" in line.lower()]
        assert exposed and not any("dcgm" in line for line in exposed), (fmt, exposed)
        assert "does not expose it" not in text
        assert "dcgm" in [line for line in text.splitlines() if "not asked in this run" in line.lower()][0], fmt
        # each host's own health rows say why too
        assert re.search(r"dcgm\\?_diag \(not asked\)", text) and re.search(r"retired\\?_pages \(not exposed\)", text), fmt


@pytest.mark.parametrize("observed,why", [
    ("not asked (dcgm_diag: 0)", "not_asked"),
    ("disabled by option (nvml: false)", "not_asked"),
    ("Skip", "skipped"),
    ("Not Run: the test does not apply", "skipped"),
    ("not read: Not Supported (NVML_ERROR_NOT_SUPPORTED, code 3); Unknown Error (NVML_ERROR_UNKNOWN, code 999)", "error"),
    ("not read: Not Supported (NVML_ERROR_NOT_SUPPORTED, code 3)", "not_exposed"),
    ("the GPU's PCI bus id is unknown", "error"),
    ("a text this collection has never written", "error"),
    (None, "error"),
])
def test_reason_of_observations(observed, why):
    assert _health_reasons.reason(observed) == why
