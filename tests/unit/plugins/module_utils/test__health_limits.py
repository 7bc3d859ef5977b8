"""host.health.pcie_replay follows DCGM: a WARN needs a count DCGM's diagnostic would flag (more than 80) or a rate over
the run above DCGM's health-watch limit for the link (Gen5 x16: 31 a minute); a lower count since the driver loaded
(1 or 2 on every healthy H200 lent here) is information in the observation, never a WARN. Every threshold of
THRESHOLDS names DCGM's default for its reading (or that DCGM has none)."""
import pytest

import hostfixture as hf  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.health import limits as _health_limits
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import evaluate as _host_evaluate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN


def replay_check(root, **pcie):
    readings = dict(hf.healthy()["pcie"])
    readings.update(pcie)
    evidence = _host.collect_evidence(root=str(root), pynvml_module=hf.fake_pynvml([hf.gpu(0, pcie=readings)]))
    record = _host_evaluate.evaluate(evidence)
    (check,) = [c for c in record["checks"] if c["id"] == "host.health.pcie_replay"]
    return check, evidence["health"]["gpus"][0]["pcie"]


GEN, WIDTH, REPLAYS = "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter"


@pytest.mark.parametrize("pcie,status,observed", [
    # a count since the driver loaded: information below DCGM's diagnostic limit (more than 80 replays)
    ({REPLAYS: 0}, PASS, "0 since the driver loaded; +0 in"),
    ({REPLAYS: 1}, PASS, "1 since the driver loaded (information: below 81, no rate)"),     # the H200s lent here
    ({REPLAYS: 2}, PASS, "2 since the driver loaded (information: below 81, no rate)"),
    ({REPLAYS: 17}, PASS, "17 since the driver loaded (information"),
    ({REPLAYS: 80}, PASS, "80 since the driver loaded (information"),
    ({REPLAYS: 81}, WARN, "81 since the driver loaded; +0 in"),
    ({REPLAYS: 5000}, WARN, "5000 since the driver loaded"),
    # replays between the two readings of the run (milliseconds apart: never extrapolated below a minute), against
    # DCGM's limit a minute for the link: ceil(per-lane rate of the generation x lanes)
    ({REPLAYS: [0, 31]}, PASS, "+31 in"),                                             # Gen5 x16: 31, not above it
    ({REPLAYS: [0, 32]}, WARN, "(DCGM limit 31 a minute for Gen5 x16: above it)"),
    ({REPLAYS: [2, 4]}, PASS, "2 since the driver loaded (information: below 81, no rate); +2 in"),
    ({REPLAYS: [2, 11], GEN: 3}, WARN, "DCGM limit 8 a minute for Gen3 x16: above it"),   # ceil(0.48 x 16)
    ({REPLAYS: [2, 10], GEN: 3}, PASS, "DCGM limit 8 a minute for Gen3 x16)"),
    ({REPLAYS: [0, 17], WIDTH: 8}, WARN, "DCGM limit 16 a minute for Gen5 x8: above it"),  # ceil(1.92 x 8)
    ({REPLAYS: [0, 7], GEN: 1, WIDTH: 16}, WARN, "DCGM limit 3 a minute for Gen1 x16"),     # ceil(0.15 x 16)
    ({REPLAYS: [0, 100], GEN: 9}, WARN, "DCGM limit 62 a minute for Gen9 x16"),         # a newer generation: Gen6's
])
def test_pcie_replays_warn_only_on_what_dcgm_flags(tmp_path, pcie, status, observed):
    check, _readings = replay_check(hf.build_node(tmp_path), **pcie)
    assert check["status"] == status and observed in check["observed"], check


def test_the_counter_is_read_twice_in_one_session_and_the_interval_recorded(tmp_path):
    fake = hf.fake_pynvml([hf.gpu(0, pcie=dict(hf.healthy()["pcie"], **{REPLAYS: [1, 3]}))])
    evidence = _host.collect_evidence(root=str(hf.build_node(tmp_path)), pynvml_module=fake)
    pcie = evidence["health"]["gpus"][0]["pcie"]
    assert (pcie["replay_counter"], pcie["replay_counter_end"]) == (1, 3) and 0 <= pcie["replay_interval_s"] < 5
    assert "replay_read_at" not in pcie     # read in the one NVML session of the host layer (a forked reader)


def test_a_second_reading_that_fails_leaves_the_count_judged_and_says_so(tmp_path):
    gpu = hf.gpu(0)
    fake = hf.fake_pynvml([gpu])
    first = fake.nvmlDeviceGetPcieReplayCounter
    calls = []

    def once(handle):
        calls.append(handle)
        if len(calls) > 1:
            raise hf.real_pynvml.NVMLError(hf.real_pynvml.NVML_ERROR_GPU_IS_LOST)
        return first(handle)
    fake.nvmlDeviceGetPcieReplayCounter = once
    record = _host_evaluate.evaluate(_host.collect_evidence(root=str(hf.build_node(tmp_path)), pynvml_module=fake))
    (check,) = [c for c in record["checks"] if c["id"] == "host.health.pcie_replay"]
    assert check["status"] == PASS and "rate not measured (no second reading)" in check["observed"], check
    assert "NVML_ERROR_GPU_IS_LOST" in record["evidence"]["health"]["gpus"][0]["pcie"]["replay_end_error"]


@pytest.mark.parametrize("readings,thresholds,status", [
    # over an interval of a minute or more the limit scales with it: 31 a minute for Gen5 x16
    ({"replay_counter": 0, "replay_counter_end": 62, "replay_interval_s": 120.0}, {}, PASS),
    ({"replay_counter": 0, "replay_counter_end": 63, "replay_interval_s": 120.0}, {}, WARN),
    ({"replay_counter": 0, "replay_counter_end": 16, "replay_interval_s": 60.0}, {"pcie_replay_rate_percent": 50}, WARN),
    ({"replay_counter": 0, "replay_counter_end": 15, "replay_interval_s": 60.0}, {"pcie_replay_rate_percent": 50}, PASS),
    ({"replay_counter": 0, "replay_counter_end": 500, "replay_interval_s": 1.0}, {"pcie_replay_rate_percent": None}, PASS),
    ({"replay_counter": 500, "replay_counter_end": 500, "replay_interval_s": 1.0}, {"pcie_replay_warn": None}, PASS),
    ({"replay_counter": 500, "replay_counter_end": 500, "replay_interval_s": 1.0}, {"pcie_replay_warn": 1000}, PASS),
])
def test_replay_judgement_over_longer_intervals_and_thresholds(readings, thresholds, status):
    pcie = dict(readings, generation_current=5, width_current=16)
    t = dict(_health_limits.DEFAULT_THRESHOLDS, **thresholds)
    assert _health_limits.judge_replays(pcie, t)[0] == status


def test_an_unread_counter_is_not_run(tmp_path):
    over = dict(hf.healthy()["nvml_errors"], **{REPLAYS: hf.real_pynvml.NVML_ERROR_NOT_SUPPORTED})
    evidence = _host.collect_evidence(root=str(hf.build_node(tmp_path)),
                                      pynvml_module=hf.fake_pynvml([hf.gpu(0, nvml_errors=over)]))
    (check,) = [c for c in _host_evaluate.evaluate(evidence)["checks"] if c["id"] == "host.health.pcie_replay"]
    assert check["status"] == NOT_RUN and "NVML_ERROR_NOT_SUPPORTED" in check["observed"]


# DCGM's default for each threshold's reading (NVIDIA/DCGM v4.6.0), or "ours" where DCGM judges no such reading
DCGM_DEFAULTS = {
    "ecc_uncorrected_volatile_fail": (1, "DcgmHealthWatch.cpp:1735"),
    "ecc_uncorrected_aggregate_warn": (1, "Ours"),
    "retired_pages_fail": (63, "DcgmGPUHardwareLimits.h:21"),
    "row_remap_banks_exhausted_warn": (1, "Ours"),
    "temperature_margin_c": (5, "Ours"),
    "pcie_replay_warn": (81, "nvvs/plugin_src/pcie/Pcie.cpp:104"),
    "pcie_replay_rate_percent": (100, "DcgmHealthWatch.cpp:1559"),
    "nvlink_inactive_fail": (1, "DcgmHealthWatch.cpp:3002"),
    "mig_sram_uncorrected_fail": (1, "DcgmHealthWatch.cpp:1735"),
}


@pytest.mark.parametrize("name", sorted(_health_limits.THRESHOLDS))
def test_every_threshold_is_set_against_dcgm_and_cites_it(name):
    default, citation = DCGM_DEFAULTS[name]
    entry = _health_limits.THRESHOLDS[name]
    assert entry["default"] == default and citation in entry["why"], entry
    assert citation == "Ours" or "DCGM v4.6.0" in entry["why"]


def test_the_limit_table_is_dcgms():
    assert [_health_limits.replay_rate_limit(gen, 16) for gen in range(1, 8)] == [3, 5, 8, 16, 31, 62, 62]
    assert _health_limits.replay_rate_limit(None, 16) is None and _health_limits.replay_rate_limit(5, 0) is None
