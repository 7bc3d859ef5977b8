"""host.health.*: per-GPU health readings through a fake pynvml that returns pynvml's own values and structures and
raises its real NVMLError codes; Xid parsing over kernel log lines; the kernel log read through real programs."""
import json
import os
import shutil

import pytest
from fakebin import write_exe  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import limits as _health_limits
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import catalogue as _catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import evaluate as _host_evaluate
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import dcgm as _dcgm
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import judge as _judge
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import readers as _readers
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import xid as _xid
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args

nv = hf.real_pynvml


def health_checks(record, check_id=None):
    return [c for c in record["checks"] if c["id"].startswith("host.health.") and (check_id is None or c["id"] == check_id)]


def one(record, check_id):
    found = health_checks(record, check_id)
    assert len(found) == 1, (check_id, found)
    return found[0]


def host(root, gpus, kernel_log=None, **fake_kw):
    """The host record of the tree ``root`` with NVML reporting ``gpus``; ``kernel_log``: text read as the journal."""
    evidence = _host.collect_evidence(root=str(root), pynvml_module=hf.fake_pynvml(gpus, **fake_kw))
    if kernel_log is not None:
        lines = kernel_log.splitlines()
        evidence["health"]["kernel_log"] = {"source": "journalctl -k -b --no-pager -q -o cat", "error": None,
                                            "events": _xid.parse_xids(kernel_log), "lines": len(lines)}
    record = _host_evaluate.evaluate(evidence)
    assert validate_record(record) == []
    return record


@pytest.fixture
def h200(tmp_path):
    return hf.build_node(tmp_path)


def test_healthy_h200_passes_and_says_what_it_did_not_read(h200):
    record = host(h200, [hf.gpu(0)])
    assert record["status"] == PASS, [c for c in record["checks"] if c["status"] in (FAIL, WARN)]
    status = dict((c["id"], c["status"]) for c in health_checks(record))
    assert status == {
        "host.health.ecc_mode": PASS, "host.health.ecc_errors": PASS, "host.health.row_remap": PASS,
        "host.health.clock_events": PASS, "host.health.temperature": PASS, "host.health.pcie_link": PASS,
        "host.health.pcie_replay": PASS, "host.health.recovery_action": PASS,
        # Hopper has row remapping, not page retirement; this GPU has no NVLink fabric and no NVLink; a node tree has
        # no kernel log; dcgmi diag was not asked for
        "host.health.retired_pages": NOT_RUN, "host.health.fabric": NOT_RUN, "host.health.xid": NOT_RUN,
        "host.health.nvlink": NOT_RUN, "host.health.dcgm_diag": NOT_RUN}
    assert "NVML_ERROR_NOT_SUPPORTED" in one(record, "host.health.retired_pages")["observed"]
    assert "NVML_GPU_FABRIC_STATE_NOT_SUPPORTED" in one(record, "host.health.fabric")["observed"]
    assert one(record, "host.health.xid")["observed"] == "kernel log not read: the kernel log is only read when root is /"
    assert one(record, "host.health.nvlink")["observed"] == (
        "not read: Not Supported (NVML_ERROR_NOT_SUPPORTED, code 3) on links 0-%d" % (nv.NVML_NVLINK_MAX_LINKS - 1))
    assert one(record, "host.health.dcgm_diag")["observed"] == "not asked (dcgm_diag: 0)"
    assert any("host.health.retired_pages" in item for item in record["not_proven"])
    # the H200's own reading: generation 5 of 5 while idle
    assert one(record, "host.health.pcie_link")["observed"] == "x16 of x16; generation 5 of 5 (GPU max 5)"
    assert one(record, "host.health.temperature")["observed"] == "35 C (slowdown 89 C, shutdown 95 C)"


def test_evidence_holds_the_raw_readings_per_gpu_once(h200):
    record = host(h200, [hf.gpu(0, temperature=44)])
    health = record["evidence"]["health"]
    assert [g["uuid"] for g in health["gpus"]] == [hf.gpu(0)["uuid"]]
    g = health["gpus"][0]
    assert g["ecc_mode"] == {"current": 1, "pending": 1}
    assert g["ecc_errors"] == {"uncorrected_volatile": 0, "uncorrected_aggregate": 0, "corrected_volatile": 0, "corrected_aggregate": 0}
    assert g["remapped_rows"] == {"corrected": 0, "uncorrected": 0, "pending": 0, "failure": 0}
    assert g["retired_pages"] == {"single_bit": None, "double_bit": None, "pending": None}
    assert (g["temperature_c"], g["temperature_slowdown_c"], g["temperature_shutdown_c"]) == (44, 89, 95)
    interval = g["pcie"].pop("replay_interval_s")
    assert isinstance(interval, float) and 0 <= interval < 5
    assert g["pcie"] == {"generation_current": 5, "generation_max": 5, "generation_gpu_max": 5, "width_current": 16,
                         "width_max": 16, "replay_counter": 0, "replay_counter_end": 0}
    assert (g["clock_event_reasons"], g["clock_event_source"]) == (1, "nvmlDeviceGetCurrentClocksEventReasons")
    assert g["recovery_action"] == 0 and g["reset_status"] == {"reset_required": 0, "drain_and_reset": 0}
    assert g["fabric"] == {"state": 0, "status": 0, "clique_id": 0, "cluster_uuid": "00" * 16, "health_mask": 0}
    assert g["row_remap_histogram"] == {"max": 64, "high": 0, "partial": 0, "low": 0, "none": 0}
    assert g["nvlink"]["links"] == {} and list(g["nvlink"]["errors"].values()) == [list(range(nv.NVML_NVLINK_MAX_LINKS))]
    assert g["mig"] == []
    assert health["thresholds"] == _health_limits.DEFAULT_THRESHOLDS
    assert health["dcgm_diag"] == {"asked": 0, "ran": False, "why": "not asked (dcgm_diag: 0)", "tests": []}
    assert "NVML_ERROR_NOT_SUPPORTED" in g["errors"]["retired_pages_pending"]
    assert all("health" not in gpu for gpu in record["evidence"]["nvml"]["gpus"])  # kept once, under evidence.health


def _ecc(uv=0, ua=0, cv=0, ca=0):
    return {(1, 0): uv, (1, 1): ua, (0, 0): cv, (0, 1): ca}


def _pcie(**over):
    p = dict(hf.healthy()["pcie"])
    p.update(over)
    return p


SUPPORTED_PAGES = {"nvml_errors": {}}
THRESHOLDS = [
    # ECC mode
    ({"ecc_mode": [0, 0]}, "host.health.ecc_mode", WARN, "current disabled, pending disabled"),
    ({"ecc_mode": [1, 0]}, "host.health.ecc_mode", WARN, "current enabled, pending disabled"),
    ({"ecc_mode": [0, 1]}, "host.health.ecc_mode", WARN, "current disabled, pending enabled"),
    # ECC counts: uncorrectable volatile FAIL, uncorrectable aggregate only WARN, corrected recorded
    ({"ecc_counts": _ecc(uv=1, ua=1)}, "host.health.ecc_errors", FAIL, "uncorrected volatile 1"),
    ({"ecc_counts": _ecc(ua=3)}, "host.health.ecc_errors", WARN, "uncorrected aggregate 3"),
    ({"ecc_counts": _ecc(cv=120, ca=4000)}, "host.health.ecc_errors", PASS, "corrected aggregate 4000"),
    # page retirement (GPUs before Ampere)
    (dict(SUPPORTED_PAGES, retired_pages={0: [0x1000] * 32, 1: [0x2000] * 31}), "host.health.retired_pages", FAIL, "single-bit 32, double-bit 31"),
    (dict(SUPPORTED_PAGES, retired_pages={0: [0x1000] * 62, 1: []}), "host.health.retired_pages", PASS, "single-bit 62"),
    (dict(SUPPORTED_PAGES, retired_pending=1, retired_pages={0: [], 1: [0x3000]}), "host.health.retired_pages", WARN, "pending True"),
    (dict(SUPPORTED_PAGES), "host.health.retired_pages", PASS, "single-bit 0, double-bit 0, pending False"),
    # row remapping
    ({"remapped_rows": (0, 2, 0, 1)}, "host.health.row_remap", FAIL, "failure 1"),
    ({"remapped_rows": (0, 1, 1, 0)}, "host.health.row_remap", WARN, "pending 1"),
    ({"remapped_rows": (3, 1, 0, 0)}, "host.health.row_remap", PASS, "correctable 3, uncorrectable 1"),
    # clock events
    ({"clock_events": nv.nvmlClocksEventReasonHwSlowdown}, "host.health.clock_events", FAIL, "hw_slowdown"),
    ({"clock_events": nv.nvmlClocksEventReasonHwSlowdown | nv.nvmlClocksEventReasonHwThermalSlowdown}, "host.health.clock_events",
     FAIL, "0x48: hw_slowdown, hw_thermal_slowdown"),
    ({"clock_events": nv.nvmlClocksEventReasonHwPowerBrakeSlowdown}, "host.health.clock_events", FAIL, "hw_power_brake_slowdown"),
    ({"clock_events": nv.nvmlClocksEventReasonSwThermalSlowdown}, "host.health.clock_events", WARN, "sw_thermal_slowdown"),
    ({"clock_events": nv.nvmlClocksEventReasonSwPowerCap | nv.nvmlClocksEventReasonSyncBoost}, "host.health.clock_events", PASS,
     "sw_power_cap, sync_boost"),
    ({"clock_events": 0}, "host.health.clock_events", PASS, "0x0: none active"),
    ({"clock_events": 0x200}, "host.health.clock_events", WARN, "bit_0x200"),
    # temperature against the slowdown threshold (the H200's: 89 C)
    ({"temperature": 89}, "host.health.temperature", FAIL, "89 C (slowdown 89 C"),
    ({"temperature": 97}, "host.health.temperature", FAIL, "97 C"),
    ({"temperature": 84}, "host.health.temperature", WARN, "84 C"),
    ({"temperature": 83}, "host.health.temperature", PASS, "83 C"),
    # PCIe: width below max WARN, generation informative only
    ({"pcie": _pcie(nvmlDeviceGetCurrPcieLinkWidth=8)}, "host.health.pcie_link", WARN, "x8 of x16"),
    ({"pcie": _pcie(nvmlDeviceGetCurrPcieLinkGeneration=3)}, "host.health.pcie_link", PASS, "generation 3 of 5"),
    ({"pcie": _pcie(nvmlDeviceGetPcieReplayCounter=81)}, "host.health.pcie_replay", WARN, "81 since the driver loaded"),
    # recovery action the driver asks for
    ({"recovery_action": (nv.NVML_SUCCESS, nv.NVML_GPU_RECOVERY_ACTION_GPU_RESET)}, "host.health.recovery_action", FAIL, "GPU reset (1)"),
    ({"recovery_action": (nv.NVML_SUCCESS, nv.NVML_GPU_RECOVERY_ACTION_NODE_REBOOT)}, "host.health.recovery_action", FAIL, "node reboot"),
    ({"recovery_action": (nv.NVML_SUCCESS, nv.NVML_GPU_RECOVERY_ACTION_DRAIN_AND_RESET)}, "host.health.recovery_action", FAIL, "drain and reset"),
    ({"recovery_action": (nv.NVML_SUCCESS, nv.NVML_GPU_RECOVERY_ACTION_DRAIN_P2P)}, "host.health.recovery_action", WARN, "drain peer-to-peer"),
    ({"recovery_action": (nv.NVML_ERROR_NOT_SUPPORTED, 0), "reset_fields": {}}, "host.health.recovery_action", NOT_RUN,
     "not read: field 226: NVML_ERROR_NOT_SUPPORTED (code 3); field 227: NVML_ERROR_NOT_SUPPORTED (code 3); field 230: "
     "NVML_ERROR_NOT_SUPPORTED (code 3)"),
    # a driver before the recovery-action field (R570): the reset fields it replaced
    ({"recovery_action": (nv.NVML_ERROR_NOT_SUPPORTED, 0),
      "reset_fields": {nv.NVML_FI_DEV_RESET_STATUS: (nv.NVML_SUCCESS, 1), nv.NVML_FI_DEV_DRAIN_AND_RESET_STATUS: (nv.NVML_SUCCESS, 0)}},
     "host.health.recovery_action", FAIL, "a GPU reset is required"),
    ({"recovery_action": (nv.NVML_ERROR_NOT_SUPPORTED, 0),
      "reset_fields": {nv.NVML_FI_DEV_RESET_STATUS: (nv.NVML_SUCCESS, 0), nv.NVML_FI_DEV_DRAIN_AND_RESET_STATUS: (nv.NVML_SUCCESS, 1)}},
     "host.health.recovery_action", FAIL, "drain and reset recommended"),
    ({"recovery_action": (nv.NVML_ERROR_NOT_SUPPORTED, 0),
      "reset_fields": {nv.NVML_FI_DEV_RESET_STATUS: (nv.NVML_SUCCESS, 0), nv.NVML_FI_DEV_DRAIN_AND_RESET_STATUS: (nv.NVML_SUCCESS, 0)}},
     "host.health.recovery_action", PASS, "no reset required (NVML_FI_DEV_RESET_STATUS"),
    # NVLink fabric registration
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_SUCCESS, "clique": 7, "cluster": b"\x01" * 16}},
     "host.health.fabric", PASS, "completed, status 0, clique 7, cluster 0101"),
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_ERROR_NOT_READY}}, "host.health.fabric", FAIL,
     "completed, status %d" % nv.NVML_ERROR_NOT_READY),
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_IN_PROGRESS, "status": nv.NVML_SUCCESS}}, "host.health.fabric", WARN, "in progress"),
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_NOT_STARTED, "status": nv.NVML_SUCCESS}}, "host.health.fabric", WARN, "not started"),
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_SUCCESS,
                 "health_mask": nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE}}, "host.health.fabric", WARN, "degraded bandwidth"),
    ({"fabric": {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_SUCCESS,
                 "health_mask": nv.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE}}, "host.health.fabric", PASS, "health mask 0x2"),
    # row remapping: banks without a spare row left (the histogram's 'none')
    ({"row_remap_histogram": {"max": 60, "high": 2, "partial": 1, "low": 0, "none": 1}}, "host.health.row_remap", WARN, "none 1"),
    ({"row_remap_histogram": {"max": 60, "high": 2, "partial": 1, "low": 1, "none": 0}}, "host.health.row_remap", PASS, "low 1, none 0"),
    ({"row_remap_histogram": {"max": 60, "high": 0, "partial": 0, "low": 0, "none": 4}, "remapped_rows": (0, 3, 0, 1)},
     "host.health.row_remap", FAIL, "failure 1"),
]


@pytest.mark.parametrize("over,check_id,status,observed", THRESHOLDS, ids=lambda v: v if isinstance(v, str) else None)
def test_thresholds(h200, over, check_id, status, observed):
    record = host(h200, [hf.gpu(0, **over)])
    check = one(record, check_id)
    assert check["status"] == status and observed in check["observed"], check
    if status == FAIL:
        # a health FAIL makes the host record FAIL, signed by that check
        assert (record["status"], record["signature"], record["points_to"]) == (FAIL, check_id, "host")


def _mask(**fields):
    """A fabric health mask from NVIDIA's own constants (nvidia-ml-py's copy of nvml.h): every field healthy, then
    the named fields set (route_unhealthy="TRUE", incorrect_configuration="NO_PARTITION", ...)."""
    healthy = {"DEGRADED_BW": "FALSE", "ROUTE_RECOVERY": "FALSE", "ROUTE_UNHEALTHY": "FALSE",
               "ACCESS_TIMEOUT_RECOVERY": "FALSE", "INCORRECT_CONFIGURATION": "NONE", "PARTITION_ASSIGNED": "TRUE",
               "GFM_STATE": "CONNECTED"}
    healthy.update((k.upper(), v) for k, v in fields.items())
    prefix = "NVML_GPU_FABRIC_HEALTH_MASK_"
    return sum(getattr(nv, prefix + f + "_" + v) << getattr(nv, prefix + "SHIFT_" + f) for f, v in healthy.items())


@pytest.mark.parametrize("mask,status,text", [
    (_mask(), PASS, None),
    (_mask(route_unhealthy="TRUE"), FAIL, "route unhealthy"),
    (_mask(incorrect_configuration="NO_PARTITION"), FAIL, "incorrect configuration: no partition"),
    (_mask(incorrect_configuration="INCORRECT_SYSGUID"), FAIL, "incorrect configuration: system GUID"),
    (_mask(incorrect_configuration="GPU_STATE_INVALID"), FAIL, "incorrect configuration: GPU state invalid"),
    (_mask(route_recovery="TRUE"), WARN, "route recovery in progress"),
    (_mask(access_timeout_recovery="TRUE"), WARN, "access timeout recovery in progress"),
    (_mask(gfm_state="DISCONNECTED"), WARN, "global fabric manager disconnected"),
    (_mask(partition_assigned="FALSE"), WARN, "not assigned to an NVLink partition"),
    (_mask(degraded_bw="TRUE"), WARN, "degraded bandwidth"),
    (_mask() | (1 << 20), WARN, "unknown health bits 0x100000"),
    (_mask(incorrect_configuration="NONE") | (0xf << 8), WARN, "incorrect configuration: unknown value 15"),
    (0, PASS, None),   # every field NOT_SUPPORTED (a GPU whose driver fills no field): nothing to judge against
    (_mask(route_unhealthy="TRUE", gfm_state="DISCONNECTED"), FAIL, "route unhealthy, global fabric manager disconnected"),
])
def test_fabric_health_mask_every_field(h200, mask, status, text):
    fabric = {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_SUCCESS, "clique": 1, "cluster": b"\x5a" * 16,
              "health_mask": mask}
    check = one(host(h200, [hf.gpu(0, fabric=fabric)]), "host.health.fabric")
    assert check["status"] == status, check
    assert check["observed"].endswith("health mask 0x%x%s" % (mask, ", " + text if text else "")), check


def test_fabric_health_fields_are_nvml_h():
    """Each field's shift and width are nvml.h's (NVIDIA's pynvml carries them as constants)."""
    names = {"degraded bandwidth": "DEGRADED_BW", "route recovery": "ROUTE_RECOVERY", "route unhealthy": "ROUTE_UNHEALTHY",
             "access timeout recovery": "ACCESS_TIMEOUT_RECOVERY", "incorrect configuration": "INCORRECT_CONFIGURATION",
             "partition assigned": "PARTITION_ASSIGNED", "fabric manager": "GFM_STATE"}
    for name, shift, width, _values in _judge.FABRIC_HEALTH_FIELDS:
        assert (shift, width) == (getattr(nv, "NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_" + names[name]),
                                  getattr(nv, "NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_" + names[name])), name


@pytest.mark.parametrize("function,check_id,code", [
    ("nvmlDeviceGetEccMode", "host.health.ecc_mode", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetTotalEccErrors", "host.health.ecc_errors", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetRemappedRows", "host.health.row_remap", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetCurrentClocksEventReasons", "host.health.clock_events", nv.NVML_ERROR_NO_PERMISSION),
    ("nvmlDeviceGetTemperatureThreshold", "host.health.temperature", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetTemperature", "host.health.temperature", nv.NVML_ERROR_GPU_IS_LOST),
    ("nvmlDeviceGetCurrPcieLinkWidth", "host.health.pcie_link", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetPcieReplayCounter", "host.health.pcie_replay", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetFieldValues", "host.health.recovery_action", nv.NVML_ERROR_INVALID_ARGUMENT),
    ("nvmlDeviceGetGpuFabricInfoV", "host.health.fabric", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetNvLinkState", "host.health.nvlink", nv.NVML_ERROR_NOT_SUPPORTED),
    ("nvmlDeviceGetNvLinkState", "host.health.nvlink", nv.NVML_ERROR_GPU_IS_LOST),
])
def test_a_reading_the_driver_does_not_expose_is_not_run_with_its_code(h200, function, check_id, code):
    record = host(h200, [hf.gpu(0)], fail={(0, function): code})
    check = one(record, check_id)
    name = [n for n in dir(nv) if n.startswith("NVML_ERROR_") and getattr(nv, n) == code][0]
    assert check["status"] == NOT_RUN and name in check["observed"] and check["observed"].startswith("not read: "), check
    assert record["status"] == PASS  # not read is not a fault; not_proven says it
    assert any(check_id in item and name in item for item in record["not_proven"])


def test_an_older_pynvml_falls_back_to_throttle_reasons_and_says_what_it_lacks(h200):
    record = host(h200, [hf.gpu(0, clock_events=nv.nvmlClocksThrottleReasonHwSlowdown)], legacy=True)
    assert one(record, "host.health.clock_events")["status"] == FAIL
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in one(record, "host.health.clock_events")["observed"]
    assert one(record, "host.health.fabric")["observed"] == "not read: this pynvml has no nvmlDeviceGetGpuFabricInfo"
    assert one(record, "host.health.recovery_action")["observed"] == "not read: this pynvml has no nvmlDeviceGetFieldValues"


@pytest.mark.parametrize("nvml_kw,observed", [
    ({"init_error": nv.NVML_ERROR_DRIVER_NOT_LOADED}, "NVML unavailable: Driver Not Loaded (NVML_ERROR_DRIVER_NOT_LOADED"),
])
def test_without_nvml_every_gpu_reading_is_not_run(h200, nvml_kw, observed):
    record = host(h200, [hf.gpu(0)], **nvml_kw)
    for check in health_checks(record):
        assert check["status"] == NOT_RUN, check
        if check["id"] in _judge.PER_GPU_CHECKS:
            assert check["observed"].startswith(observed), check


def test_a_gpu_without_handle_has_every_reading_not_run_with_the_handle_error(tmp_path):
    root = hf.build_node(tmp_path, gpus=2)
    record = host(root, [hf.gpu(0), hf.gpu(1)], fail={(1, "nvmlDeviceGetHandleByIndex"): nv.NVML_ERROR_GPU_IS_LOST})
    lost = [c for c in health_checks(record) if c["subject"] == "GPU 1"]
    assert sorted(c["id"] for c in lost) == sorted(_judge.PER_GPU_CHECKS)
    assert all(c["status"] == NOT_RUN and "NVML_ERROR_GPU_IS_LOST" in c["observed"] for c in lost), lost
    assert [(c["subject"], c["status"]) for c in health_checks(record, "host.health.ecc_mode")] == [
        ("GPU 0 %s" % hf.gpu(0)["uuid"], PASS), ("GPU 1", NOT_RUN)]


def test_nvml_disabled_by_option(h200):
    record = _host.record(root=str(h200), use_nvml=False)
    assert {c["observed"] for c in health_checks(record) if c["id"] in _judge.PER_GPU_CHECKS} == {"disabled by option (nvml: false)"}


def test_every_gpu_of_eight_is_judged_by_uuid(tmp_path):
    gpus = [hf.gpu(i, remapped_rows=(0, 1, 1, 0) if i == 5 else (0, 0, 0, 0)) for i in range(8)]
    root = hf.build_node(tmp_path, gpus=8)
    record = host(root, gpus)
    rows = health_checks(record, "host.health.row_remap")
    assert [c["subject"] for c in rows] == ["GPU %d %s" % (i, hf.gpu(i)["uuid"]) for i in range(8)]
    assert [c["status"] for c in rows] == [PASS] * 5 + [WARN] + [PASS] * 2


# ---- Xid ----------------------------------------------------------------------------------------------------------

XID_LINES = [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.", "0000:3b:00", 79,
     "pid=1234, name=python3, GPU has fallen off the bus."),
    ("[  812.113431] NVRM: Xid (PCI:0000:06:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) "
     "has been detected on GPU in the framebuffer at partition 2, subpartition 0.", "0000:06:00", 48, "pid='<unknown>'"),
    ("kernel: NVRM: Xid (PCI:0000:CA:00): 13, pid=55012, name=train.py, Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): "
     "Out Of Range Address", "0000:ca:00", 13, "Graphics SM Warp Exception"),
    ("NVRM: Xid (PCI:0000:06:00): 94, pid=2201, name=python, Contained: CE User Channel (0x9). RST: No, D-RST: No",
     "0000:06:00", 94, "Contained: CE User Channel"),
    ("NVRM: Xid (PCI:0000:07:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row (0x0000000000012345) "
     "marked for remapping, reset gpu to activate.", "0000:07:00", 63, "Row Remapper"),
    ("NVRM: Xid (PCI:0000:41:00.0): 119, pid=9, name=nvidia-smi, Timeout after 6s of waiting for RPC response from GPU0 GSP!",
     "0000:41:00", 119, "Timeout after 6s"),
    ("NVRM: Xid (PCI:0001:02:00): 74, pid=1, name=x, NVLink: fatal error detected on link 3(0x1000, 0x0, 0x0)", "0001:02:00", 74,
     "NVLink: fatal error"),
    ("NVRM: Xid (PCI:0000:06:00): 31, pid=812, name=a.out, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 "
     "faulted @ 0x7f2_00000000.", "0000:06:00", 31, "MMU Fault"),
]


@pytest.mark.parametrize("line,pci,xid,detail", XID_LINES)
def test_parse_xid_lines(line, pci, xid, detail):
    (event,) = _xid.parse_xids("NVRM: loading NVIDIA UNIX Open Kernel Module\n" + line + "\nusb 1-1: new device\n")
    assert (event["pci"], event["xid"]) == (pci, xid) and detail in event["detail"]
    assert event["meaning"] == _xid.XID_MEANINGS[xid]


@pytest.mark.parametrize("text", ["", "NVRM: GPU at PCI:0000:06:00: GPU-6b1d...\n", "NVRM: Xid (PCI:zz): 79\n",
                                  "nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver\n"])
def test_lines_that_are_no_xid(text):
    assert _xid.parse_xids(text) == []


@pytest.mark.parametrize("xid,status", [(79, FAIL), (48, FAIL), (94, FAIL), (95, FAIL), (63, FAIL), (64, FAIL),
                                        (13, WARN), (31, WARN), (43, WARN), (45, WARN), (61, WARN), (62, WARN), (74, WARN),
                                        (92, WARN), (119, WARN), (120, WARN), (999, WARN)])
def test_xid_severity_per_gpu(h200, xid, status):
    log = "NVRM: Xid (PCI:0000:06:00): %d, pid=1, name=x, detail\n" % xid   # GPU 0 sits at 00000000:06:00.0
    record = host(h200, [hf.gpu(0)], kernel_log=log)
    check = one(record, "host.health.xid")
    assert check["subject"] == "GPU 0 %s" % hf.gpu(0)["uuid"]
    assert check["status"] == status and check["observed"].startswith("Xid %d x1 (" % xid), check
    assert record["status"] == (FAIL if status == FAIL else WARN)
    if status == FAIL:
        assert record["signature"] == "host.health.xid"


def test_xids_go_to_their_gpu_and_unknown_addresses_are_named(tmp_path):
    root = hf.build_node(tmp_path, gpus=2)
    log = ("NVRM: Xid (PCI:0000:07:00): 13, pid=1, name=x, a\n"
           "NVRM: Xid (PCI:0000:07:00): 13, pid=2, name=x, b\n"
           "NVRM: Xid (PCI:0000:9a:00): 79, pid=3, name=x, GPU has fallen off the bus.\n")
    record = host(root, [hf.gpu(0), hf.gpu(1)], kernel_log=log)
    by_subject = dict((c["subject"], (c["status"], c["observed"])) for c in health_checks(record, "host.health.xid"))
    assert by_subject["GPU 0 %s" % hf.gpu(0)["uuid"]] == (PASS, "none in 3 line(s) of journalctl -k -b --no-pager -q -o cat")
    assert by_subject["GPU 1 %s" % hf.gpu(1)["uuid"]][0] == WARN
    assert by_subject["GPU 1 %s" % hf.gpu(1)["uuid"]][1].startswith("Xid 13 x2 (")
    assert by_subject["PCI 0000:9a:00 (no GPU of the inventory)"] == (FAIL, "Xid 79 x1 (GPU has fallen off the bus)")


# ---- the kernel log, read through real programs (scripts on PATH standing in for journalctl and dmesg) ----------

def _program(directory, name, body):
    write_exe(directory, name, body + "\n")


def test_kernel_log_from_the_journal(tmp_path, monkeypatch):
    _program(tmp_path, "journalctl", 'echo "Linux version 6.1.0"; echo "NVRM: Xid (PCI:0000:3b:00): 79, pid=7, name=x, '
                                     'GPU has fallen off the bus."; echo "$*" > %s/args' % tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))
    log = _xid.read_kernel_xids("/")
    assert log["source"] == "journalctl -k -b --no-pager -q -o cat" and log["error"] is None and log["lines"] == 2
    assert [(e["pci"], e["xid"]) for e in log["events"]] == [("0000:3b:00", 79)]
    assert open(os.path.join(str(tmp_path), "args")).read().split() == ["-k", "-b", "--no-pager", "-q", "-o", "cat"]


def test_an_empty_journal_falls_back_to_dmesg(tmp_path, monkeypatch):
    _program(tmp_path, "journalctl", "exit 0")   # no journal for this boot: nothing printed
    _program(tmp_path, "dmesg", 'echo "NVRM: loading"; echo "NVRM: Xid (PCI:0000:06:00): 13, pid=1, name=x, y"')
    monkeypatch.setenv("PATH", str(tmp_path))
    log = _xid.read_kernel_xids("/")
    assert log["source"] == "dmesg --notime" and [e["xid"] for e in log["events"]] == [13]


def test_no_readable_kernel_log_is_not_run_with_each_reason(tmp_path, monkeypatch, h200):
    _program(tmp_path, "dmesg", 'echo "dmesg: read kernel buffer failed: Operation not permitted" >&2; exit 1')
    monkeypatch.setenv("PATH", str(tmp_path))
    log = _xid.read_kernel_xids("/")
    assert log["source"] is None and log["events"] == []
    assert log["error"] == "journalctl: not installed; dmesg --notime: rc 1: dmesg: read kernel buffer failed: Operation not permitted"
    evidence = _host.collect_evidence(root=str(h200), pynvml_module=hf.fake_pynvml([hf.gpu(0)]))
    evidence["health"]["kernel_log"] = log
    check = one(_host_evaluate.evaluate(evidence), "host.health.xid")
    assert check["status"] == NOT_RUN and check["observed"] == "kernel log not read: " + log["error"]


def test_a_hung_kernel_log_reader_is_killed(tmp_path, monkeypatch):
    _program(tmp_path, "journalctl", "sleep 30")
    _program(tmp_path, "dmesg", 'echo "NVRM: Xid (PCI:0000:06:00): 45, pid=1, name=x, y"')
    monkeypatch.setenv("PATH", str(tmp_path))
    log = _xid.read_kernel_xids("/", timeout=0.5)
    assert log["source"] == "dmesg --notime" and [e["xid"] for e in log["events"]] == [45]


@pytest.mark.parametrize("log,status,observed", [
    ("Linux version 6.1\n", PASS, "none in 1 line(s) of dmesg --notime"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n", FAIL, "Xid 79 x1 (GPU has fallen off the bus)"),
])
def test_xids_without_any_gpu_inventory_are_still_judged(tmp_path, log, status, observed):
    root = hf.build_node(tmp_path, gpus=0)
    evidence = _host.collect_evidence(root=str(root), pynvml_module=hf.fake_pynvml([], init_error=nv.NVML_ERROR_GPU_IS_LOST))
    evidence["health"]["kernel_log"] = {"source": "dmesg --notime", "error": None, "events": _xid.parse_xids(log), "lines": 1}
    check = one(_host_evaluate.evaluate(evidence), "host.health.xid")
    assert (check["subject"], check["status"], check["observed"]) == ("kernel log (no GPU inventory)", status, observed)


def test_every_health_check_is_catalogued_with_its_thresholds():
    for cid, entry in _catalogue.HEALTH_CHECKS.items():
        assert cid.startswith("host.health.") and cid in _catalogue.CHECKS
        assert entry["title"] and entry["fail"] and entry["next"]


# ---- NVLink per link (HGX systems), as nvmlDeviceGetNvLinkState returns it ---------------------------------------

A, I, S, T = (nv.NVML_NVLINK_STATE_ACTIVE, nv.NVML_NVLINK_STATE_INACTIVE, nv.NVML_NVLINK_STATE_SLEEP,
              nv.NVML_NVLINK_STATE_ACTIVE_TRAFFIC_DISABLED)


@pytest.mark.parametrize("states,status,observed", [
    # an H100/H200 SXM has 18 links; links 18..35 answer NVML_ERROR_INVALID_ARGUMENT (the GPU has no such link)
    ([A] * 18, PASS, "active: links 0-17; not read: Invalid Argument (NVML_ERROR_INVALID_ARGUMENT, code 2) on links 18-35"),
    ([A] * 17 + [I], FAIL, "inactive: links 17; active: links 0-16"),
    ([A] * 9 + [I] * 9, FAIL, "inactive: links 9-17; active: links 0-8"),
    ([I] * 18, FAIL, "inactive: links 0-17"),      # every link down on a GPU of an NVLink fabric
    ([A] * 16 + [S] * 2, PASS, "active: links 0-15; sleep: links 16-17"),
    ([A] * 17 + [T], WARN, "active: links 0-16; active, traffic disabled: links 17"),
])
def test_nvlink_state_per_link(h200, states, status, observed):
    record = host(h200, [hf.gpu(0, **hf.nvlink_gpu(states))])
    check = one(record, "host.health.nvlink")
    assert check["status"] == status and check["observed"].startswith(observed), check
    assert one(record, "host.health.fabric")["status"] == PASS


def test_nvlink_links_all_down_without_a_fabric_is_not_run(h200):
    """A PCIe GPU with NVLink but no bridge: every link inactive, no fabric: nothing to judge, said so."""
    readings = hf.nvlink_gpu([I] * 4)
    readings["fabric"] = hf.H200_READINGS["fabric"]
    check = one(host(h200, [hf.gpu(0, **readings)]), "host.health.nvlink")
    assert check["status"] == NOT_RUN and check["observed"].startswith("no NVLink is up and NVML reports no NVLink fabric"), check


@pytest.mark.parametrize("fabric,status,observed", [
    (None, NOT_RUN, "MIG enabled: NVLink not used (inactive: links 0-17"),
    # the fabric itself reports a fault: the links down are part of it
    ({"status": nv.NVML_ERROR_NOT_READY}, FAIL, "inactive: links 0-17"),
    ({"health_mask": 1 << 4}, FAIL, "inactive: links 0-17"),   # route unhealthy
])
def test_nvlink_all_links_down_on_a_mig_gpu(h200, fabric, status, observed):
    """A GPU in MIG mode has no peer-to-peer over NVLink: every link down is NOT_RUN with why, not a FAIL, unless the
    fabric registration says something is wrong."""
    readings = hf.nvlink_gpu([I] * 18)
    readings["fabric"] = dict(readings["fabric"], **(fabric or {}))
    gpu = hf.gpu(0, mig_devices=[hf.mig_device(0, gi=1)], **readings)
    check = one(host(h200, [gpu]), "host.health.nvlink")
    assert check["status"] == status and check["observed"].startswith(observed), check
    # MIG off, same links: the fabric rule (every link down on a GPU of an NVLink fabric) FAILs
    assert one(host(h200, [hf.gpu(0, **hf.nvlink_gpu([I] * 18))]), "host.health.nvlink")["status"] == FAIL


def test_an_older_pynvml_without_nvlink_says_so(h200):
    record = host(h200, [hf.gpu(0)], legacy=True)
    assert one(record, "host.health.nvlink")["observed"] == "not read: this pynvml has no nvmlDeviceGetNvLinkState"


@pytest.mark.parametrize("code", [nv.NVML_ERROR_FUNCTION_NOT_FOUND, nv.NVML_ERROR_ARGUMENT_VERSION_MISMATCH])
def test_fabric_falls_back_to_the_first_call_on_a_driver_without_the_versioned_one(h200, code):
    fabric = {"state": nv.NVML_GPU_FABRIC_STATE_COMPLETED, "status": nv.NVML_SUCCESS, "clique": 3}
    fake = hf.fake_pynvml([hf.gpu(0, fabric=fabric)], fail={(0, "nvmlDeviceGetGpuFabricInfoV"): code})
    evidence = _host.collect_evidence(root=str(h200), pynvml_module=fake)
    g = evidence["health"]["gpus"][0]
    # read by the first call: no health mask (that structure has none), no error left from the versioned one
    assert g["fabric"]["state"] == 3 and g["fabric"]["health_mask"] is None and "fabric" not in g["errors"]
    check = one(_host_evaluate.evaluate(evidence), "host.health.fabric")
    assert check["status"] == PASS and "clique 3" in check["observed"]


def test_fabric_layout_is_nvml_h_not_a_pynvml_release_with_an_80_byte_uuid():
    """Some pynvml releases declared clusterUuid as 80 bytes: state then sat outside what NVML writes and always read 0
    ('not supported'). The structures here follow nvml.h: 16-byte UUID, state an unsigned char; v2 is 36 bytes."""
    import ctypes
    assert ctypes.sizeof(_readers._FabricInfoV2) == 0x24 and _readers.FABRIC_INFO_V2 == 0x02000024
    assert _readers._FabricInfoV1.state.offset == 24 and _readers._FabricInfoV2.healthMask.offset == 32


# ---- per MIG instance ---------------------------------------------------------------------------------------------

def test_mig_instances_get_their_own_uncorrected_sram_count(tmp_path):
    sram = nv.NVML_MEMORY_LOCATION_SRAM
    devs = [hf.mig_device(0, gi=1), hf.mig_device(0, gi=2, sram={sram: 2}),
            hf.mig_device(0, gi=3, nvml_errors={"nvmlDeviceGetMemoryErrorCounter": nv.NVML_ERROR_NO_PERMISSION})]
    gpus = [hf.gpu(0, mig_devices=devs)]
    root = hf.build_node(tmp_path, gpus=gpus, mig=True)
    record = host(root, gpus)
    rows = health_checks(record, "host.health.mig_ecc")
    assert [(c["subject"], c["status"]) for c in rows] == [
        ("GPU 0 %s MIG %s" % (gpus[0]["uuid"], d["uuid"]), st) for d, st in zip(devs, (PASS, FAIL, NOT_RUN))]
    assert rows[0]["observed"] == "0 (sram 0)" and rows[1]["observed"] == "2 (sram 2)"
    assert "NVML_ERROR_NO_PERMISSION" in rows[2]["observed"]
    assert record["signature"] == "host.health.mig_ecc"
    mig = record["evidence"]["health"]["gpus"][0]["mig"]
    assert [(m["gi"], m["sram_uncorrected_volatile"]["sram"]) for m in mig] == [(1, 0), (2, 2), (3, None)]
    assert all("health" not in dev for dev in record["evidence"]["nvml"]["gpus"][0]["mig_devices"])   # kept once


def test_xid_of_a_mig_gpu_names_its_gpu_instance(h200):
    # the MIG form of the line, from NVIDIA's GPU memory error management guide (Table 3)
    log = "NVRM: Xid (PCI:0000:06:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
    (event,) = _xid.parse_xids(log)
    assert (event["pci"], event["gpu_instance"], event["xid"]) == ("0000:06:00", 5, 94)
    check = one(host(h200, [hf.gpu(0)], kernel_log=log), "host.health.xid")
    assert check["status"] == FAIL and check["observed"].endswith("; on GPU instance(s) 5"), check


# ---- thresholds ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("thresholds,over,check_id,status", [
    ({"pcie_replay_warn": 100}, {"pcie": _pcie(nvmlDeviceGetPcieReplayCounter=17)}, "host.health.pcie_replay", PASS),
    ({"pcie_replay_warn": 10}, {"pcie": _pcie(nvmlDeviceGetPcieReplayCounter=17)}, "host.health.pcie_replay", WARN),
    ({"pcie_replay_warn": None}, {"pcie": _pcie(nvmlDeviceGetPcieReplayCounter=17)}, "host.health.pcie_replay", PASS),
    ({"temperature_margin_c": 10}, {"temperature": 80}, "host.health.temperature", WARN),
    ({"temperature_margin_c": 0}, {"temperature": 88}, "host.health.temperature", PASS),
    ({"temperature_margin_c": 0}, {"temperature": 89}, "host.health.temperature", FAIL),   # the slowdown is never moved
    ({"ecc_uncorrected_volatile_fail": 3}, {"ecc_counts": _ecc(uv=2, ua=2)}, "host.health.ecc_errors", WARN),
    ({"ecc_uncorrected_volatile_fail": 3, "ecc_uncorrected_aggregate_warn": 5}, {"ecc_counts": _ecc(uv=2, ua=2)},
     "host.health.ecc_errors", PASS),
    ({"retired_pages_fail": 10}, dict(SUPPORTED_PAGES, retired_pages={0: [1] * 6, 1: [2] * 4}), "host.health.retired_pages", FAIL),
    ({"row_remap_banks_exhausted_warn": 3}, {"row_remap_histogram": {"max": 60, "high": 0, "partial": 0, "low": 0, "none": 2}},
     "host.health.row_remap", PASS),
    ({"nvlink_inactive_fail": 2}, hf.nvlink_gpu([A] * 17 + [I]), "host.health.nvlink", WARN),
    ({"nvlink_inactive_fail": 2}, hf.nvlink_gpu([A] * 16 + [I] * 2), "host.health.nvlink", FAIL),
])
def test_thresholds_can_be_set(h200, thresholds, over, check_id, status):
    evidence = _host.collect_evidence(root=str(h200), pynvml_module=hf.fake_pynvml([hf.gpu(0, **over)]),
                                      health_thresholds=thresholds)
    assert dict((k, evidence["health"]["thresholds"][k]) for k in thresholds) == thresholds
    record = _host_evaluate.evaluate(evidence)
    assert one(record, check_id)["status"] == status, one(record, check_id)


@pytest.mark.parametrize("value,message", [
    ({"pcie_replay": 3}, "health_thresholds: unknown threshold 'pcie_replay' (known: ecc_uncorrected_aggregate_warn"),
    ({"pcie_replay_warn": 0}, "health_thresholds.pcie_replay_warn must be a whole number >= 1, or null"),
    ({"temperature_margin_c": -1}, "health_thresholds.temperature_margin_c must be a whole number >= 0"),
    ({"retired_pages_fail": "60"}, "health_thresholds.retired_pages_fail must be a whole number >= 1"),
    ({"retired_pages_fail": True}, "health_thresholds.retired_pages_fail must be a whole number >= 1"),
    ([1], "health_thresholds must be a dict of threshold name -> number (got list)"),
])
def test_bad_thresholds_are_refused_before_anything_is_read(h200, value, message):
    fake = hf.fake_pynvml([hf.gpu(0)])
    with pytest.raises(ValueError) as err:
        _host.record(root=str(h200), pynvml_module=fake, health_thresholds=value)
    assert str(err.value).startswith(message), str(err.value)
    assert fake.calls == []


def test_every_threshold_is_documented_and_used():
    source = open(_judge.__file__).read() + open(_health_limits.__file__).read()   # the pcie_replay judge is there
    for name, entry in _health_limits.THRESHOLDS.items():
        assert entry["applies"].split()[0] in _catalogue.HEALTH_CHECKS and entry["why"], name
        assert source.count('t["%s"]' % name) >= 1, name


# ---- dcgmi diag, through a fake dcgmi on PATH printing DCGM's own JSON shapes (tests/unit/fixtures/dcgm/README.md) ---

DCGM_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "dcgm")


CAT, SLEEP = shutil.which("cat"), shutil.which("sleep")   # PATH holds only the fake dcgmi in these tests


def _fake_dcgmi(directory, fixture=None, rc=0, body=None):
    """A dcgmi that records its arguments and prints ``fixture`` (DCGM exits non-zero when a test fails)."""
    out = '%s "%s"' % (CAT, os.path.join(DCGM_FIXTURES, fixture)) if fixture else ""
    _program(directory, "dcgmi", body or 'echo "$*" > "%s/dcgmi.args"\n%s\nexit %d' % (directory, out, rc))


# DCGM's GPU ids are its own entity ids; dcgmi diag -j gives no UUID, so the subject says the match is by id
BY_ID = "GPU %d %s (DCGM id %d, matched by id: dcgmi gave no UUID): software"


def _nvml(gpus):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._host import nvml as _nvml
    return _nvml.read_nvml(hf.fake_pynvml(gpus))


def _dcgm_record(h200, diag, gpus):
    evidence = _host.collect_evidence(root=str(h200), pynvml_module=hf.fake_pynvml(gpus))
    evidence["health"]["dcgm_diag"] = diag
    return _host_evaluate.evaluate(evidence)


def test_dcgm_level_1_pass_is_a_check_per_test_and_gpu(tmp_path, monkeypatch, h200):
    _fake_dcgmi(tmp_path, "dcgm4-r1-pass.json")
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus = [hf.gpu(0), hf.gpu(1)]
    diag = _dcgm.read_dcgm_diag(1, _nvml(gpus))
    assert open(os.path.join(str(tmp_path), "dcgmi.args")).read().split() == ["diag", "-r", "1", "-j"]
    assert diag["ran"] and diag["rc"] == 0 and diag["version"] == "4.2.3"
    assert [(t["category"], t["test"], t["entity"], t["status"]) for t in diag["tests"]] == [
        ("Deployment", "software", 0, "Pass"), ("Deployment", "software", 1, "Pass")]
    rows = health_checks(_dcgm_record(h200, diag, gpus), "host.health.dcgm_diag")
    assert [(c["subject"], c["status"]) for c in rows] == [
        (BY_ID % (0, hf.gpu(0)["uuid"], 0), PASS), (BY_ID % (1, hf.gpu(1)["uuid"], 1), PASS)]


def test_dcgm_failure_fails_the_host_with_dcgms_words(tmp_path, monkeypatch):
    _fake_dcgmi(tmp_path, "dcgm4-r1-fail.json", rc=226)   # dcgmi exits non-zero when a test fails; the JSON says which
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus = [hf.gpu(0), hf.gpu(1)]
    root = hf.build_node(tmp_path / "node", gpus=2)
    record = _dcgm_record(root, _dcgm.read_dcgm_diag(1, _nvml(gpus)), gpus)
    rows = dict((c["subject"], c) for c in health_checks(record, "host.health.dcgm_diag"))
    failed = rows[BY_ID % (1, hf.gpu(1)["uuid"], 1)]
    assert failed["status"] == FAIL
    assert failed["observed"] == "Fail: GPU 1 had uncorrectable memory errors and row remapping failed."
    assert rows[BY_ID % (0, hf.gpu(0)["uuid"], 0)]["status"] == PASS
    assert (record["status"], record["signature"]) == (FAIL, "host.health.dcgm_diag")


def test_dcgm_3_shape_is_read_too(tmp_path, monkeypatch):
    _fake_dcgmi(tmp_path, "dcgm3-r1.json")
    monkeypatch.setenv("PATH", str(tmp_path))
    diag = _dcgm.read_dcgm_diag(1, _nvml([hf.gpu(0), hf.gpu(1)]))
    assert diag["version"] == "3.3.9" and len(diag["tests"]) == 20   # 10 tests of GPUs 0 and 1
    persistence = [(t["entity"], _dcgm.DCGM_STATUSES[t["status"].lower()], t["warnings"]) for t in diag["tests"]
                   if t["test"] == "Persistence Mode"]
    assert persistence == [(1, WARN, ["Persistence mode for GPU 1 is disabled."]), (0, PASS, [])]
    assert [t["status"] for t in diag["tests"] if t["test"] == "Inforom"] == ["SKIP", "SKIP"]


@pytest.mark.parametrize("setup,level,gpus,why", [
    (None, 0, [hf.gpu(0)], "not asked (dcgm_diag: 0)"),
    ("absent", 1, [hf.gpu(0)], "dcgmi is not installed (no DCGM on this node)"),
    ("fake", 1, [hf.gpu(0), hf.gpu(1, processes=[4242])],
     "GPU in use, not preempting: 1 compute process(es) on %s: dcgmi diag not run" % hf.gpu(1)["uuid"]),
    ("fake", 1, [hf.gpu(0, nvml_errors=dict(hf.H200_READINGS["nvml_errors"], nvmlDeviceGetComputeRunningProcesses=nv.NVML_ERROR_NO_PERMISSION))],
     "cannot tell whether the GPUs are in use (no NVML list of compute processes): dcgmi diag not run"),
])
def test_dcgm_is_not_run_with_the_reason(tmp_path, monkeypatch, h200, setup, level, gpus, why):
    if setup == "fake":
        _fake_dcgmi(tmp_path, "dcgm4-r1-pass.json")
    monkeypatch.setenv("PATH", str(tmp_path))
    diag = _dcgm.read_dcgm_diag(level, _nvml(gpus))
    assert (diag["ran"], diag["why"]) == (False, why)
    assert not os.path.exists(os.path.join(str(tmp_path), "dcgmi.args"))   # never started
    check = one(_dcgm_record(h200, diag, gpus), "host.health.dcgm_diag")
    assert (check["status"], check["observed"]) == (NOT_RUN, why)


def test_dcgm_without_nvml_is_not_run(tmp_path, monkeypatch):
    _fake_dcgmi(tmp_path, "dcgm4-r1-pass.json")
    monkeypatch.setenv("PATH", str(tmp_path))
    diag = _dcgm.read_dcgm_diag(1, {"ok": False, "error": "pynvml cannot be imported: x"})
    assert diag["why"] == "NVML unavailable, so whether a GPU is busy is unknown: pynvml cannot be imported: x"


@pytest.mark.parametrize("body,timeout,status,observed", [
    ('%s "%s"' % (CAT, os.path.join(DCGM_FIXTURES, "dcgm4-runtime-error.json")) + "; exit 1", None, WARN,
     "DCGM runtime error: Error: unable to establish a connection to the specified host: localhost"),
    ('echo "Error: unable to establish a connection to the specified host: localhost"; exit 255', None, WARN,
     "no result: dcgmi diag output not understood (rc 255): no JSON object in the output; Error: unable to establish"),
    ("%s 30" % SLEEP, 0.5, WARN, "no result: timeout after 0.5s"),
])
def test_dcgm_that_gives_no_result_warns_with_why(tmp_path, monkeypatch, h200, body, timeout, status, observed):
    _fake_dcgmi(tmp_path, body=body)
    monkeypatch.setenv("PATH", str(tmp_path))
    if timeout:
        monkeypatch.setitem(_health_limits.DCGM_TIMEOUTS, 1, timeout)
    gpus = [hf.gpu(0)]
    check = one(_dcgm_record(h200, _dcgm.read_dcgm_diag(1, _nvml(gpus)), gpus), "host.health.dcgm_diag")
    assert check["status"] == status and check["observed"].startswith(observed), check


ODD_DCGM_SHAPES = [
    ["DCGM Diagnostic"], 17, {"DCGM Diagnostic": {"test_categories": ["x"]}},
    {"DCGM Diagnostic": {"test_categories": {"Deployment": []}}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": ["Software"]}]}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": {"name": "s"}}]}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "s", "results": ["pass"]}]}]}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "s", "results": "Pass"}]}]}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "s", "results": [{"entity_id": [0], "status": "Pass"}]}]}]}},
    {"DCGM Diagnostic": {"test_categories": [{"tests": [{"name": "s", "results": [{"entity_id": None, "status": "Pass"}]}]}]}},
]


@pytest.mark.parametrize("doc", ODD_DCGM_SHAPES, ids=lambda d: json.dumps(d)[:60])
def test_dcgm_odd_json_is_a_value_error_and_a_warn_never_a_crash(tmp_path, monkeypatch, h200, doc):
    """Any JSON dcgmi prints that the parser does not understand is ValueError (nothing else escapes), and the host
    record gets the 'no result' WARN with the reason instead of crashing (which would block the compute probe)."""
    text = json.dumps(doc)
    if isinstance(doc, dict):
        with pytest.raises(ValueError):
            _dcgm.parse_dcgm_diag(text)
    (tmp_path / "out.json").write_text(text)
    _fake_dcgmi(tmp_path, body='%s "%s"' % (CAT, tmp_path / "out.json"))
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus = [hf.gpu(0)]
    record = _dcgm_record(h200, _dcgm.read_dcgm_diag(1, _nvml(gpus)), gpus)
    check = one(record, "host.health.dcgm_diag")
    assert check["status"] == WARN and check["observed"].startswith("no result: dcgmi diag output not understood (rc 0): "), check


def test_dcgm_odd_values_inside_a_known_shape_are_read_as_text():
    """Warnings as one string, a status that is a number, info objects: read as text, not a crash."""
    test = {"name": "software", "results": [{"entity_group": "GPU", "entity_id": "0", "status": 3,
                                             "warnings": "one string", "info": [{"info": "x"}]}]}
    tests = _dcgm.parse_dcgm_diag(json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": 1, "tests": [test]}]}}))["tests"]
    assert [(t["entity"], t["status"], t["warnings"], t["info"]) for t in tests] == [(0, "3", ["one string"], ["x"])]


def test_dcgm_level_above_1_only_when_asked_and_never_above_4():
    assert _dcgm.check_dcgm_level(0) == 0 and _dcgm.check_dcgm_level(3) == 3
    for bad in (5, -1, True, "1"):
        with pytest.raises(ValueError):
            _dcgm.check_dcgm_level(bad)


def test_dcgm_summary_error_of_no_single_gpu_is_kept():
    """DCGM 4 puts an error of no entity in the test's summary only: it must not vanish behind per-GPU passes."""
    warning = {"warning": "Fabric Manager is not running", "error_id": 91, "error_category": 5, "error_severity": 2}
    test = {"name": "software", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
            "test_summary": {"status": "Fail", "warnings": [warning]}}
    text = json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [test]}]},
                       "metadata": {"version": "4.2.3"}})
    tests = _dcgm.parse_dcgm_diag(text)["tests"]
    assert [(t["entity"], t["status"], t["warnings"]) for t in tests] == [
        (0, "Pass", []), (None, "Fail", ["Fabric Manager is not running"])]
    same = _dcgm.parse_dcgm_diag(open(os.path.join(DCGM_FIXTURES, "dcgm4-r1-fail.json")).read())["tests"]
    assert [t["entity"] for t in same] == [0, 1]     # a summary no worse than a GPU's result adds nothing


# ---- a FAIL criterion whose reading is missing is never a PASS ----

NOT_SUPPORTED_TEXT = "Not Supported (NVML_ERROR_NOT_SUPPORTED, code 3)"
NO_PERMISSION_TEXT = "Insufficient Permissions (NVML_ERROR_NO_PERMISSION, code 4)"


def _evaluate_with(h200, gpu, change):
    """The host record after ``change(gpu_health)`` edits the collected evidence of GPU 0 (a reading NVML refused
    only in part cannot be made with the fake, which fails a whole function)."""
    evidence = _host.collect_evidence(root=str(h200), pynvml_module=hf.fake_pynvml([gpu]))
    change(evidence["health"]["gpus"][0])
    return _host_evaluate.evaluate(evidence)


def _ecc_volatile_unread(g):
    g["ecc_errors"]["uncorrected_volatile"] = None
    g["errors"]["ecc_uncorrected_volatile"] = NOT_SUPPORTED_TEXT


def _single_bit_unread(g):
    g["retired_pages"].update(single_bit=None, double_bit=0, pending=False)
    g["errors"]["retired_pages_single_bit"] = NO_PERMISSION_TEXT
    g["errors"].pop("retired_pages_double_bit", None)


def _reset_field_unread(g):
    g["recovery_action"] = None
    g["errors"]["recovery_action"] = NOT_SUPPORTED_TEXT
    g["reset_status"] = {"reset_required": 0, "drain_and_reset": None}
    g["errors"]["drain_and_reset"] = NO_PERMISSION_TEXT


@pytest.mark.parametrize("change,check_id,observed", [
    (_ecc_volatile_unread, "host.health.ecc_errors", "uncorrected volatile not read: %s" % NOT_SUPPORTED_TEXT),
    (_single_bit_unread, "host.health.retired_pages", "not read: %s" % NO_PERMISSION_TEXT),
    (_reset_field_unread, "host.health.recovery_action", "not read: %s" % NO_PERMISSION_TEXT),
])
def test_a_pass_without_the_fail_reading_is_not_run(h200, change, check_id, observed):
    check = one(_evaluate_with(h200, hf.gpu(0), change), check_id)
    assert check["status"] == NOT_RUN and check["observed"].startswith(observed), check


def test_a_fail_or_warn_from_what_was_read_stands(h200):
    def change(g):
        _ecc_volatile_unread(g)
        g["ecc_errors"]["uncorrected_aggregate"] = 5
    assert one(_evaluate_with(h200, hf.gpu(0), change), "host.health.ecc_errors")["status"] == WARN

    def retired(g):
        g["retired_pages"].update(single_bit=None, double_bit=80, pending=False)
    assert one(_evaluate_with(h200, hf.gpu(0), retired), "host.health.retired_pages")["status"] == FAIL


def test_nvlink_a_link_unread_is_not_a_pass_but_a_link_the_gpu_has_not_is(h200):
    record = host(h200, [hf.gpu(0, **hf.nvlink_gpu([A] * 18))])
    assert one(record, "host.health.nvlink")["status"] == PASS   # links 18+: INVALID_ARGUMENT, a link the GPU has not

    def change(g):
        g["nvlink"]["links"].pop("5")
        g["nvlink"]["errors"][NO_PERMISSION_TEXT] = [5]
    check = one(_evaluate_with(h200, hf.gpu(0, **hf.nvlink_gpu([A] * 18)), change), "host.health.nvlink")
    assert check["status"] == NOT_RUN and check["observed"].startswith("links not read: %s on links 5" % NO_PERMISSION_TEXT)


def test_mig_ecc_a_location_unread_is_not_a_pass(h200):
    gpu = hf.gpu(0, mig_devices=[hf.mig_device(0, gi=1)])
    assert [c["status"] for c in health_checks(host(h200, [gpu]), "host.health.mig_ecc")] == [PASS]  # others NOT_SUPPORTED

    def change(g):
        g["mig"][0]["sram_uncorrected_volatile"].update(sram=0, l2_cache=None)
        g["mig"][0]["errors"] = {"sram_l2_cache": NO_PERMISSION_TEXT, "sram_l1_cache": NOT_SUPPORTED_TEXT}
    check = one(_evaluate_with(h200, hf.gpu(0, mig_devices=[hf.mig_device(0, gi=1)]), change), "host.health.mig_ecc")
    assert check["status"] == NOT_RUN and check["observed"].startswith("not read: %s" % NO_PERMISSION_TEXT), check


def test_dcgm_levels_that_load_the_gpu_are_not_run_in_check_or_audit_mode(tmp_path, monkeypatch, h200):
    """Levels 2-4 load the GPU for minutes to hours: NOT_RUN in check mode and audit mode, never started; level 1
    (deployment and software checks, no load) runs."""
    _fake_dcgmi(tmp_path, "dcgm4-r1-pass.json")
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus = [hf.gpu(0)]
    for why in ("check mode", "audit mode"):
        for level in (2, 3, 4):
            diag = _dcgm.read_dcgm_diag(level, _nvml(gpus), no_gpu_load=why)
            assert (diag["ran"], diag["why"]) == (False, "%s: dcgmi diag -r %d loads the GPU, not run (level 1 does not)" % (why, level))
    assert not os.path.exists(os.path.join(str(tmp_path), "dcgmi.args"))   # never started
    assert _dcgm.read_dcgm_diag(1, _nvml(gpus), no_gpu_load="check mode")["ran"] is True


def test_node_inspect_passes_check_and_audit_mode_to_dcgm(tmp_path, monkeypatch):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._node import inspect as _inspect
    seen = []
    monkeypatch.setattr(_host, "record", lambda **kw: seen.append(kw["no_gpu_load"]) or {"layer": "host"})
    base = dict((k, v.get("default")) for k, v in _args.NODE_LAYERS_ARGSPEC.items())
    base.update(layers=["host"], root="/")
    for mode, check_mode, why in (("full", False, None), ("full", True, "check mode"), ("audit", False, "audit mode")):
        _inspect.inspect(dict(base, mode=mode), check_mode=check_mode)
    assert seen == [None, "check mode", "audit mode"]


def test_dcgm_non_zero_exit_with_every_test_passing_warns(tmp_path, monkeypatch, h200):
    _fake_dcgmi(tmp_path, body='%s "%s"; echo "something went wrong" >&2; exit 3' % (CAT, os.path.join(DCGM_FIXTURES, "dcgm4-r1-pass.json")))
    monkeypatch.setenv("PATH", str(tmp_path))
    gpus = [hf.gpu(0)]
    rows = health_checks(_dcgm_record(h200, _dcgm.read_dcgm_diag(1, _nvml(gpus)), gpus), "host.health.dcgm_diag")
    extra = [c for c in rows if c["subject"] == "dcgmi diag"]
    assert [(c["status"], c["observed"]) for c in extra] == [
        (WARN, "dcgmi exited with rc 3 although no test failed or warned: something went wrong")]


def test_dcgm_that_could_not_be_started_is_not_run(h200):
    diag = {"asked": 1, "ran": True, "why": None, "tests": [], "rc": None, "error": "cannot execute /usr/bin/dcgmi: denied",
            "timed_out": False}
    check = one(_dcgm_record(h200, diag, [hf.gpu(0)]), "host.health.dcgm_diag")
    assert (check["status"], check["observed"]) == (NOT_RUN, "dcgmi could not run: cannot execute /usr/bin/dcgmi: denied")
