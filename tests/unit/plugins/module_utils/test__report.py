"""Fleet report aggregation and rendering (plugins/plugin_utils/_report/: model, fleet, states, gpus, health, crosscheck,
diff, jsonfile), on records built with the
real LayerBuilder / not_run of the result contract."""
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from accounted import accounted
from pagedata import checks, detail, page_data, rows

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model as R
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import compact as C
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import crosscheck as K
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import diff as D
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import jsonfile as J
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import sentences as SN
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import states as ST
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import render as V
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, LAYERS, NOT_RUN, PASS, WARN, LayerBuilder, make_check, not_run, validate_record,
)


def rec(layer, status, check_id=None, signature=None, points_to=None, evidence=None, versions=None,
        subject="/dev/nvidia0", expected="char 195:0", observed="char 195:0"):
    b = LayerBuilder(layer)
    b.add(check_id or "%s.sample" % layer, status, subject=subject, expected=expected, observed=observed,
          hint="look here" if status in (FAIL, WARN) else None)
    if layer == "runtime" and status == PASS:  # the probe file looked at again after the run (issue 42)
        b.add("runtime.probe.unchanged", PASS, subject="gpuprobe-t", observed="unchanged")
    b.evidence = dict(evidence or {})
    b.versions = dict(versions or {})
    return b.build(signature=signature, points_to=points_to)


NO_MIG = {"total": 0, "verified": 0, "failed": 0, "not_run": 0}


def bound(record, driver="580.159.04", api=13000):
    """A compute record with the driver binding a verified compute record carries (issue 18 item 1): the check and
    the evidence it stands on, computed against a host of ``driver`` / CUDA ``api``."""
    record["checks"].append(make_check("compute.driver.binding", PASS, "container", "the host's driver",
                                       "cuDriverGetVersion 13000 = NVML; libcuda sha256 = the driver root's"))
    lib = {"sha256": "a" * 64}
    name = "libcuda.so.%s" % driver
    record["evidence"]["driver_binding"] = {
        "host": {"driver_version": driver, "cuda_driver_api": api, "libcuda": lib, "libraries": {name: dict(lib, name=name)}},
        "runs": [{"where": "container", "status": PASS, "cuda_driver_api": api, "libcuda": lib,
                  "libraries": [{"path": "/usr/lib/libcuda.so.1", "host_name": name, "sha256": lib["sha256"], "status": PASS}]}]}
    return record


GPU_ROW = {"index": 0, "uuid": "GPU-6b1d2c3e-0000-4000-8000-000000000000", "model": "NVIDIA H200", "expected": True,
           "seen_in_container": True, "ordinal": 0, "status": PASS, "signature": None, "reason": None}


def healthy(driver="580.159.04", api="13000", runtime="podman 4.3.1", digest="sha256:aa"):
    return {
        # the host layer lists the GPU the compute row proves (a GPU it does not list is never verified: issue 43.3)
        "host": rec("host", PASS, versions={"driver": driver, "cuda_driver_api": api},
                    evidence={"nvml": {"driver_version": driver, "cuda_driver_version_int": int(api)},
                              "gpus": [{"index": GPU_ROW["index"], "uuid": GPU_ROW["uuid"], "name": GPU_ROW["model"]}]}),
        # every edit of the requested device accounted for (cdi.trust.accounted PASS, as the layer writes it)
        "cdi": accounted(rec("cdi", PASS, evidence={"spec_digest": digest})),
        # an edit compared (runtime PASS needs one) and a proven per-GPU row (COMPUTE_VERIFIED needs them)
        "runtime": rec("runtime", PASS, "runtime.device_node.present", versions={"runtime": runtime}),
        "compute": bound(rec("compute", PASS, evidence={"container": {"executed": True, "cdi_devices": ["nvidia.com/gpu=0"]},
                                                        "gpus": [GPU_ROW]}), driver, int(api)),
    }


def no_gpu():
    return {
        "host": rec("host", FAIL, "host.nvml.init", observed="NVMLError_LibraryNotFound"),
        "cdi": rec("cdi", FAIL, "cdi.spec.found", observed="no spec"),
        "runtime": not_run("runtime", "blocked by host FAIL"),
        "compute": not_run("compute", "blocked by host FAIL"),
        "k8s": not_run("k8s", "no kubeconfig"),
    }


def jit_missing():
    r = healthy()
    r["compute"] = rec("compute", FAIL, "compute.cuda.module_load",
                       signature="compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", points_to="runtime",
                       evidence={"container": {"executed": True, "cdi_devices": ["gpuprobe.local/gpu=0"]}})
    return r


@pytest.fixture
def report():
    hosts = [
        {"name": "gpu-ok", "records": healthy(), "pins": {"driver_version": "580.159.04"}},
        {"name": "gpu-jit", "records": jit_missing(), "pins": {"driver_version": "580.159.04"}},
        {"name": "cpu-only", "records": no_gpu(), "pins": {"driver_version": "580.159.04"}},
        {"name": "old-driver", "records": healthy(driver="570.1"), "pins": {"driver_version": "580.159.04"}},
        {"name": "gone", "records": None, "unreachable": "ssh: connect to host gone port 22: No route"},
        {"name": "crashed", "records": {"host": rec("host", PASS)}, "error": "cdi_facts: MODULE FAILURE"},
    ]
    return F.build_report(hosts, "2026-12-02T18:30:00Z", run={"mode": "full", "cdi_source": "node"})


def test_every_host_has_every_layer_as_a_valid_record(report):
    assert sorted(report["hosts"]) == ["cpu-only", "crashed", "gone", "gpu-jit", "gpu-ok", "old-driver"]
    for entry in report["hosts"].values():
        assert list(entry["layers"]) == list(LAYERS)
        for record in entry["layers"].values():
            assert validate_record(record) == []


@pytest.mark.parametrize("host,verdict,signature,points_to", [
    ("gpu-ok", "COMPUTE_VERIFIED", None, None),
    ("old-driver", "COMPUTE_VERIFIED", None, None),
    ("gpu-jit", "FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "runtime"),
    ("cpu-only", "FAILED_AT_HOST", "host.nvml.init", "host"),
    ("gone", "INCONCLUSIVE", None, None),
    ("crashed", "INCONCLUSIVE", None, None),
])
def test_verdicts_come_from_node_verdict(report, host, verdict, signature, points_to):
    entry = report["hosts"][host]
    assert (entry["verdict"], entry["signature"], entry["points_to"]) == (verdict, signature, points_to)


def test_unreachable_and_crashed_hosts_are_not_run_with_reason_never_missing_never_pass(report):
    gone = report["hosts"]["gone"]
    assert gone["reachable"] is False
    # issue 22.4: the host's message is said once (unverifiable), not again by each of its five NOT_RUN layers
    for record in gone["layers"].values():
        assert record["status"] == NOT_RUN
        assert record["reason"] == ST.UNREACHABLE_REASON
    assert gone["unverifiable"] == "host unreachable: ssh: connect to host gone port 22: No route"
    assert (gone["state"], gone["cause"], gone["drift"]) == (ST.UNREACHABLE, "no route to host", [])
    crashed = report["hosts"]["crashed"]
    assert crashed["layers"]["host"]["status"] == PASS
    assert crashed["layers"]["cdi"]["status"] == NOT_RUN
    assert crashed["layers"]["cdi"]["reason"] == ST.RUN_FAILED_REASON
    assert crashed["unverifiable"] == "verify run failed: cdi_facts: MODULE FAILURE"
    assert (crashed["state"], crashed["cause"]) == (ST.RUN_FAILED, "a node-side module failed (MODULE FAILURE)")
    assert "cdi: verify run failed before this layer" in crashed["reason"]


def test_counts(report):
    c = report["counts"]
    assert c["by_verdict"] == {"COMPUTE_VERIFIED": 2, "FAILED_AT_COMPUTE": 1, "FAILED_AT_HOST": 1, "INCONCLUSIVE": 2}
    assert c["by_failing_layer"] == {"compute": 1, "host": 1}
    assert c["by_signature"] == {"compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND": 1, "host.nvml.init": 1}
    assert c["by_layer_status"]["host"] == {"FAIL": 1, "NOT_RUN": 1, "PASS": 4}
    assert report["summary"] == {"hosts": 6, "compute_verified": 2, "failed": 2, "inconclusive": 2,
                                 "unreachable": 1, "run_failed": 1, "unverifiable": 2, "drifted": 2, "k8s_findings": 0,
                                 "drift_differs": 1, "drift_unknown": 1,
                                 "gpus": {"total": 3, "verified": 2, "failed": 0, "not_run": 1, "hosts_with_failed_gpu": 0,
                                          "hosts_with_unknown_gpus": 3, "unknown_gpus_why": {"not_listed": 1, "run_failed": 1,
                                                                                             "unreachable": 1},
                                          "hosts_without_gpus": 0, "mig_gpus": 0, "mig_instances": NO_MIG}}


def test_drift_lists_differing_and_unobservable_pins(report):
    assert [(d["host"], d["key"], d["expected"], d["observed"], d["state"]) for d in report["drift"]] == [
        ("cpu-only", "driver_version", "580.159.04", None, "unknown"),
        ("old-driver", "driver_version", "580.159.04", "570.1", "differs"),
    ]


@pytest.mark.parametrize("pins,expected", [
    ({}, []),
    ({"driver_version": "580.159.04", "cuda_driver_api": 13000}, []),
    ({"cuda_driver_api": "12080"}, [("cuda_driver_api", "differs", "13000")]),
    ({"runtime_version": "podman 5.0"}, [("runtime_version", "differs", "podman 4.3.1")]),
    ({"cdi_spec_digest": "sha256:bb"}, [("cdi_spec_digest", "differs", "sha256:aa")]),
    ({"cdi_spec_digest": ""}, []),
    ({"kernel": "6.1"}, [("kernel", "unknown", None)]),
])
def test_host_drift(pins, expected):
    layers = R.host_layers(healthy())
    assert [(d["key"], d["state"], d["observed"]) for d in R.host_drift(layers, pins)] == expected


def test_json_roundtrip_and_schema_version(report):
    text = J.render_json(report)
    data = json.loads(text)
    # every record is in it: a verified host is written against the shape of its kind, and the reader gives it back
    verified = [name for name, e in report["hosts"].items() if e["state"] == "COMPUTE_VERIFIED"]
    assert verified and all(C.is_compact(data["hosts"][name]) for name in verified)
    assert C.expand(data) == json.loads(json.dumps(dict((k, v) for k, v in report.items() if k != "shapes")))
    # one host per line (grep finds a host's line): the line of gpu-jit is its entry, written against its failure's shape
    line = [x for x in text.splitlines() if x.startswith('  "gpu-jit": ')][0]
    assert json.loads("{%s}" % line.rstrip(",")) == {"gpu-jit": data["hosts"]["gpu-jit"]}
    assert data["schema_version"] == R.SCHEMA_VERSION == 4
    assert C.restore(data, data["hosts"]["gpu-jit"])["layers"]["compute"]["checks"][0]["id"] == "compute.cuda.module_load"


def test_markdown_has_table_counts_drift_and_the_page_every_check(report):
    """The Markdown is a summary (the hosts not verified, counts, drift by pin value); the page shows the checks of each
    host not verified, and the JSON every check of every host."""
    md = V.render_markdown(report)
    assert "| gpu-jit | **FAILED_AT_COMPUTE** | PASS | PASS | PASS | FAIL | NOT_RUN |" in md
    hosts_table = md.split("\n## Hosts\n", 1)[1].split("\n## ", 1)[0]
    assert "| gpu-ok |" not in hosts_table and "| old-driver |" not in hosts_table     # verified: in the JSON
    assert "| FAILED\\_AT\\_HOST | 1 |" in md
    assert "| driver\\_version | 580.159.04 | 570.1 | differs: host layer | 1 |  | old-driver |" in md
    assert "host unreachable: ssh: connect to host gone port 22: No route" in md
    data = page_data(V.render_html(report))
    assert [c[:2] for c in checks(detail(data, "gpu-jit"), "compute")] == [["compute.cuda.module_load", "FAIL"]]
    assert detail(data, "gpu-ok") is None and detail(data, "old-driver") is None
    full = C.expand(json.loads(J.render_json(report)))["hosts"]
    assert [c["id"] for c in full["gpu-ok"]["layers"]["compute"]["checks"]] == [c["id"] for c in report["hosts"]["gpu-ok"]["layers"]["compute"]["checks"]]


def test_markdown_escapes_pipes_and_html():
    r = F.build_report([{"name": "n|1", "records": {"host": rec("host", FAIL, observed="<b>x|y</b>")}}], "t")
    md = V.render_markdown(r)
    assert "n\\|1" in md and "\\<b\\>x\\|y\\</b\\>" in md and "<b>" not in md


class _Collect(HTMLParser):
    def __init__(self):
        HTMLParser.__init__(self)
        self.tags = []
        self.text = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_html_is_self_contained_escaped_and_has_chart(report):
    report["hosts"]["gpu-jit"]["layers"]["compute"]["checks"][0]["observed"] = "<script>alert(1)</script>"
    page = V.render_html(report)
    parser = _Collect()
    parser.feed(page)
    # issue 22.5: one inline script (the hosts table's filter), never an external one
    assert parser.tags.count("script") == 1 and "<script src" not in page and "<script>alert" not in page
    assert not any(t in parser.tags for t in ("link", "img", "iframe"))
    assert "src=" not in page and "href=\"http" not in page
    # in the page's data, "<" is \\u003c: the value cannot end the script; the script sets it as text
    assert "\\u003cscript\\u003ealert(1)\\u003c/script\\u003e" in page
    assert checks(detail(page_data(page), "gpu-jit"), "compute")[0][4] == "<script>alert(1)</script>"
    assert parser.tags.count("svg") == 1 and parser.tags.count("rect") == 2
    text = "".join(parser.text)
    assert "hosts by failing layer" in text
    # the hosts table's rows, failures first: cpu-only (failed at host) first, the verified last
    table = rows(page_data(page))
    assert [r["name"] for r in table] == ["cpu-only", "gpu-jit", "gone", "crashed", "gpu-ok", "old-driver"]
    assert table[1]["statuses"] == ["PASS", "PASS", "PASS", "FAIL", "NOT_RUN"]


def test_svg_chart_scales_bars():
    svg = V.svg_bar_chart({"host": 4, "cdi": 2}, "t")
    assert svg.count("<rect") == 2
    assert 'width="270"' in svg and 'width="135"' in svg


def test_junit_suite_per_host_case_per_layer(report):
    root = ET.fromstring(V.render_junit(report))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == list(report["hosts"])
    # a testcase per layer, and one more (connect / verify run) for each of the two nodes that could not be verified
    assert root.get("tests") == str(6 * len(LAYERS) + 2)
    jit = [s for s in suites if s.get("name") == "gpu-jit"][0]
    assert [c.get("name") for c in jit.findall("testcase")] == list(LAYERS)
    failure = jit.find("testcase[@name='compute']/failure")
    assert failure.get("type") == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
    assert (jit.get("failures"), jit.get("skipped")) == ("1", "1")
    # issue 22.4: unreachable is a state of its own, and its error is said once: one <error> of its own type on a
    # testcase "connect", the layers that could not run skipped (the suite still has an error: CI never goes green)
    gone = [s for s in suites if s.get("name") == "gone"][0]
    errors = gone.findall("testcase/error")
    assert [c.get("name") for c in gone.findall("testcase")] == ["connect"] + list(LAYERS)
    assert len(errors) == 1 and errors[0].get("type") == "gpuprobe.unreachable"
    assert errors[0].get("message") == "unreachable: no route to host"
    assert errors[0].text == "host unreachable: ssh: connect to host gone port 22: No route"
    assert (gone.get("errors"), gone.get("skipped")) == ("1", str(len(LAYERS)))
    # "crashed" stopped after its host layer: that layer keeps its PASS, one "verify run" error, the others skipped
    crashed = [s for s in suites if s.get("name") == "crashed"][0]
    assert crashed.find("testcase[@name='host']").findall("*") == [] and crashed.get("errors") == "1"
    assert crashed.find("testcase[@name='verify run']/error").get("type") == "gpuprobe.run_failed"
    assert root.get("errors") == "2"

    props = dict((p.get("name"), p.get("value")) for p in jit.find("properties"))
    assert props["verdict"] == "FAILED_AT_COMPUTE" and props["state"] == "FAILED_AT_COMPUTE"
    assert dict((p.get("name"), p.get("value")) for p in gone.find("properties"))["state"] == "UNREACHABLE"


def test_none_is_never_rendered_as_python_none():
    host = rec("host", PASS, "host.sample", versions={"driver": None, "nvml": "12.5"})
    host["checks"][0].update(expected=None, observed={"minor": None, "paths": ["/dev/nvidia0", None]})
    report = F.build_report([{"name": "n", "records": {"host": host}}], "2026-12-02T18:30:00Z", run={"mode": None})
    html_text, md_text, junit = V.render_html(report), V.render_markdown(report), V.render_junit(report)
    for text in (html_text, md_text, junit):
        assert "None" not in text
    doc = detail(page_data(html_text), "n")
    assert doc["layers"][0]["versions"] == "driver=unknown, nvml=12.5"
    assert checks(doc, "host")[0][3:5] == ["", '{"minor": null, "paths": ["/dev/nvidia0", null]}']


def test_summary_lines(report):
    # issue 22.4: the end-of-run summary is one line per group of hosts (state, count, cause), not per host
    lines = F.summary_lines(report)
    assert lines[0] == "6 hosts: 1 failed at host, 1 failed at compute, 1 unreachable, 1 run failed, 2 verified"
    assert lines[1] == ("2 of 3 GPUs verified in a container; 1 not verified (busy, or compute did not reach them); the GPUs "
                        "of 3 hosts are unknown and not counted (1 not reached, 1 whose run failed, 1 whose host layer did "
                        "not list them)")
    assert "  1 host UNREACHABLE: no route to host (e.g. gone)" in lines
    assert "  1 host FAILED_AT_COMPUTE: compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND -> runtime (e.g. gpu-jit)" in lines
    assert lines[-2:] == ["  1 host differs from its pins: driver_version on 1 host",
                          "  1 host has a pinned value that was not observed (its layer did not run or did not report it; "
                          "not counted as differing): driver_version on 1 host"]
    assert not [line for line in lines if "gpu-ok" in line]


def _gpu_node(n, fail=(), busy=()):
    """Records of an n-GPU node: the host inventory lists n GPUs, the compute rows say how each one did."""
    uuids = ["GPU-%08d-0000-4000-8000-000000000000" % i for i in range(n)]
    rows = []
    for i, u in enumerate(uuids):
        status = FAIL if i in fail else NOT_RUN if i in busy else PASS
        rows.append(dict(GPU_ROW, index=i, uuid=u, ordinal=None if i in busy else i, status=status,
                         seen_in_container=i not in busy,
                         signature="compute.verify.mismatch" if i in fail else None,
                         reason="wrong values" if i in fail else "GPU in use, not preempting: pid 7" if i in busy else None))
    r = healthy()
    r["host"] = rec("host", PASS, evidence={"gpus": [{"index": i, "uuid": u} for i, u in enumerate(uuids)]},
                    versions={"driver": "580.159.04"})
    status = FAIL if fail else PASS
    r["compute"] = bound(rec("compute", status, "compute.kernel.verify", signature="compute.verify.mismatch" if fail else None,
                             evidence={"container": {"executed": True, "cdi_devices": ["nvidia.com/gpu=all"]}, "gpus": rows}))
    return r


def test_the_fleet_is_counted_in_gpus_as_well_as_nodes():
    hosts = [{"name": "n8-one-bad", "records": _gpu_node(8, fail=(3,))},
             {"name": "n8-busy", "records": _gpu_node(8, busy=(5,))},
             {"name": "n4-ok", "records": _gpu_node(4)},
             {"name": "cpu-only", "records": no_gpu()}]
    report = F.build_report(hosts, "2026-12-02T18:30:00Z", run={"mode": "full"})
    assert report["summary"]["gpus"] == {"total": 20, "verified": 18, "failed": 1, "not_run": 1, "hosts_with_failed_gpu": 1,
                                         "hosts_with_unknown_gpus": 1, "unknown_gpus_why": {"not_listed": 1}, "hosts_without_gpus": 0,
                                         "mig_gpus": 0, "mig_instances": NO_MIG}
    assert report["hosts"]["n8-one-bad"]["verdict"] == "FAILED_AT_COMPUTE"
    assert report["hosts"]["n8-busy"]["verdict"] == "INCONCLUSIVE" and "GPU 5" in report["hosts"]["n8-busy"]["reason"]
    want = ("18 of 20 GPUs verified in a container; 1 failed (on 1 host); 1 not verified (busy, or compute did not reach "
            "them); the GPUs of 1 host are unknown and not counted (1 whose host layer did not list them)")
    assert F.summary_lines(report)[1] == want
    md, page = V.render_markdown(report), V.render_html(report)
    assert "18 of 20 GPUs verified" in md and "18 of 20 GPUs verified" in page
    assert [0, "3", "GPU-00000003-0000-4000-8000-000000000000", "NVIDIA H200", "true", "FAIL"] in [
        g[:6] for g in detail(page_data(page), "n8-one-bad")["gpus"]]


def test_diff_reports(report):
    hosts = [
        {"name": "gpu-ok", "records": jit_missing()},
        {"name": "gpu-jit", "records": jit_missing()},
        {"name": "new-node", "records": healthy()},
    ]
    newer = F.build_report(hosts, "2026-12-03T00:00:00Z")
    older = json.loads(J.render_json(report))
    diff = D.diff_reports(older, newer)
    assert diff["added"] == ["new-node"]
    assert diff["removed"] == ["cpu-only", "crashed", "gone", "old-driver"]
    assert diff["unchanged"] == 1
    assert diff["verdicts"] == {"COMPUTE_VERIFIED -> FAILED_AT_COMPUTE": 1}
    fields = dict((f["field"], (f["old"], f["new"])) for f in diff["changed"]["gpu-ok"])
    assert fields["verdict"] == ("COMPUTE_VERIFIED", "FAILED_AT_COMPUTE")
    assert fields["layers.compute.status"] == ("PASS", "FAIL")
    md = V.render_diff_markdown(diff)
    assert "| gpu-ok | verdict | COMPUTE\\_VERIFIED | FAILED\\_AT\\_COMPUTE |" in md


def test_diff_of_identical_reports_is_empty(report):
    diff = D.diff_reports(report, report)
    assert diff["changed"] == {} and diff["added"] == [] and diff["removed"] == []
    assert diff["unchanged"] == 6
    assert "No host changed." in V.render_diff_markdown(diff)


@pytest.mark.parametrize("old_run,new_run,differ", [
    # issue 22.9: comparing an audit with a full run listed runtime/compute changes as if the nodes had changed
    ({"mode": "audit", "cdi_source": "node"}, {"mode": "full", "cdi_source": "node"}, [("mode", "audit", "full")]),
    ({"mode": "full", "cdi_source": "node"}, {"mode": "postcheck", "cdi_source": "self-built"},
     [("mode", "full", "postcheck"), ("cdi_source", "node", "self-built")]),
    ({"mode": "full", "hosts_pattern": "all"}, {"mode": "full", "hosts_pattern": "canary"}, [("hosts_pattern", "all", "canary")]),
    ({}, {"mode": "audit"}, [("mode", None, "audit")]),
    ({"mode": "full", "cdi_source": "node", "ansible_version": "2.18"}, {"mode": "full", "cdi_source": "node", "ansible_version": "2.19"}, []),
])
def test_diff_says_when_the_runs_were_not_made_the_same_way(old_run, new_run, differ):
    hosts = [{"name": "gpu-ok", "records": healthy()}]
    old = json.loads(J.render_json(F.build_report(hosts, "2026-12-01T00:00:00Z", run=old_run)))
    diff = D.diff_reports(old, F.build_report(hosts, "2026-12-02T00:00:00Z", run=new_run))
    assert [(f["field"], f["old"], f["new"]) for f in diff["runs_differ"]] == differ
    md = V.render_diff_markdown(diff)
    said = "the two runs were not made the same way" in md
    assert said == bool(differ), md
    for field, before, after in differ:
        assert "%s %s in the old report, %s in the new" % (V._md(field), V._md(before), V._md(after)) in md


@pytest.mark.parametrize("prediction,records,match,observed_layer", [
    ({"predicted_layer": "compute", "predicted_signature": "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
     jit_missing(), True, "compute"),
    ({"predicted_layer": "runtime", "predicted_signature": None}, jit_missing(), False, "compute"),
    ({"predicted_layer": "compute", "predicted_signature": "compute.cuda.CUDA_ERROR_UNKNOWN"},
     jit_missing(), False, "compute"),
    ({"predicted_layer": None, "predicted_signature": None}, healthy(), True, None),
    ({"predicted_layer": None, "predicted_signature": None}, no_gpu(), False, "host"),
    ({"layer": "host", "signature": "host.nvml.init", "description": "cdi_spec's own keys"}, no_gpu(), True, "host"),
    ({"layer": None, "signature": None}, healthy(), True, None),
])
def test_drill_row(prediction, records, match, observed_layer):
    row = R.drill_row("no_ptxjit_mount", prediction, records, host="n1")
    assert row["match"] is match
    assert row["observed_layer"] == observed_layer


def test_drill_row_without_prediction_never_matches():
    row = R.drill_row("full", {}, {"cdi": not_run("cdi", "drill did not run: no GPU device node")}, host="n1")
    assert row["predicted"] is False and row["match"] is False
    md = V.render_drills_markdown([row])
    assert "| n1 | full | no prediction (the drill did not run) |" in md


def test_report_with_drills_renders_table():
    row = R.drill_row("no_uvm_node", {"predicted_layer": "compute", "predicted_signature": "x"}, no_gpu(), host="n1")
    r = F.build_report([{"name": "n1", "records": no_gpu()}], "t", drills=[row])
    assert r["summary"]["drills"] == 1 and r["summary"]["drills_matched"] == 0
    md = V.render_markdown(r)
    assert "| n1 | no\\_uvm\\_node | compute | x | FAILED\\_AT\\_HOST | host.nvml.init | **no** |" in md
    assert "no_uvm_node" in V.render_html(r)


# ---------------------------------------------------------------------------------------------------
# k8s cross-check with the node verdicts (k8s records from _k8s.analyse on the kubectl fixtures)

def _k8s_record(labels=None):
    import os  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import layer as _k8s  # pylint: disable=import-outside-toplevel
    fixtures = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "k8s")
    docs = {}
    for name in ("nodes", "pods", "events"):
        with open(os.path.join(fixtures, name + ".json")) as f:
            docs[name] = json.load(f)
    for node in docs["nodes"]["items"]:
        node["metadata"]["labels"].update((labels or {}).get(node["metadata"]["name"], {}))
    return _k8s.analyse(docs["nodes"], docs["pods"], docs["events"], ["nvidia.com/gpu"])


@pytest.fixture
def k8s_report():
    # gpu-a.example.org is Node gpu-a by its kubernetes.io/hostname label (exactly; never by the short name)
    k8s = _k8s_record({"gpu-c": {"nvidia.com/cuda.driver-version.full": "570.124.06"},
                       "gpu-a": {"kubernetes.io/hostname": "gpu-a.example.org"}})
    hosts = []
    for name, records in (("gpu-a.example.org", no_gpu()), ("gpu-b", healthy()), ("gpu-c", healthy()),
                          ("cpu-d", healthy()), ("elsewhere", healthy())):
        records = dict(records, k8s=k8s)
        hosts.append({"name": name, "records": records})
    return F.build_report(hosts, "2026-12-02T18:30:00Z")


def test_k8s_crosscheck_findings(k8s_report):
    found = dict(((f["host"], f["finding"]), f) for f in k8s_report["k8s_crosscheck"])
    assert sorted(found) == [("cpu-d", "nothing_advertised"), ("gpu-a.example.org", "allocatable_on_unverified_node"),
                             ("gpu-b", "nothing_advertised"), ("gpu-c", "stale_driver_label")]
    a = found[("gpu-a.example.org", "allocatable_on_unverified_node")]
    assert (a["k8s_node"], a["severity"]) == ("gpu-a", FAIL)
    assert a["message"] == "the scheduler will place GPU Pods here, on a node that cannot compute"
    assert a["observed"] == "allocatable nvidia.com/gpu=8; verdict FAILED_AT_HOST"
    assert found[("gpu-b", "nothing_advertised")]["message"].startswith(
        "neither the device plugin nor the DRA driver advertises a GPU")
    assert found[("gpu-c", "stale_driver_label")]["observed"] == "feature label driver 570.124.06, host driver 580.159.04"
    assert k8s_report["summary"]["k8s_findings"] == 4


def test_k8s_crosscheck_is_rendered(k8s_report):
    md = V.render_markdown(k8s_report)
    assert "## Kubernetes vs node verdicts" in md
    assert "| gpu-c | gpu-c | stale\\_driver\\_label | WARN |" in md
    page = V.render_html(k8s_report)
    assert "<h2>Kubernetes vs node verdicts</h2>" in page and "allocatable_on_unverified_node" in page


def test_k8s_crosscheck_a_verified_dra_node_is_advertised_and_a_failed_dra_gpu_is_named():
    """A node on the DRA path has no nvidia.com/gpu in allocatable: its slice devices are what it advertises (no
    nothing_advertised), and a slice device whose GPU failed compute is named by UUID."""
    uuid = "GPU-14a33659-ffa3-a123-467d-a46dda49789c"
    node = {"name": "gpu-a", "allocatable": {}, "path": "dra",
            "dra": {"devices": [{"name": "gpu-0", "type": "gpu", "uuid": uuid}]}}
    k8s = {"layer": "k8s", "status": PASS, "checks": [], "evidence": {"nodes": [node]}}
    assert K.k8s_crosscheck({"gpu-a": "COMPUTE_VERIFIED"}, [k8s]) == []
    failed = {"verdict": "FAILED_AT_COMPUTE", "gpus": [{"uuid": uuid, "status": FAIL}]}
    findings = K.k8s_crosscheck({"gpu-a": failed}, [k8s])
    assert [(f["finding"], f["severity"]) for f in findings] == [("dra_device_compute_failed", FAIL)]
    assert uuid in findings[0]["observed"] or uuid in findings[0]["message"]


def test_k8s_crosscheck_unverified_node_is_a_warning_and_not_run_k8s_says_nothing():
    k8s = _k8s_record()
    findings = K.k8s_crosscheck({"gpu-a": "INCONCLUSIVE"}, [k8s])
    assert [(f["finding"], f["severity"]) for f in findings] == [("allocatable_on_unverified_node", WARN)]
    assert K.k8s_crosscheck({"gpu-a": "INCONCLUSIVE"}, [not_run("k8s", "no kubeconfig")]) == []


@pytest.mark.parametrize("labels,version", [
    ({"nvidia.com/cuda.driver-version.full": "580.159.04"}, "580.159.04"),
    ({"nvidia.com/cuda.driver.major": "580", "nvidia.com/cuda.driver.minor": "159", "nvidia.com/cuda.driver.rev": "04"},
     "580.159.04"),
    ({"nvidia.com/cuda.driver.major": "580"}, None),
    ({}, None),
])
def test_label_driver_version(labels, version):
    assert K.label_driver_version(labels) == version


def test_because_is_rendered_for_a_spec_attributed_failure():
    entry_report = F.build_report([{"name": "n", "records": jit_missing()}], "t")
    entry = entry_report["hosts"]["n"]
    assert entry["because"] == [] and entry["state"] == "FAILED_AT_COMPUTE"
    entry["because"] = [{"check": "cdi.nvidia.nvidiactl", "status": WARN, "subject": "/dev/nvidiactl",
                         "observed": "absent", "hint": None}]
    assert detail(page_data(V.render_html(entry_report)), "n")["because"] == ["cdi.nvidia.nvidiactl /dev/nvidiactl: absent (WARN)"]
    props = ET.fromstring(V.render_junit(entry_report).split("\n", 1)[1]).find("testsuite/properties")
    assert {p.get("name"): p.get("value") for p in props}["because"] == "cdi.nvidia.nvidiactl /dev/nvidiactl: absent"


# ---------------------------------------------------------------------------------------------------
# MIG: instance rows sit under their physical GPU, and the GPU counts count physical GPUs

P0, P1 = "GPU-6b1d2c3e-0000-4000-8000-000000000000", "GPU-6b1d2c3e-0000-4000-8000-000000000001"


def _mig(gpu, gi):
    return "MIG-6b1d2c3e-%04d-%04d-0000-000000000000" % (gpu, gi)


def _inst_row(gpu, gi, status=PASS, expected=True, uuid=None, reason=None):
    return dict(GPU_ROW, index=gpu if expected else None, uuid=uuid or _mig(gpu, gi), model="NVIDIA H200 MIG 1g.18gb",
                expected=expected, status=status, ordinal=gi, signature="compute.verify.mismatch" if status == FAIL else None,
                reason=reason or ({FAIL: "wrong values", NOT_RUN: "GPU in use, not preempting: pid 7"}.get(status)
                                  if expected else "the container sees a GPU it did not ask for (kernel PASS)"))


def _mig_node(rows, inventory=None, identity=True):
    """A node whose GPU 0 (and 1) has MIG instances gi 1..3, and whose compute rows are ``rows``."""
    inventory = inventory if inventory is not None else {0: [1, 2, 3], 1: []}
    gpus = [{"index": i, "uuid": (P0, P1)[i], "name": "NVIDIA H200",
             "mig": {"mode_current": "enabled" if gis else "disabled", "instances": [{"uuid": _mig(i, g)} for g in gis]}}
            for i, gis in sorted(inventory.items())]
    expected = [{"uuid": (P0, P1)[r["index"]], "index": r["index"], "mig_uuid": r["uuid"] if r["uuid"].startswith("MIG-") else None}
                for r in rows if r["expected"]] if identity else []
    r = healthy()
    r["host"] = rec("host", PASS, evidence={"gpus": gpus}, versions={"driver": "580.159.04"})
    r["cdi"] = rec("cdi", PASS, evidence={"spec_digest": "sha256:aa", "identity": {"expected_gpus": expected}})
    status = FAIL if any(x["status"] == FAIL for x in rows) else PASS
    r["compute"] = rec("compute", status, "compute.kernel.verify", signature="compute.verify.mismatch" if status == FAIL else None,
                       evidence={"container": {"executed": True, "cdi_devices": ["nvidia.com/mig=all"]}, "gpus": rows})
    return r


def _counts(summary):
    g = summary["gpus"]
    return (g["total"], g["verified"], g["failed"], g["not_run"]), (
        g["mig_instances"]["total"], g["mig_instances"]["verified"], g["mig_instances"]["failed"], g["mig_instances"]["not_run"])


@pytest.mark.parametrize("rows,inventory,identity,gpus,instances,parent_status", [
    # both requested instances passed: 1 GPU verified (was "2 of 3 GPUs verified")
    ([_inst_row(0, 1), _inst_row(0, 2)], {0: [1, 2]}, True, (1, 1, 0, 0), (2, 2, 0, 0), PASS),
    # one of two failed: the GPU failed
    ([_inst_row(0, 1), _inst_row(0, 2, FAIL)], {0: [1, 2]}, True, (1, 0, 1, 0), (2, 1, 1, 0), FAIL),
    # one busy: the GPU is not verified
    ([_inst_row(0, 1), _inst_row(0, 2, NOT_RUN)], {0: [1, 2]}, True, (1, 0, 0, 1), (2, 1, 0, 1), NOT_RUN),
    # one of three instances requested, and it passed: the GPU is verified (the others were not asked for)
    ([_inst_row(0, 1)], {0: [1, 2, 3]}, True, (1, 1, 0, 0), (1, 1, 0, 0), PASS),
    # a MIG GPU beside a GPU without MIG
    ([_inst_row(0, 1), _inst_row(0, 3), dict(GPU_ROW, index=1, uuid=P1)], {0: [1, 3], 1: []}, True, (2, 2, 0, 0), (2, 2, 0, 0), PASS),
    # the host inventory lists the GPU but no instance (host layer without NVML: procfs lists GPUs, not MIG instances): the
    # parent comes from the cdi identity
    ([_inst_row(0, 1), _inst_row(0, 2)], {0: []}, True, (1, 1, 0, 0), (2, 2, 0, 0), PASS),
    # an instance the container saw but did not ask for (its UUID as the probe prints it): under its GPU, not requested
    ([_inst_row(0, 1), _inst_row(0, 2, expected=False, uuid="GPU-" + _mig(0, 2)[4:])], {0: [1, 2]}, True,
     (1, 1, 0, 0), (1, 1, 0, 0), PASS),
])
def test_mig_instances_are_counted_under_their_physical_gpu(rows, inventory, identity, gpus, instances, parent_status):
    report = F.build_report([{"name": "n", "records": _mig_node(rows, inventory, identity)}], "t")
    assert _counts(report["summary"]) == (gpus, instances)
    entry = report["hosts"]["n"]
    parent = [g for g in entry["gpus"] if g["mig"]]
    assert len(parent) == 1 and parent[0]["uuid"] == P0 and parent[0]["index"] == 0
    assert parent[0]["status"] == parent_status
    assert [i["uuid"] for i in parent[0]["instances"]] == [r["uuid"] for r in rows if r["uuid"] != P1]
    assert not [g for g in entry["gpus"] if g["uuid"] and g["uuid"].upper().startswith("MIG-")]   # no instance at GPU level
    line = F.summary_lines(report)[1]
    assert line.startswith("%d of %s verified in a container" % (gpus[1], SN.plural(gpus[0], "GPU")))
    assert "MIG: %d of %s verified on 1 GPU" % (instances[1], SN.plural(instances[0], "requested instance")) in line


def test_instances_on_a_gpu_the_host_layer_does_not_list_prove_nothing_of_the_node():
    """issue 43.3: the host layer lists no GPU at all; the instances' parent (from the cdi identity) is not counted."""
    report = F.build_report([{"name": "n", "records": _mig_node([_inst_row(0, 1), _inst_row(0, 2)], {})}], "t")
    assert _counts(report["summary"]) == ((0, 0, 0, 0), (0, 0, 0, 0)) and report["summary"]["gpus"]["unlisted"] == 1
    assert F.summary_lines(report)[1].startswith("No GPU was seen: 1 GPU seen by the probe that no host layer lists (not counted)")


def test_mig_instances_are_listed_under_their_gpu_in_every_format():
    rows = [_inst_row(0, 1), _inst_row(0, 2, FAIL), dict(GPU_ROW, index=1, uuid=P1)]
    report = F.build_report([{"name": "n", "records": _mig_node(rows, {0: [1, 2], 1: []})}], "t")
    data = C.expand(json.loads(J.render_json(report)))
    gpus = data["hosts"]["n"]["gpus"]
    assert [(g["index"], g["uuid"], g["mig"], [i["uuid"] for i in g["instances"]]) for g in gpus] == [
        (0, P0, True, [_mig(0, 1), _mig(0, 2)]), (1, P1, False, [])]
    assert gpus[0]["reason"].startswith("MIG: 1 of 2 requested instance(s) verified; %s: wrong values" % _mig(0, 2))
    # the page's detail: each instance row (depth 1, drawn as a "mig" row) right under its GPU
    assert [(g[0], g[1], g[2], g[5]) for g in detail(page_data(V.render_html(report)), "n")["gpus"]] == [
        (0, "0", P0, "FAIL"), (1, "", "\u21b3 MIG %s" % _mig(0, 1), "PASS"), (1, "", "\u21b3 MIG %s" % _mig(0, 2), "FAIL"),
        (0, "1", P1, "PASS")]
    props = ET.fromstring(V.render_junit(report).split("\n", 1)[1]).find("testsuite/properties")
    names = [p.get("name") for p in props]
    assert names[-4:] == ["gpu 0", "gpu 0 mig %s" % _mig(0, 1), "gpu 0 mig %s" % _mig(0, 2), "gpu 1"]
    values = dict((p.get("name"), p.get("value")) for p in props)
    assert values["gpu 0"].startswith("%s FAIL compute.verify.mismatch: MIG: 1 of 2" % P0)
    assert values["gpu 0 mig %s" % _mig(0, 2)] == "FAIL compute.verify.mismatch: wrong values"


def test_junit_is_valid_xml_whatever_characters_a_node_reported():
    """A control character in any string a node reported (an event message, a slice attribute) would make
    report.xml unreadable: each is a visible escape (issue 43.6; a tab and a newline kept in a text), and every other
    character XML 1.0 forbids is replaced, the rest kept."""
    records = healthy()
    records["k8s"] = rec("k8s", FAIL, "k8s.dra.host_match", observed="advertises GPU GPU-\x1b[2J\x07evil\x00\ufffe")
    records["k8s"]["reason"] = "bad\x01 reason\ttab"
    report = F.build_report([{"name": "n1\x0b", "records": records, "pins": {}}], "2026-12-03T00:00:00Z")
    text = V.render_junit(report)
    root = ET.fromstring(text.split("\n", 1)[1])
    failure = root.find(".//failure")
    assert failure.get("message") == "bad\\x01 reason\\ttab"
    assert "GPU-\\x1b[2J\\aevil\\x00\ufffd" in failure.text
    assert V.xml_safe("a\x1fb\nc\U0001f600") == "a\ufffdb\nc\U0001f600"
