"""The node verdict through one or several runtimes (issue 25 item 2): which runtime a verdict speaks for, the cdi
record as it speaks for each runtime, COMPUTE_VERIFIED only when every runtime asked for proved it. The records are the
verdictlab's (a real spec, the real probe in a mini container); only the engine identity and the per-runtime cdi checks
(what _cdi.engine adds on a node with those engines) are set here."""
import copy

from verdictlab import bind, emitted, full_spec, node, passing_steps  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, make_check, not_run, with_checks
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import (
    COMPUTE_VERIFIED, cdi_for_runtime, node_verdict, record_errors,
)

PODMAN = {"name": "podman", "version": "4.3.1", "path": "/usr/bin/podman", "selected_because": "named in the runtime option",
          "cdi_library": {"library": "v0.5.2", "max_readable": "0.5.0"}}
DOCKER = {"name": "docker", "version": "26.1.5", "path": "/usr/bin/docker", "selected_because": "named in the runtime option"}


def verified(node_, engine):
    cdi = node_.cdi(full_spec())
    runtime, probe = node_.run(cdi, compute=False)
    probe.update(emitted(passing_steps()), compute_requested=True)
    compute = bind(node_.compute(probe, runtime), host=node_.host)
    compute["evidence"]["gpus"] = [{"index": 0, "uuid": "GPU-6b1d2c3e-0000-4000-8000-000000000000", "expected": True,
                                    "seen_in_container": True, "ordinal": 0, "status": PASS, "signature": None, "reason": None}]
    runtime["evidence"]["engine"] = dict(engine)
    return {"host": node_.host, "cdi": cdi, "runtime": runtime, "compute": compute}


def engine_check(name, status, observed):
    check = make_check("cdi.engine.config", status, "%s: k=d" % name, "a spec providing it in a dir the engine reads", observed)
    check["runtime"] = name
    return check


def test_one_runtime_names_the_runtime_it_speaks_for(node):
    records = verified(node, PODMAN)
    v = node_verdict(records)
    assert v["verdict"] == COMPUTE_VERIFIED
    assert v["runtime"]["label"] == "podman 4.3.1 (/usr/bin/podman)" and v["runtime"]["cdi_library"]["library"] == "v0.5.2"
    assert v["runtime"]["selected_because"] == "named in the runtime option"
    assert [(r["runtime"], r["verdict"]) for r in v["runtimes"]] == [("podman", COMPUTE_VERIFIED)]


def test_no_runtime_named_anywhere():
    v = node_verdict({"host": not_run("host", "x")})
    assert v["runtime"] is None and v["runtimes"] == []


def test_every_runtime_proven(node):
    a = verified(node, PODMAN)
    b = verified(node, DOCKER)
    v = node_verdict({"host": a["host"], "cdi": a["cdi"]}, runtimes=[
        {"runtime": "podman", "records": {"runtime": a["runtime"], "compute": a["compute"]}},
        {"runtime": "docker", "records": {"runtime": b["runtime"], "compute": b["compute"]}}])
    assert v["verdict"] == COMPUTE_VERIFIED and v["reason"].startswith("proven through every runtime asked for: podman 4.3.1")
    assert [(r["runtime"], r["verdict"]) for r in v["runtimes"]] == [("podman", COMPUTE_VERIFIED), ("docker", COMPUTE_VERIFIED)]


def test_one_runtime_failing_its_engine_check_is_the_verdict_and_the_other_is_named_proven(node):
    a = verified(node, PODMAN)
    cdi = with_checks(a["cdi"], a["cdi"]["checks"] + [
        engine_check("podman", PASS, "/var/run/cdi/x.yaml; CDI on"),
        engine_check("docker", FAIL, "CDI is off: CDISpecDirs is empty")])
    assert cdi["status"] == FAIL and cdi["signature"] == "cdi.engine.config" and not record_errors("cdi", cdi)
    # as it speaks for podman the cdi record is what it was; as it speaks for docker it FAILs
    assert cdi_for_runtime(cdi, "podman")["status"] == a["cdi"]["status"]
    assert cdi_for_runtime(cdi, "docker")["status"] == FAIL
    blocked = {"runtime": not_run("runtime", "blocked by cdi FAIL"), "compute": not_run("compute", "blocked by cdi FAIL")}
    blocked["runtime"]["evidence"]["engine"] = dict(DOCKER)
    v = node_verdict({"host": a["host"], "cdi": cdi}, runtimes=[
        {"runtime": "podman", "records": {"runtime": a["runtime"], "compute": a["compute"]}},
        {"runtime": "docker", "records": blocked}])
    assert (v["verdict"], v["layer"], v["signature"]) == ("FAILED_AT_CDI", "cdi", "cdi.engine.config")
    assert v["runtime"]["name"] == "docker"
    assert v["reason"].startswith("docker 26.1.5 (/usr/bin/docker): cdi.engine.config: docker: k=d")
    assert "proven through: podman 4.3.1 (/usr/bin/podman); not proven through: docker 26.1.5 (/usr/bin/docker) (FAILED_AT_CDI)" in v["reason"]
    assert [(r["runtime"], r["verdict"]) for r in v["runtimes"]] == [("podman", COMPUTE_VERIFIED), ("docker", "FAILED_AT_CDI")]


def test_a_runtime_not_run_keeps_the_node_from_verified(node):
    a = verified(node, PODMAN)
    down = {"runtime": not_run("runtime", "nothing answers at unix:///run/containerd/containerd.sock"),
            "compute": not_run("compute", "blocked: runtime NOT_RUN")}
    v = node_verdict({"host": a["host"], "cdi": a["cdi"]}, runtimes=[
        {"runtime": "podman", "records": {"runtime": a["runtime"], "compute": a["compute"]}},
        {"runtime": "containerd", "records": down}])
    assert v["verdict"] == "INCONCLUSIVE" and v["runtime"]["name"] == "containerd"
    assert v["reason"].startswith("containerd: ") and "nothing answers" in v["reason"]


def test_with_checks_keeps_a_record_whose_status_does_not_change(node):
    cdi = verified(node, PODMAN)["cdi"]
    same = with_checks(cdi, cdi["checks"])
    assert same["status"] == cdi["status"] and same["reason"] == cdi["reason"]
    assert with_checks(copy.deepcopy(cdi), [])["status"] == NOT_RUN


def test_the_fleet_report_speaks_for_every_runtime_of_a_node(node):
    """The report's host entry takes verify_node's per-runtime results: a node proven through podman but not through
    docker is not COMPUTE_VERIFIED in the report, and its rows and the runtime breakdown name both."""
    from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F  # pylint: disable=import-outside-toplevel

    a = verified(node, PODMAN)
    b = verified(node, DOCKER)
    broken = copy.deepcopy(b["compute"])
    broken["status"] = FAIL
    broken["signature"] = "compute.cuda.CUDA_ERROR_NO_DEVICE"
    runtimes = [{"runtime": "podman", "records": {"runtime": a["runtime"], "compute": a["compute"]}},
                {"runtime": "docker", "records": {"runtime": b["runtime"], "compute": broken}}]
    records = dict(a)
    report = F.build_report([{"name": "n1", "records": records, "runtimes": runtimes}], "2026-12-03T00:00:00Z")
    entry = report["hosts"]["n1"]
    assert entry["verdict"] != COMPUTE_VERIFIED, entry["reason"]
    assert "podman" in entry["reason"] and "docker" in entry["reason"]
    assert [(r["runtime"], r["verdict"] == COMPUTE_VERIFIED) for r in entry["runtimes"]] == [("podman", True), ("docker", False)]
    assert F.host_profile(entry)["runtime"] == "podman + docker"
    # the same records without the per-runtime results: the podman run alone, verified
    alone = F.build_report([{"name": "n1", "records": records}], "2026-12-03T00:00:00Z")["hosts"]["n1"]
    assert alone["verdict"] == COMPUTE_VERIFIED
