"""The node verdict on records the layers produced (verdictlab.py: host from a node tree, cdi from a real spec
file, runtime and compute from the real probe run in a mini container), never on hand-made records."""
import copy
import json
import os

import pytest

from accounted import accounted
from verdictlab import (  # noqa: F401 pylint: disable=unused-import
    IMAGE_LIB_DIR, LIBCUDA_IN_CONTAINER, STUBS, before_issue_42, bind, control, emitted, full_spec, node, passing_control, passing_steps,
    probe_steps, real_control, spec_without,
)

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import trust as _cdi_trust
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import result as _common_result
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import catalogue as _compute_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import catalogue as _runtime_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import compare as _runtime_compare
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import attribution as _attribution
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, NOT_RUN, PASS, WARN, not_run, not_run_checks_not_proven,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import (
    COMPUTE_VERIFIED, INCONCLUSIVE, compute_points_to, node_verdict, record_errors,
)


def layers(node_, spec, control=passing_control, compute=True, trusted_edits=None):
    """The records of a drill run whatever the gate says (the mini runtime and the probe run): ``trusted_edits``
    declares the drill's own edits, so that the cdi layer accounts for them as a site's declaration does."""
    cdi = node_.cdi(spec, trusted_edits)
    runtime, probe = node_.run(cdi, compute=compute)
    records = {"host": node_.host, "cdi": cdi, "runtime": runtime}
    records["compute"] = node_.compute(probe, runtime, control=control)
    return records


def ids(checks, status=None):
    return [c["id"] for c in checks if status is None or c["status"] == status]


GPU_ROW = {"index": 0, "uuid": "GPU-6b1d2c3e-0000-4000-8000-000000000000", "model": "NVIDIA H200", "expected": True,
           "seen_in_container": True, "ordinal": 0, "status": PASS, "signature": None, "reason": None}


def verified_records(node_, rows=(GPU_ROW,), spec=None):
    """The full spec with the compute steps a GPU answers (the probe's own lines), and per-GPU rows (I3: the
    probe helper adds them to compute_record; until then they are set here)."""
    cdi = node_.cdi(spec or full_spec())
    runtime, probe = node_.run(cdi, compute=False)
    probe.update(emitted(passing_steps()), compute_requested=True)
    compute = bind(node_.compute(probe, runtime), host=node_.host)
    compute["evidence"]["gpus"] = [dict(r) for r in rows]
    return {"host": node_.host, "cdi": cdi, "runtime": runtime, "compute": compute}


# ---------------------------------------------------------------------------------------------------
# attribution from the cause (issue 10 item 1)

def test_no_nvidiactl_in_the_spec_points_at_cdi_because_of_the_nvidiactl_check(node):
    records = layers(node, spec_without(full_spec(), "/dev/nvidiactl"))
    assert ids(records["cdi"]["checks"], WARN) == ["cdi.nvidia.nvidiactl"]
    assert records["runtime"]["status"] == PASS  # the runtime applied the spec faithfully
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE"
    assert records["compute"]["points_to"] == "runtime"  # what the compute record alone can say
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_NO_DEVICE", "cdi")
    assert [(b["check"], b["subject"], b["observed"]) for b in v["because"]] == [
        ("cdi.nvidia.nvidiactl", "/dev/nvidiactl", "absent")]
    assert "EPERM" not in v["reason"] and "spec is the cause" in v["reason"]
    assert "because cdi.nvidia.nvidiactl /dev/nvidiactl: absent" in v["reason"]


def _unaccounted(cdi):
    """The edits cdi.trust.accounted names as not accounted for."""
    return [c["observed"].split(": not accounted for")[0] for c in cdi["checks"]
            if c["id"] == "cdi.trust.accounted" and c["status"] == FAIL]


# the toolkit's stub is no file of the driver: a drill that mounts it declares it (and the loader path to it)
STUB_DECLARED = [{"hostPath": STUBS + "/libcuda.so.1", "why": "the drill's stub"}, {"env": "LD_LIBRARY_PATH", "why": "the drill's"}]


def test_stub_first_on_the_spec_library_path_fails_the_runtime_loader_check_and_points_at_cdi(node):
    node.stub()
    spec = full_spec()
    spec["containerEdits"]["env"].append("LD_LIBRARY_PATH=%s" % STUBS)
    spec["containerEdits"]["mounts"].append({"hostPath": STUBS + "/libcuda.so.1", "containerPath": STUBS + "/libcuda.so.1",
                                             "options": ["ro", "bind"]})
    # the stub and the loader path to it are edits no generator writes: FAILED_AT_CDI, and no container runs
    records, gate = node.gated(spec)
    assert gate == "blocked by cdi FAIL"
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_CDI", "cdi.trust.accounted", "cdi"), v["reason"]
    assert _unaccounted(records["cdi"]) == ["mount %s/libcuda.so.1 -> %s/libcuda.so.1" % (STUBS, STUBS), "env LD_LIBRARY_PATH=%s" % STUBS]
    # declared by the site, the same drill runs: the runtime's loader check FAILs and points at the spec, as it did
    records = layers(node, spec, trusted_edits=STUB_DECLARED)
    assert _unaccounted(records["cdi"]) == []
    assert "cdi.nvidia.libcuda" in ids(records["cdi"]["checks"], WARN)
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"]
    assert [c["status"] for c in loader] == [FAIL]
    assert "stub resolved first" in loader[0]["observed"] and STUBS + "/libcuda.so.1" in loader[0]["observed"]
    assert "LD_LIBRARY_PATH" in loader[0]["observed"]
    assert (records["runtime"]["signature"], records["runtime"]["points_to"]) == ("runtime.loader.libcuda", "cdi")
    # the container's CUDA indeed got the stub's answer
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_STUB_LIBRARY"
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi")
    assert [b["check"] for b in v["because"]] == ["cdi.nvidia.libcuda"]
    assert "stub" in v["because"][0]["observed"].lower()


def test_stub_mounted_as_libcuda_is_a_loader_warning_and_the_compute_failure_points_at_cdi(node):
    """The H200 drill stub_libcuda: the spec mounts the toolkit stub as libcuda.so.1. The stub is no file of the
    driver: FAILED_AT_CDI by cdi.trust.accounted before any container; declared trusted, the drill runs and the compute
    failure is attributed as before."""
    node.stub()
    spec = full_spec()
    spec["containerEdits"]["mounts"][0]["hostPath"] = STUBS + "/libcuda.so.1"
    records, gate = node.gated(spec)
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_CDI", "cdi.trust.accounted", "cdi"), v["reason"]
    assert gate == "blocked by cdi FAIL" and records["compute"]["status"] == NOT_RUN
    assert _unaccounted(records["cdi"]) == ["mount %s/libcuda.so.1 -> %s" % (STUBS, LIBCUDA_IN_CONTAINER)]
    records = layers(node, spec, trusted_edits=STUB_DECLARED[:1])
    assert _unaccounted(records["cdi"]) == []
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == WARN and "stub" in loader["observed"]
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == (
        "FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_STUB_LIBRARY", "cdi")
    assert [b["check"] for b in v["because"]] == ["cdi.nvidia.libcuda"]


def test_no_ptxjit_mount_names_the_ptxjit_check(node):
    records = layers(node, spec_without(full_spec(), "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1"))
    assert "cdi.nvidia.ptxjit" in ids(records["cdi"]["checks"], WARN)
    assert _attribution.explain("compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", records["cdi"])[0]["check"] == \
        "cdi.nvidia.ptxjit"


def test_container_and_host_control_failing_differently_is_not_the_host(node):
    """The real probe on this GPU-less host fails at dlopen; the container got past dlopen and failed at cuInit
    (NO_DEVICE): the host control fails differently, so it is no evidence against the host (issue 18 item 9)."""
    records = layers(node, full_spec(), control=real_control)
    assert records["compute"]["evidence"]["host_control"]["status"] == FAIL
    assert records["compute"]["points_to"] == "host"  # what the compute record alone can say
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"], v["because"]) == ("FAILED_AT_COMPUTE", "compute", [])
    assert "the host control failed differently (compute.dlopen.libcuda at dlopen) than the container " \
           "(compute.cuda.CUDA_ERROR_NO_DEVICE at cuInit)" in v["reason"]


@pytest.mark.parametrize("asked,observed,points_to", [
    ("0640 (fileMode)", "0666", "compute"),   # not applied, but what was set grants more: it cannot deny the open
    ("0666 (fileMode)", "0600", "runtime"),   # what the runtime set grants less than the spec asked: it can
    ("0660 (fileMode)", "0620", "runtime"),
    ("0600 (fileMode)", "0644", "compute"),
])
def test_edit_not_applied_points_at_the_runtime_only_when_it_can_cause_it(node, asked, observed, points_to):
    """fileMode asked by the spec, not applied by this runtime (runtime WARN): the compute failure (cuInit
    CUDA_ERROR_NO_DEVICE) is the runtime's only when the mode it set grants less than the spec asked (the review's
    class: a restrictive fileMode that was not applied is no cause)."""
    spec = full_spec()
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["fileMode"] = 0o640
    records = layers(node, spec)
    mode = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.device_node.mode"]
    assert [c["status"] for c in mode] == [WARN]
    mode[0].update(expected=asked, observed=observed)
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"], v["because"]) == ("FAILED_AT_COMPUTE", points_to, []), v["reason"]
    assert ("the runtime did not apply runtime.device_node.mode" in v["reason"]) == (points_to == "runtime")


def test_env_edit_lost_fails_at_runtime(node):
    cdi = node.cdi(full_spec())
    runtime, probe = node.run(cdi, drop_env=("NVIDIA_VISIBLE_DEVICES",))
    v = node_verdict({"host": node.host, "cdi": cdi, "runtime": runtime, "compute": node.compute(probe, runtime)})
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.env.value", "runtime")


def test_no_spec_edit_explaining_the_failure_is_not_blamed_on_the_spec(node):
    """Every nvidia check PASSes, every edit applied, the host control passes; this libcuda's cuInit says
    NO_DEVICE. Nothing of the spec explains it: not the spec by elimination (issue 18 item 11)."""
    records = layers(node, full_spec())
    assert ids(records["cdi"]["checks"], WARN) == []
    v = node_verdict(records)
    assert (v["points_to"], v["because"]) == ("compute", [])
    assert "no spec edit or image setting explains compute.cuda.CUDA_ERROR_NO_DEVICE at cuInit" in v["reason"]


def test_runtime_start_signature_points_at_cdi_when_a_cdi_check_explains_it(node):
    cdi = node.cdi(full_spec())
    runtime = _common_result.LayerBuilder("runtime", _runtime_catalogue.CHECKS)
    runtime.add("runtime.container.started", FAIL, "c", observed="Error: unresolvable CDI devices nvidia.com/gpu=0")
    sig = _runtime_catalogue.classify_start_error("Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=0")
    record = runtime.build(signature=sig, points_to="runtime")
    assert node_verdict({"cdi": cdi, "runtime": record})["points_to"] == "runtime"  # nothing in cdi explains it
    # a cdi layer that WARNed a check of that signature's row (a conflicting second spec of the same kind)
    spec = full_spec()
    node.cdi(spec)
    with open(node.spec_dir + "/other.yaml", "w") as f:
        f.write("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '1'\n  containerEdits:\n"
                "    deviceNodes:\n    - path: /dev/nvidia0\n")
    with open(node.spec_dir + "/third.yaml", "w") as f:
        f.write("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: '1'\n  containerEdits:\n"
                "    deviceNodes:\n    - path: /dev/nvidia0\n")
    cdi2 = node.cdi(spec)
    explaining = [c for c in cdi2["checks"] if c["id"] in _attribution.EXPLAINED_BY[sig] and c["status"] == WARN]
    assert explaining, [(c["id"], c["status"]) for c in cdi2["checks"]]
    v = node_verdict({"cdi": cdi2, "runtime": record})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi")
    assert [b["check"] for b in v["because"]] == [c["id"] for c in explaining]


@pytest.mark.parametrize("container,host,expected", [
    (FAIL, PASS, "runtime"), (FAIL, FAIL, "host"), (FAIL, NOT_RUN, "compute"), (PASS, PASS, None),
])
def test_compute_points_to(container, host, expected):
    assert compute_points_to(container, host) == expected


# ---------------------------------------------------------------------------------------------------
# COMPUTE_VERIFIED and the per-GPU rows (I3/I4)

def test_verified_on_every_expected_gpu(node):
    v = node_verdict(verified_records(node))
    assert v["verdict"] == COMPUTE_VERIFIED and v["gpus"] == [GPU_ROW] and v["because"] == []


def test_no_gpu_rows_is_not_verified(node):
    records = verified_records(node, rows=())
    v = node_verdict(records)
    assert (v["verdict"], v["reason"]) == (INCONCLUSIVE, "compute record has no per-GPU rows")
    del records["compute"]["evidence"]["gpus"]
    assert node_verdict(records)["reason"] == "compute record has no per-GPU rows"


def test_a_not_run_gpu_row_is_inconclusive_naming_that_gpu(node):
    busy = dict(GPU_ROW, index=1, uuid="GPU-busy", status=NOT_RUN, reason="GPU in use, not preempting: pid 7")
    v = node_verdict(verified_records(node, rows=(GPU_ROW, busy)))
    assert v["verdict"] == INCONCLUSIVE
    assert v["reason"] == "GPU 1 GPU-busy not run: GPU in use, not preempting: pid 7"


def test_an_unexpected_gpu_row_warns_without_blocking(node):
    extra = dict(GPU_ROW, index=1, uuid="GPU-extra", expected=False, status=WARN, reason="seen, not requested")
    records = verified_records(node, rows=(GPU_ROW, extra))
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED
    # the compute layer rolls that row's check up to WARN (compute.gpu.unexpected): still verified
    records["compute"].update(status=WARN, reason="compute.gpu.unexpected: GPU-extra")
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED


def test_an_expected_gpu_row_that_is_not_pass_is_not_verified(node):
    busy = dict(GPU_ROW, status=WARN, reason="busy, probed with allow_busy_gpu: true")
    v = node_verdict(verified_records(node, rows=(busy,)))
    assert (v["verdict"], v["reason"]) == (INCONCLUSIVE, "GPU 0 %s WARN: busy, probed with allow_busy_gpu: true" % GPU_ROW["uuid"])


def test_compute_pass_without_cdi_injection_is_not_verified(node):
    records = verified_records(node)
    records["compute"]["evidence"]["container"]["cdi_devices"] = []
    assert node_verdict(records)["verdict"] == INCONCLUSIVE


def test_runtime_warn_still_verifies(node):
    spec = full_spec()
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["fileMode"] = 0o640  # not applied here: a WARN
    records = verified_records(node, spec=spec)
    assert records["runtime"]["status"] == WARN
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED


# ---------------------------------------------------------------------------------------------------
# verdict integrity (issue 10 item 4)

@pytest.mark.parametrize("breakage,needle", [
    (lambda r: r["compute"].pop("checks"), "compute: missing key checks"),
    (lambda r: r["compute"].update(status="GREEN"), "compute: unknown status 'GREEN'"),
    (lambda r: r["runtime"]["checks"].append(dict(r["runtime"]["checks"][0], status=FAIL)),
     "runtime: PASS record holds a FAIL check"),
    (lambda r: r.update(cdi=r["host"]), "cdi: given as the cdi record but its layer is 'host'"),
    (lambda r: r["compute"]["evidence"].update(gpus={"0": "PASS"}), "compute: evidence.gpus is not a list"),
    (lambda r: r["compute"]["evidence"]["gpus"][0].update(status="OK"), "evidence.gpus[0] has unknown status 'OK'"),
    (lambda r: r["host"].update(not_proven=[]), "missing from not_proven"),
    (lambda r: r.update(runtime=dict(r["runtime"], checks=[
        c for c in r["runtime"]["checks"] if c["id"] not in _attribution.EDIT_CHECKS])),
     "runtime PASS without any CDI edit compared"),
    (lambda r: r.update(compute="not a record"), "compute: record is not a mapping"),
])
def test_a_malformed_record_is_inconclusive_with_the_reason_never_verified(node, breakage, needle):
    records = verified_records(node)
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED
    breakage(records)
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE and v["reason"].startswith("malformed record: ")
    assert needle in v["reason"]


def test_a_malformed_record_is_inconclusive_even_after_a_fail(node):
    records = layers(node, spec_without(full_spec(), "/dev/nvidiactl"))
    records["host"]["reason"] = None
    records["host"]["status"] = WARN
    assert node_verdict(records)["verdict"] == INCONCLUSIVE


def test_runtime_with_no_expected_edit_warns_and_proves_no_edit(node):
    cdi = node.cdi(full_spec())
    empty = copy.deepcopy(cdi)
    empty["evidence"]["expected_edits"] = {"env": [], "deviceNodes": [], "mounts": [], "hooks": [], "additionalGids": []}
    runtime, _probe = node.run(empty, compute=False)
    assert runtime["status"] == WARN
    assert [c["status"] for c in runtime["checks"] if c["id"] == "runtime.edits.compared"] == [WARN]
    assert record_errors("runtime", runtime) == []


def test_not_run_checks_of_a_pass_layer_are_in_not_proven(node):
    host = node.host
    assert host["status"] == PASS
    skipped = [c for c in host["checks"] if c["status"] == NOT_RUN]
    assert skipped
    for c in skipped:
        assert any(c["id"] in item for item in host["not_proven"]), c["id"]


def test_not_run_layers_make_inconclusive_with_reasons(node):
    records = {"host": node.host, "cdi": node.cdi(full_spec()), "runtime": not_run("runtime", "podman not installed")}
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE
    assert "runtime: podman not installed" in v["reason"] and "compute: no record" in v["reason"]


def test_empty_records_inconclusive():
    assert node_verdict({})["verdict"] == INCONCLUSIVE
    assert node_verdict(None)["verdict"] == INCONCLUSIVE


# ---------------------------------------------------------------------------------------------------
# the table

def _catalogued_signatures():
    return set(_compute_catalogue.SIGNATURES) | set(_runtime_catalogue.SIGNATURES)


def test_the_table_covers_every_catalogued_signature_and_nothing_else():
    assert set(_attribution.EXPLAINED_BY) == _catalogued_signatures()


def _cdi_check_ids():
    """Every cdi check id of the catalogues, from docs/checks.md (generated from them, kept current by a test),
    whichever module of the cdi layer defines it."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "checks.md")) as f:
        text = f.read()
    section = text.split("\n## cdi\n", 1)[1].split("\n## ", 1)[0]
    return set(line.split("`")[1] for line in section.splitlines() if line.startswith("| `cdi."))


def test_the_table_names_only_real_cdi_check_ids():
    named = set(i for row in _attribution.EXPLAINED_BY.values() for i in row)
    known = _cdi_check_ids()
    assert "cdi.nvidia.libcuda" in known
    assert named and named <= known, named - known


def test_an_uncatalogued_curesult_uses_the_catch_all_row():
    assert _attribution.explaining_ids("compute.cuda.CUDA_ERROR_LAUNCH_FAILED") == \
        _attribution.EXPLAINED_BY[_attribution.OTHER_CURESULT]
    assert _attribution.explaining_ids("runtime.mount.present") == []


# ---------------------------------------------------------------------------------------------------
# the records the modules produced on the real H200 (docs/evidence/h200-runtime-compute, 2026-12-02)

H200 = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs", "evidence", "h200-runtime-compute")


# the variants whose spec today's cdi layer accounts for in full (this collection's own spec over the driver's files,
# test__cdi_spec.py), here and in h200-attribution: made before cdi.trust.accounted existed (issue 42), they get its
# PASS from before_issue_42; the others mount a file that is not the driver's (the stub, a missing or fake library) or
# set env of their own, and today's layer FAILs them at cdi before any container (their records show what ran before)
ACCOUNTED = ("full", "file_mode_0000", "no_ptxjit_mount", "no_uvm_node", "cgroup_read_only")


def _h200(variant):
    with open(os.path.join(H200, variant + ".json")) as f:
        saved = json.load(f)
    records = dict((k, v) for k, v in saved["records"].items() if k in ("host", "cdi", "runtime", "compute"))
    _list_not_run_checks(records.values())
    return records, saved["records"].get("probe")


def _today(variant, records):
    """The H200 records of ``variant`` with what a run of today writes (before_issue_42)."""
    return before_issue_42(records, accounted_for=variant in ACCOUNTED)


def _list_not_run_checks(records):
    """Records made before PASS/WARN layers listed their NOT_RUN checks in not_proven: add them, as build() does."""
    for record in records:
        if record["status"] in (PASS, WARN):
            record["not_proven"] += [t for t in not_run_checks_not_proven(record["checks"]) if t not in record["not_proven"]]


@pytest.mark.parametrize("variant,verdict,signature,points_to,because", [
    ("no_ptxjit_mount", "FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", "cdi", ["cdi.nvidia.ptxjit"]),
    ("no_uvm_node", "FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_UNKNOWN", "cdi", ["cdi.nvidia.uvm"]),
    ("stub_libcuda", "FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_STUB_LIBRARY", "cdi", ["cdi.nvidia.libcuda"]),
    ("cgroup_read_only", "FAILED_AT_RUNTIME", "runtime.device_node.open.EPERM", "cdi", ["cdi.nvidia.cgroup_write"]),
    ("stale_library", "FAILED_AT_CDI", "cdi.host.library_version", "cdi", []),
    ("missing_hostpath", "FAILED_AT_CDI", "cdi.host.mount_source", "cdi", []),
    # the run of 2026-12-03 13:53 UTC carries the per-GPU rows (GPU 0 proven by UUID) and the driver binding
    ("full", COMPUTE_VERIFIED, None, None, []),
    ("file_mode_0000", COMPUTE_VERIFIED, None, None, []),
    # its spec sets PYTHONPATH, PYTHONSTARTUP... and mounts a directory of its own: recorded before issue 42, its cdi
    # record has no cdi.trust.accounted PASS, so it is not taken on its word (test_h200_poisoned_env_spec_...)
    ("truth-poisoned-env", INCONCLUSIVE, None, None, []),
    # a library that answers everything, claims the GPU and "verifies" its kernel: not the driver root's file
    ("truth-fake-libcuda", "FAILED_AT_COMPUTE", "compute.driver.binding", "cdi", ["cdi.host.libcuda_identity"]),
])
def test_h200_records_are_attributed_from_the_cause(variant, verdict, signature, points_to, because):
    records, _probe = _h200(variant)
    v = node_verdict(_today(variant, records))
    assert (v["verdict"], v["signature"], v["points_to"]) == (verdict, signature, points_to), v["reason"]
    assert [b["check"] for b in v["because"]] == because


@pytest.mark.parametrize("variant", ["full", "file_mode_0000", "truth-poisoned-env"])
def test_h200_verified_records_made_before_issue_42_are_inconclusive(variant):
    """Recorded before the probe reported every driver library it mapped, before the probe file was looked at
    after the run and before the cdi layer accounted for every edit: none is shown, so the node is not
    COMPUTE_VERIFIED (issue 42 items 1, 3 and 4)."""
    records, _probe = _h200(variant)
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE
    assert "cdi: cdi.trust.accounted did not PASS for %s" % records["cdi"]["evidence"]["requested_devices"][0] in v["reason"]
    assert "runtime.probe.unchanged absent: the probe file was not shown unchanged after the container ran" in v["reason"]
    assert "carries no report of the driver libraries mapped in the probe (mapped_libraries)" in v["reason"], v["reason"]


POISONED = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONUSERBASE", "GPUPROBE_PROBE_DELAY_S")


def test_h200_poisoned_env_spec_is_unaccounted_today_and_verified_only_on_the_site_s_word():
    """truth-poisoned-env (H200, 2026-12-03): the spec poisons the interpreter's env and mounts a directory of its own;
    the probe held then. Today each of those edits is unaccounted (the layer FAILs the spec before any container); a
    site that declares them gets the run's verdict back, and the verdict says that it rests on the declaration."""
    records, _probe = _h200("truth-poisoned-env")
    records = _today("truth-poisoned-env", records)
    assert "cdi.trust.accounted did not PASS" in node_verdict(records)["reason"]
    expected = records["cdi"]["evidence"]["expected_edits"]
    poisoned = [e for e in expected["env"] if e.split("=")[0] in POISONED]
    evil = [m for m in expected["mounts"] if m["containerPath"] == "/gpuprobe-evil"]
    assert len(poisoned) == len(POISONED) and len(evil) == 1
    rows = _cdi_trust.device_accounting({"env": poisoned}, _cdi_trust.Host("/", {"evidence": {"driver_root": "/"}}))
    assert [r["by"] for r in rows] == [None] * len(POISONED)
    declared = [{"env": "PYTHON*"}, {"env": "GPUPROBE_PROBE_DELAY_S"}, {"containerPath": "/gpuprobe-evil", "why": "the drill's"}]
    accounted(records["cdi"], records["cdi"]["evidence"]["requested_devices"], {"env": poisoned, "mounts": evil}, declared)
    v = node_verdict(records)
    assert v["verdict"] == COMPUTE_VERIFIED, v["reason"]
    assert v["reason"].endswith("; rests on edits the site declared trusted (trusted_edits): mount /tmp/gpuprobe-truth-gpu/evil -> "
                                "/gpuprobe-evil; %s" % "; ".join("env " + e for e in poisoned)), v["reason"]


@pytest.mark.parametrize("variant", ["full", "file_mode_0000"])
def test_h200_verified_records_without_the_binding_are_inconclusive(variant):
    """A record of a verified kernel without compute.driver.binding (as every record made before it existed): the
    container's driver is not shown to be the host's, so the node is not COMPUTE_VERIFIED (issue 18 item 1)."""
    records, _probe = _h200(variant)
    records = _today(variant, records)
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED
    v = node_verdict(dict(records, compute=bind(records["compute"], None)))
    assert v["verdict"] == INCONCLUSIVE
    assert v["reason"] == "compute.driver.binding absent: the container's CUDA driver was not shown to be the host's"


@pytest.mark.parametrize("variant,status", [("full", PASS), ("no_uvm_node", PASS), ("stub_libcuda", WARN)])
def test_loader_check_on_the_h200_inventories(variant, status):
    records, probe = _h200(variant)
    b = _common_result.LayerBuilder("runtime", _runtime_catalogue.CHECKS)
    _runtime_compare.loader_check(b, records["cdi"]["evidence"]["expected_edits"], probe["inventory"])
    assert [c["status"] for c in b.checks] == [status]
    assert b.checks[0]["observed"].startswith(
        "resolved to the mounted file, whose host source is the CUDA toolkit stub: /usr/local/nvidia/lib64/libcuda.so.1"
        if status == WARN else "resolved to /usr/local/nvidia/lib64/libcuda.so.1 (mounted from /lib64/libcuda.so.580.159.04)")


# the issue's node-style specs, run on the H200 (docs/evidence/h200-attribution): the runtime record is rebuilt
# from the saved in-container probe output by the current runtime checks, then the verdict is computed

def _h200_attribution(name):
    with open(os.path.join(H200, "..", "h200-attribution", name + ".json")) as f:
        saved = json.load(f)
    probe, old = saved["probe"], saved["runtime"]
    b = _common_result.LayerBuilder("runtime", _runtime_catalogue.CHECKS)
    b.evidence, b.versions = old["evidence"], old["versions"]
    b.checks += [c for c in old["checks"]
                 if c["id"] in ("runtime.engine.available", "runtime.container.started", "runtime.probe.inventory")]
    points_to = _runtime_compare.observed_checks(b, saved["cdi"]["evidence"]["expected_edits"], probe["inventory"], probe["start"])
    records = {"host": saved["host"], "cdi": saved["cdi"], "runtime": _runtime_compare.build_observed(b, probe["inventory"], points_to),
               "compute": saved["compute"]}
    _list_not_run_checks((records["host"], records["cdi"]))
    return records


def test_h200_spec_without_nvidiactl():
    v = node_verdict(_h200_attribution("no_nvidiactl"))
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_NO_DEVICE", "cdi")
    assert [(b["check"], b["observed"]) for b in v["because"]] == [("cdi.nvidia.nvidiactl", "absent")]


def test_h200_stub_first_on_the_spec_library_path():
    records = _h200_attribution("stub_first")
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == FAIL and loader["observed"].startswith(
        "the CUDA toolkit stub resolved first: /usr/local/cuda/lib64/stubs/libcuda.so.1 (mounted from "
        "/usr/local/cuda-13.0/targets/x86_64-linux/lib/stubs/libcuda.so)")
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi")
    assert [b["check"] for b in v["because"]] == ["cdi.nvidia.libcuda"]


def test_h200_full_spec_needs_its_per_gpu_row():
    records = _h200_attribution("full")
    assert node_verdict(records)["reason"] == "compute record has no per-GPU rows"
    device = records["compute"]["evidence"]["container"]["facts"]["device"]  # the GPU the probe ran the kernel on
    records["compute"]["evidence"]["gpus"] = [{
        "index": 0, "uuid": device["uuid"], "model": device["name"], "expected": True, "seen_in_container": True,
        "ordinal": device["ordinal"], "status": PASS, "signature": None, "reason": None}]
    v = node_verdict(_today("full", records))
    assert v["verdict"] == INCONCLUSIVE  # recorded before compute.driver.binding existed
    assert v["reason"] == "compute.driver.binding absent: the container's CUDA driver was not shown to be the host's"
    v = node_verdict(_today("full", dict(records, compute=bind(records["compute"], host=records["host"]))))
    assert v["verdict"] == COMPUTE_VERIFIED and v["gpus"][0]["uuid"] == "GPU-8cf89cb9-f0ec-a1a9-77e3-924d758c05c4"


def test_identity_gpus_no_row_proves_are_not_verified(node):
    """The compute record built without expected_gpus proves what it saw; the cdi identity map still says which
    GPUs the requested devices give, and one that no row proves keeps the node from COMPUTE_VERIFIED."""
    records = verified_records(node)
    extra = {"uuid": "GPU-00000000-1111-2222-3333-444444444444", "index": 1, "minor": 1, "name": "NVIDIA H200",
             "mig_uuid": None}
    records["cdi"]["evidence"]["identity"] = {"devices": [], "expected_gpus": [
        {"uuid": GPU_ROW["uuid"], "index": 0, "minor": 0, "name": "NVIDIA H200", "mig_uuid": None}, extra]}
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE and extra["uuid"] in v["reason"], v


def test_a_runtime_warn_without_any_edit_compared_is_not_verified(node):
    records = verified_records(node)
    runtime = records["runtime"]
    runtime["checks"] = [c for c in runtime["checks"] if c["id"] not in _attribution.EDIT_CHECKS]
    runtime.update(status=WARN, reason="runtime.edits.compared: no CDI edit was compared")
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE and "no CDI edit was compared" in v["reason"], v


def test_a_lost_edit_that_cannot_cause_the_failure_is_not_blamed(node):
    """A missing GPU (compute.gpu.missing) is about device nodes: a WARN on a library mount the runtime did not
    apply as asked does not explain it, so the failure is not put on the runtime for that mount."""
    spec = full_spec()
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["fileMode"] = 0o640
    records = layers(node, spec)
    mode_warn = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.device_node.mode"][0]
    mode_warn.update(expected="0666 (fileMode)", observed="0600")  # a lost device edit that denies more: blamed
    assert node_verdict(records)["points_to"] == "runtime"
    mode_warn.update(id="runtime.mount.source", subject="/usr/lib64/libnvidia-ml.so.1")  # now a lost library edit
    compute = records["compute"]
    compute.update(signature="compute.gpu.missing")
    v = node_verdict(records)
    assert v["points_to"] == "compute" and "runtime.mount.source" not in v["reason"], v
