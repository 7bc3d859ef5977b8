"""Every sentence the fleet report (terminal summary, HTML, Markdown, JUnit) and the fleet callback can print is true of
the run it summarises: each is tried against runs of six shapes (a reachable host without a driver, an unreachable
host, an audit, a post-check, a verified fleet, a mixed fleet) where it must appear and where it must not. docs/usage.md
("Every sentence and when it is said") lists the same sentences with their conditions."""
import re

import pytest
from test__report import GPU_ROW, bound, healthy, rec  # the records of the report's own tests (same directory)

from ansible_collections.gpuprobe.layers.plugins.action.fleet_report import failing_hosts
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.sentences import gate_line
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder, not_run
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V

UUID = GPU_ROW["uuid"]
PINS = {"driver_version": "580.159.04"}


def host_record(status=PASS, gpus=1, health=((PASS, "host.health.ecc_errors", "0"),), check=None):
    """A host record whose inventory lists ``gpus`` GPUs, with health checks (status, id, observed) on GPU 0 and dcgmi
    diag not asked (the default)."""
    b = LayerBuilder("host")
    b.add(check or "host.nvml.init", status, "nvmlInit", "NVML initialised", "NVML 13" if status == PASS else "NVML_ERROR_LIBRARY_NOT_FOUND")
    for st, cid, observed in health if gpus else ():
        b.add(cid, st, "GPU 0 %s" % UUID, "healthy", observed)
    b.add("host.health.dcgm_diag", NOT_RUN, "dcgmi diag", "dcgmi diag -r 1", "not asked (dcgm_diag: 0)")
    b.evidence = {"gpus": [{"index": i, "uuid": UUID if i == 0 else "GPU-%d" % i, "name": "NVIDIA H200"} for i in range(gpus)]}
    b.evidence["nvml"] = {"driver_version": "580.159.04", "cuda_driver_version_int": 13000} if status == PASS else {}
    b.versions = {"driver": "580.159.04", "cuda_driver_api": "13000"} if status == PASS else {}
    return b.build(signature="host.nvml.init" if status == FAIL else None)


def verified(**kw):
    r = healthy()
    r["host"] = host_record(**kw)
    return r


def no_driver():
    return {"host": host_record(FAIL, gpus=0), "cdi": not_run("cdi", "blocked by host FAIL"),
            "runtime": not_run("runtime", "blocked by host FAIL"), "compute": not_run("compute", "blocked by host FAIL")}


def audit():
    r = verified()
    for layer in ("runtime", "compute"):
        r[layer] = not_run(layer, "not run in audit mode")
    return r


def compute_failed():
    r = verified()
    r["compute"] = bound(rec("compute", FAIL, "compute.kernel.verify", signature="compute.verify.mismatch",
                             evidence={"container": {"executed": True, "cdi_devices": ["nvidia.com/gpu=0"]},
                                       "gpus": [dict(GPU_ROW, status=FAIL, signature="compute.verify.mismatch")]}))
    return r


def _host(name, records=None, pins=None, **kw):
    return dict({"name": name, "records": records, "pins": PINS if pins is None else pins}, **kw)


UNREACHABLE = _host("gone", None, unreachable="ssh: connect to host gone port 22: No route")
RUNS = {
    # localhost, reachable, no driver: its host layer ran and found no GPU; its pin could not be observed
    "no_gpu_host": ({"mode": "full"}, False, [_host("localhost", no_driver())]),
    "unreachable": ({"mode": "full"}, False, [UNREACHABLE]),
    "audit": ({"mode": "audit"}, False, [_host("gpu-a", audit()), _host("gpu-b", audit())]),
    "postcheck": ({"mode": "full"}, True, [_host("gpu-a", verified()), _host("gpu-bad", compute_failed())]),
    "verified": ({"mode": "full"}, False, [_host("gpu-a", verified()), _host("gpu-b", verified())]),
    "mixed": ({"mode": "full"}, False, [
        _host("gpu-a", verified()), _host("gpu-bad", compute_failed()), UNREACHABLE,
        _host("localhost", no_driver()), _host("gpu-old", verified(), pins={"driver_version": "570.1"}),
        _host("gpu-replay", verified(health=((WARN, "host.health.pcie_replay", "81 since the driver loaded"),)))]),
}


def texts(run):
    """Everything the run prints: the terminal summary, the dashboard's sentences, Markdown, HTML, JUnit and the fleet
    callback's last line (the gate fails every host fleet_report lists as failing)."""
    mode, require_verified, hosts = RUNS[run]
    report = F.build_report(hosts, "2026-12-04T12:00:00Z", run=dict(mode, cdi_source="node"))
    failing = failing_hosts(report, require_verified, "the report")
    result = {"unverifiable": dict((n, e["unverifiable"]) for n, e in report["hosts"].items() if e["unverifiable"]),
              "failing": failing}
    gate = [gate_line(sorted(failing), result)] if failing else []
    return {"terminal": "\n".join(F.summary_lines(report) + gate), "headlines": "\n".join(V.headlines(report)),
            "markdown": V.render_markdown(report), "html": V.render_html(report), "junit": V.render_junit(report)}


# (sentence, a pattern it matches, runs where it must appear in every rendering listed, runs where it must not appear
# anywhere, the renderings it must appear in)
ALL = ("terminal", "headlines", "markdown", "html")
SENTENCES = [
    ("GPUs verified", r"\d+ of [\d,]+ GPUs? verified in a container", ("audit", "postcheck", "verified", "mixed"),
     ("no_gpu_host", "unreachable"), ALL),
    ("no GPU seen", r"No GPU was seen", ("no_gpu_host", "unreachable"), ("audit", "postcheck", "verified", "mixed"), ALL),
    ("GPUs unknown", r"the GPUs of [\d,]+ hosts? (are|is) unknown", ("unreachable", "mixed"),
     ("no_gpu_host", "audit", "postcheck", "verified"), ALL),
    ("unknown because not reached", r"\(1 not reached\)|1 not reached", ("unreachable", "mixed"), ("no_gpu_host", "verified"), ALL),
    ("host lists no GPU", r"[\d,]+ hosts? lists? no GPU \((its|their) host layer ran and found none\)", ("no_gpu_host", "mixed"),
     ("unreachable", "audit", "postcheck", "verified"), ALL),
    ("audit runs no container", r"not verified \(an audit runs no container\)", ("audit",),
     ("no_gpu_host", "unreachable", "postcheck", "verified", "mixed"), ALL),
    ("busy or not reached", r"not verified \(busy, or compute did not reach them\)", (),
     ("audit", "no_gpu_host", "unreachable", "verified"), ALL),
    ("hosts differ from pins", r"[\d,]+ (hosts differ from their|host differs from its) pins", ("mixed",),
     ("no_gpu_host", "unreachable", "audit", "postcheck", "verified"), ALL),
    ("pins not observed", r"(hosts have|host has) a pinned value that was not observed", ("no_gpu_host", "mixed"),
     ("unreachable", "audit", "postcheck", "verified"), ALL),
    ("drift in JUnit, apart", r'name="drift differs"', ("mixed",), ("no_gpu_host", "unreachable", "verified"), ("junit",)),
    ("pin not observed in JUnit", r'name="drift not observed"', ("no_gpu_host", "mixed"), ("unreachable", "verified"), ("junit",)),
    ("could not be reached", r"could not be reached", ("unreachable", "mixed"), ("no_gpu_host", "audit", "postcheck", "verified"),
     ("headlines", "markdown", "html")),
    ("hosts failed", r"[\d,]+ hosts? failed: ", ("no_gpu_host", "postcheck", "mixed"), ("unreachable", "audit", "verified"),
     ("headlines", "markdown", "html")),
    ("gate: could not be verified", r"the run fails for .*could not be verified", ("unreachable", "mixed"),
     ("no_gpu_host", "audit", "postcheck", "verified"), ("terminal",)),
    ("gate: post-check", r"not COMPUTE_VERIFIED in this post-check", ("postcheck",),
     ("no_gpu_host", "unreachable", "audit", "verified", "mixed"), ("terminal",)),
    ("no health reading", r"No GPU health reading in this report", ("no_gpu_host", "unreachable"),
     ("audit", "postcheck", "verified", "mixed"), ("markdown", "html")),
    ("no health finding", r"No (GPU )?health finding on the [\d,]+ GPUs? whose health was read", ("audit", "postcheck", "verified"),
     ("no_gpu_host", "unreachable", "mixed"), ("markdown", "html")),
    ("health finding", r"GPUs? with PCIe replays above DCGM(&#39;|')s limits on 1 host", ("mixed",),
     ("no_gpu_host", "unreachable", "audit", "postcheck", "verified"), ("terminal", "headlines", "markdown", "html")),
    ("dcgm not asked", r"Not asked in this run: host\.health\.dcgm\\?_diag on [\d,]+ hosts?", ("audit", "verified", "mixed"),
     ("unreachable",), ("markdown", "html")),
    ("not exposed", r"(?i)not exposed|does not expose", (), tuple(RUNS), ()),
    ("k8s finding", r"what Kubernetes is told", (), tuple(RUNS), ()),
]


@pytest.mark.parametrize("run", sorted(RUNS))
@pytest.mark.parametrize("name,pattern,present,absent,where", SENTENCES, ids=[s[0] for s in SENTENCES])
def test_every_sentence_is_said_where_it_is_true_and_only_there(run, name, pattern, present, absent, where):
    assert not set(present) & set(absent), name
    said = texts(run)
    if run in present:
        for fmt in where:
            assert re.search(pattern, said[fmt]), (name, run, fmt, said["terminal"] if fmt != "junit" else said[fmt][:900])
    if run in absent:
        for fmt, text in said.items():
            assert not re.search(pattern, text), (name, run, fmt, [l for l in text.splitlines() if re.search(pattern, l)][:3])


def test_the_issue_s_two_runs_in_words():
    """localhost reachable with no driver, and an audit: what the issue saw said of them, and what is said now."""
    local = texts("no_gpu_host")["terminal"].splitlines()
    assert local[1] == "No GPU was seen: 1 host lists no GPU (its host layer ran and found none)"
    assert not any("unknown" in line for line in local)
    assert texts("audit")["terminal"].splitlines()[1] == "0 of 2 GPUs verified in a container; 2 not verified (an audit runs no container)"
    assert gate_line(["gone"], {"unverifiable": {"gone": "host unreachable: x"}, "failing": {"gone": "x"}}) == (
        "the run fails for 1 host: 1 host could not be verified; see the groups above and the report")


def test_drift_is_said_apart_in_the_json_summary():
    _mode, _rv, hosts = RUNS["mixed"]
    s = F.build_report(hosts, "2026-12-04T12:00:00Z")["summary"]
    # gpu-old differs; localhost's driver was not observed (the unreachable host's pins are not drift)
    assert (s["drifted"], s["drift_differs"], s["drift_unknown"]) == (2, 1, 1)


@pytest.mark.parametrize("pins,said,unsaid", [
    ({"no_such_pin": "1"}, "(the pin's name is not one the report knows;", "its layer did not run"),
    ({"runtime_version": "podman 4.3.1"}, "(its layer did not run or did not report it;", "the pin's name"),
])
def test_why_a_pinned_value_was_not_observed_is_said_as_it_is(pins, said, unsaid):
    r = verified()
    r["runtime"] = not_run("runtime", "not run in audit mode")
    report = F.build_report([_host("gpu-a", r, pins=pins)], "2026-12-04T12:00:00Z")
    lines = [line for line in F.summary_lines(report) + V.headlines(report) if "not observed" in line]
    assert len(lines) == 2 and all(said in line and unsaid not in line for line in lines), lines
