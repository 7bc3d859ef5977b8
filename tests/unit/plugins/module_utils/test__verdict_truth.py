"""Issue 18, the verdict side: no COMPUTE_VERIFIED the records do not earn (driver binding, the cdi layer, the host
control, what the spec predicts), the host control compared by WHERE it failed, and the cause named from the
spec's edits or the image, never the spec by elimination. Records come from verdictlab (the layers' own code on a
node tree, a real spec file, the real probe in a mini container); the probe's CUDA lines from its real device
loop on a fake libcuda."""
import os

import pytest

from verdictlab import (  # noqa: F401 pylint: disable=unused-import
    DRIVER, IMAGE_LIB_DIR, LIBCUDA_IN_CONTAINER, PTX_IN_CONTAINER, STUBS, bind, compile_libcuda, control, emitted, full_spec,
    node, passing_control, probe_steps, spec_without as without,
)

from ansible_collections.gpuprobe.layers.plugins.filter.node_verdict import FilterModule
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict import attribution as _attribution
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import model as _report
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute.catalogue import CHECKS as COMPUTE_CHECKS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import (
    FAIL, NOT_RUN, PASS, POINTS_TO, WARN, LayerBuilder, make_check, not_run, not_run_checks_not_proven, validate_record,
    with_checks,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import (
    CHECKS as RUNTIME_CHECKS, SIGNATURES as RUNTIME_SIGNATURES, classify_start_error,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import COMPUTE_VERIFIED, INCONCLUSIVE, node_verdict

UUID = "GPU-6b1d2c3e-0000-4000-8000-000000000000"
GPU_ROW = {"index": 0, "uuid": UUID, "model": "NVIDIA H200", "expected": True, "seen_in_container": True, "ordinal": 0,
           "status": PASS, "signature": None, "reason": None}


def records_of(node_, spec=None, fail=None, ctl=passing_control, binding=PASS, image_env=None, image_files=None,
               trusted_edits=None):
    """The four records of one node: cdi from ``spec``, runtime from the mini container (``image_env`` and
    ``image_files`` stand for the image), compute from the probe's lines on a fake libcuda failing as ``fail``
    (None: a verified kernel), host control ``ctl``; ``binding``: compute.driver.binding (None: absent);
    ``trusted_edits``: the lab's own edits declared (cdi.trust.accounted), the runtime and probe run whatever the gate says."""
    cdi = node_.cdi(spec or full_spec(), trusted_edits)
    runtime, probe = node_.run(cdi, compute=False, image_env=image_env, image_files=image_files)
    probe.update(emitted(probe_steps(fail=fail)), compute_requested=True)
    compute = node_.compute(probe, runtime, control=ctl)
    bind(compute, binding, host=node_.host)
    if fail is None:
        compute["evidence"]["gpus"] = [dict(GPU_ROW)]
    return {"host": node_.host, "cdi": cdi, "runtime": runtime, "compute": compute}


# ---------------------------------------------------------------------------------------------------
# item 1: COMPUTE_VERIFIED needs the container's driver to be the host's

def test_verified_with_every_proof(node):
    v = node_verdict(records_of(node))
    assert v["verdict"] == COMPUTE_VERIFIED, v["reason"]


@pytest.mark.parametrize("binding,needle", [
    (None, "compute.driver.binding absent: the container's CUDA driver was not shown to be the host's"),
    (NOT_RUN, "compute.driver.binding NOT_RUN container: "),
    (WARN, "compute.driver.binding WARN container: "),
])
def test_no_binding_pass_is_inconclusive_naming_it(node, binding, needle):
    v = node_verdict(records_of(node, binding=binding))
    assert v["verdict"] == INCONCLUSIVE and needle in v["reason"], v["reason"]


def test_a_binding_fail_fails_compute_and_is_never_verified(node):
    records = records_of(node, binding=FAIL)
    records["compute"].update(status=FAIL, signature="compute.driver.binding", points_to="compute",
                              reason="compute.driver.binding: another libcuda answered")
    assert node_verdict(records)["verdict"] == "FAILED_AT_COMPUTE"


def test_the_binding_must_hold_for_every_container_run(node):
    records = records_of(node)
    records["compute"]["evidence"]["containers"] = [{"executed": True}, {"executed": True}]  # per_device: two runs
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE and "compute.driver.binding PASSed for 1 of 2 container runs" in v["reason"]
    bind_again = make_check("compute.driver.binding", PASS, "container 2", "the host's driver", "same")
    records["compute"]["checks"].append(bind_again)
    v = node_verdict(records)  # a check is not taken on its word: the evidence proves one run
    assert v["verdict"] == INCONCLUSIVE and "the evidence proves 1 of 2 container runs" in v["reason"], v["reason"]
    binding = records["compute"]["evidence"]["driver_binding"]
    binding["runs"].append(dict(binding["runs"][0], where="container 2"))
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED


# the review's class: records shaped to claim a binding they do not carry, or carried for another host
def _forged(records, how):
    compute = records["compute"]
    binding = compute["evidence"]["driver_binding"]
    if how == "check without evidence":
        del compute["evidence"]["driver_binding"]
    elif how == "evidence run NOT_RUN":
        binding["runs"][0]["status"] = NOT_RUN
    elif how == "same run counted twice":
        compute["evidence"]["containers"] = [{"executed": True}, {"executed": True}]
        binding["runs"].append(dict(binding["runs"][0]))
        compute["checks"].append(make_check("compute.driver.binding", PASS, "container", "the host's driver", "same"))
    elif how == "run digest not the host's":
        binding["runs"][0]["libcuda"] = {"sha256": "f" * 64}
    elif how == "run CUDA version not the host's":
        binding["runs"][0]["cuda_driver_api"] = 12080
    elif how == "host side unknown":
        binding["host"]["libcuda"] = None
    elif how == "another host record":
        records["host"] = dict(records["host"], evidence=dict(records["host"]["evidence"], nvml=dict(
            records["host"]["evidence"]["nvml"], driver_version="590.10.01", cuda_driver_version_int=13010)))
    elif how == "no host record":
        del records["host"]
    elif how == "run without its mapped libraries":  # a binding made before issue 42, or one that leaves them out
        del binding["runs"][0]["libraries"]
    elif how == "a mapped library not the host's":
        binding["runs"][0]["libraries"].append({"path": "/usr/lib/libnvidia-ml.so.1", "host_name": "libnvidia-ml.so.x",
                                                "sha256": "e" * 64, "status": PASS})
    elif how == "a mapped library NOT_RUN":
        binding["runs"][0]["libraries"][0]["status"] = NOT_RUN
    elif how == "libcuda not among the mapped libraries":
        host = binding["host"]["libraries"]
        host["libnvidia-ml.so.x"] = {"sha256": "e" * 64}
        binding["runs"][0]["libraries"] = [{"path": "/usr/lib/libnvidia-ml.so.1", "host_name": "libnvidia-ml.so.x",
                                            "sha256": "e" * 64, "status": PASS}]
    return records


@pytest.mark.parametrize("how", ["check without evidence", "evidence run NOT_RUN", "same run counted twice",
                                 "run digest not the host's", "run CUDA version not the host's", "host side unknown",
                                 "another host record", "no host record", "run without its mapped libraries",
                                 "a mapped library not the host's", "a mapped library NOT_RUN",
                                 "libcuda not among the mapped libraries"])
def test_a_binding_claimed_without_its_evidence_is_never_verified(node, how):
    records = records_of(node)
    assert node_verdict(records)["verdict"] == COMPUTE_VERIFIED
    v = node_verdict(_forged(records, how))
    assert v["verdict"] == INCONCLUSIVE and "compute.driver.binding" in v["reason"], (how, v["reason"])


# issue 42 item 4: the probe file looked at again after the run (runtime.probe.unchanged)

def _probe_file(records, status):
    """``records`` with the runtime record's runtime.probe.unchanged of ``status`` (None: none at all)."""
    runtime = records["runtime"]
    checks = [c for c in runtime["checks"] if c["id"] != "runtime.probe.unchanged"]
    if status is not None:
        checks.append(make_check("runtime.probe.unchanged", status, "gpuprobe-t-1", "as written",
                                 "/tmp/gpuprobe-run-1/gpuprobe-probe-x/gpuprobe_probe.py: sha256 0123, written 4567"
                                 if status == FAIL else "unchanged after the run"))
    records["runtime"] = with_checks(runtime, checks)
    if status == NOT_RUN:  # a PASS record lists what it did not check (as LayerBuilder.build does)
        records["runtime"]["not_proven"] = records["runtime"]["not_proven"] + not_run_checks_not_proven(checks[-1:])
    return records


@pytest.mark.parametrize("status,verdict,needle", [
    (PASS, COMPUTE_VERIFIED, None),
    (FAIL, "FAILED_AT_CDI", "cdi.inject.probe_integrity: the probe file changed while the container ran"),
    (NOT_RUN, INCONCLUSIVE, "runtime.probe.unchanged NOT_RUN gpuprobe-t-1"),
    (None, INCONCLUSIVE, "runtime.probe.unchanged absent: the probe file was not shown unchanged after the container ran"),
])
def test_a_probe_file_changed_during_the_run_is_never_verified(node, status, verdict, needle):
    records = _probe_file(records_of(node), status)
    v = node_verdict(records)
    assert v["verdict"] == verdict, v["reason"]
    if needle:
        assert needle in v["reason"], v["reason"]
    if status == FAIL:
        assert (v["layer"], v["signature"], v["points_to"]) == ("cdi", "cdi.inject.probe_integrity", "cdi")
        assert [b["check"] for b in v["because"]] == ["runtime.probe.unchanged"]


def test_a_probe_file_change_is_named_before_a_later_layer_fails(node):
    """The order host -> cdi -> runtime -> compute: a changed probe file is the cdi's place, before a compute FAIL."""
    records = _probe_file(records_of(node, fail={("cuInit", None): 100}), FAIL)
    assert records["compute"]["status"] == FAIL
    v = node_verdict(records)
    assert (v["verdict"], v["signature"]) == ("FAILED_AT_CDI", "cdi.inject.probe_integrity"), v["reason"]


def test_a_container_pass_beside_a_failing_host_control_is_inconclusive(node):
    records = records_of(node, ctl=control(fail={("cuInit", None): 100}))
    assert records["compute"]["evidence"]["host_control"]["status"] == FAIL
    assert records["compute"]["status"] in (PASS, WARN)
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE
    assert "the host control FAILs (compute.cuda.CUDA_ERROR_NO_DEVICE at cuInit) beside the container's PASS" in v["reason"]


# every row of PREDICTS: a spec whose cdi check predicts that a step fails, and the step PASSed in the container
PREDICTION_SPECS = {
    "cdi.nvidia.nvidiactl": lambda n: without(full_spec(), "/dev/nvidiactl"),
    "cdi.nvidia.uvm": lambda n: without(full_spec(), "/dev/nvidia-uvm"),
    "cdi.nvidia.ptxjit": lambda n: without(full_spec(), PTX_IN_CONTAINER),
    "cdi.nvidia.cgroup_write": lambda n: _with_permissions(full_spec(), "rm"),
    "cdi.nvidia.libcuda": lambda n: without(full_spec(), LIBCUDA_IN_CONTAINER),
    "cdi.nvidia.cgroup_read": lambda n: _with_permissions(full_spec(), "wm"),
    "cdi.nvidia.libcuda_noexec": lambda n: _with_option(full_spec(), LIBCUDA_IN_CONTAINER, "noexec"),
    "cdi.nvidia.ptxjit_noexec": lambda n: _with_option(full_spec(), PTX_IN_CONTAINER, "noexec"),
    # issue 32: a libcuda that is not the driver root's file (an impostor with the driver's name) beside a binding PASS
    "cdi.host.libcuda_identity": lambda n: _with_libcuda(n, full_spec()),
}


def _with_option(spec, container_path, option):
    for mount in spec["containerEdits"]["mounts"]:
        if mount["containerPath"] == container_path:
            mount["options"].append(option)
    return spec


def _with_libcuda(node_, spec, rc=0):
    os.makedirs(node_.under("/opt/impostor"), exist_ok=True)
    impostor = compile_libcuda(node_.under("/opt/impostor/libcuda.so.%s" % DRIVER), rc)
    spec["containerEdits"]["mounts"][0]["hostPath"] = "/opt/impostor/" + impostor.rsplit("/", 1)[1]
    return spec


def _with_permissions(spec, permissions):
    spec["devices"][0]["containerEdits"]["deviceNodes"][0]["permissions"] = permissions
    return spec


def test_every_prediction_is_tested():
    assert set(PREDICTION_SPECS) == set(_attribution.PREDICTS)
    assert set(_attribution.PREDICTS.values()) <= set(_probe.COMPUTE_STEPS) | set(COMPUTE_CHECKS)


# the impostor libcuda is no file of the driver (unaccounted: FAILED_AT_CDI before any container, test below); declared,
# the contradiction between what the spec predicts and what passed is what decides
PREDICTION_DECLARED = {"cdi.host.libcuda_identity": [{"hostPath": "/opt/impostor/*", "why": "the lab's impostor"}]}


@pytest.mark.parametrize("check", sorted(PREDICTION_SPECS))
def test_a_step_the_spec_says_must_fail_that_passed_is_inconclusive(node, check):
    records = records_of(node, spec=PREDICTION_SPECS[check](node), trusted_edits=PREDICTION_DECLARED.get(check))
    assert [c["status"] for c in records["cdi"]["checks"] if c["id"] == check] == [WARN]
    v = node_verdict(records)
    assert v["verdict"] == INCONCLUSIVE, v["reason"]
    step = _attribution.PREDICTS[check]
    assert "%s WARN" % check in v["reason"] and "predicts that %s fails, yet %s PASSed" % (step, step) in v["reason"]


def test_an_impostor_libcuda_undeclared_is_failed_at_cdi_before_any_container(node):
    records, gate = node.gated(_with_libcuda(node, full_spec()))
    v = node_verdict(records)
    assert gate == "blocked by cdi FAIL"
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_CDI", "cdi.trust.accounted", "cdi"), v["reason"]
    assert "mount /opt/impostor/libcuda.so.%s -> %s: not accounted for" % (DRIVER, LIBCUDA_IN_CONTAINER) in v["reason"]


# ---------------------------------------------------------------------------------------------------
# item 4: no verdict without the cdi layer, for every caller

def _without_cdi(records, how):
    records = dict(records)
    if how == "absent":
        del records["cdi"]
    else:
        records["cdi"] = not_run("cdi", "no spec was looked at (tags)")
    return records


def _verdict_by(caller, records):
    if caller == "node_verdict":
        return node_verdict(records)["verdict"], node_verdict(records)["reason"]
    if caller == "filter":
        v = FilterModule().filters()["node_verdict"](records)
        return v["verdict"], v["reason"]
    if caller == "fleet_report":  # the report's entry of a host whose records were supplied
        e = _report.host_entry("n1", records)
        return e["verdict"], e["reason"]
    row = _report.drill_row("full", {"layer": None, "signature": None}, records)
    return row["observed_verdict"], row["observed_reason"]


@pytest.mark.parametrize("caller", ["node_verdict", "filter", "fleet_report", "drill_row"])
@pytest.mark.parametrize("how", ["absent", "not_run"])
def test_no_cdi_record_that_ran_is_never_verified(node, caller, how):
    records = records_of(node)
    assert _verdict_by(caller, records)[0] == COMPUTE_VERIFIED
    verdict, reason = _verdict_by(caller, _without_cdi(records, how))
    assert verdict == INCONCLUSIVE
    # (the fleet report gives a layer without a record a NOT_RUN record "no record: ...")
    assert reason.startswith(("cdi: no record", "cdi: not run (no record") if how == "absent" else
                             "cdi: not run (no spec was looked at (tags))"), reason


# ---------------------------------------------------------------------------------------------------
# item 9: compare WHERE the host control and the container failed

JIT = {("cuModuleLoadData", 0): 221}
NO_DEVICE = {("cuInit", None): 100}


@pytest.mark.parametrize("spec,container,host,points_to,because", [
    # the container got past cuInit and context and failed at PTX load; the host control failed at dlopen: the
    # missing ptxjit mount explains the container's failure, the host's says nothing about it
    ("no_ptxjit", JIT, {"no_libcuda": True}, "cdi", ["cdi.nvidia.ptxjit"]),
    ("no_ptxjit", JIT, {"fail": NO_DEVICE}, "cdi", ["cdi.nvidia.ptxjit"]),
    # the same failure at the same step on the host: the host
    ("full", NO_DEVICE, {"fail": NO_DEVICE}, "host", []),
    ("no_ptxjit", JIT, {"fail": JIT}, "host", []),
    # the same kind of failure earlier on the host (every context step of the host failed before PTX load)
    ("full", {("cuModuleLoadData", 0): 999}, {"fail": {("cuInit", None): 999}}, "host", []),
    # the same kind, but only LATER on the host: the host got past the step where the container failed
    ("full", {("cuInit", None): 999}, {"fail": {("cuModuleLoadData", 0): 999}}, "compute", []),
])
def test_the_host_control_points_at_the_host_only_when_it_failed_there_or_earlier_the_same_way(
        node, spec, container, host, points_to, because):
    spec_ = without(full_spec(), PTX_IN_CONTAINER) if spec == "no_ptxjit" else full_spec()
    records = records_of(node, spec=spec_, fail=container, ctl=control(**host))
    assert records["compute"]["status"] == FAIL and records["compute"]["evidence"]["host_control"]["status"] == FAIL
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"], [b["check"] for b in v["because"]]) == ("FAILED_AT_COMPUTE", points_to, because), \
        v["reason"]


@pytest.mark.parametrize("gpu_status,points_to", [(PASS, "cdi"), (FAIL, "host")])
def test_the_host_outcome_of_the_gpu_that_failed_decides(node, gpu_status, points_to):
    """The host control reports per GPU (evidence.host_control.gpus): its outcome on the GPU that failed in the
    container is what counts, not its global status."""
    gpus = [{"uuid": UUID, "status": gpu_status, "signature": "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND"
             if gpu_status == FAIL else None, "step": "cuModuleLoadData" if gpu_status == FAIL else None},
            {"uuid": "GPU-other", "status": FAIL, "signature": "compute.cuda.CUDA_ERROR_ECC_UNCORRECTABLE",
             "step": "cuCtxSynchronize"}]
    records = records_of(node, spec=without(full_spec(), PTX_IN_CONTAINER), fail=JIT,
                         ctl=control(fail=JIT, gpus=gpus, failed_step="cuModuleLoadData"))
    v = node_verdict(records)
    assert v["points_to"] == points_to, v["reason"]


def test_a_check_whose_predicted_step_passed_is_not_a_because(node):
    """No /dev/nvidia-uvm in the spec predicts cuInit fails; the container passed cuInit and failed at PTX load
    (UNKNOWN): cdi.nvidia.uvm is in that signature's row, but it does not explain this failure."""
    records = records_of(node, spec=without(full_spec(), "/dev/nvidia-uvm"), fail={("cuModuleLoadData", 0): 999})
    v = node_verdict(records)
    assert "cdi.nvidia.uvm" not in [b["check"] for b in v["because"]]
    assert v["points_to"] == "compute", v["reason"]


# ---------------------------------------------------------------------------------------------------
# item 11: the image's env and libraries are the image's; the spec is named only by an edit that explains it

PTX_BINARY = {("cuModuleLoadData", 0): 209}  # CUDA_ERROR_NO_BINARY_FOR_GPU: the JIT is disabled


@pytest.mark.parametrize("key,value,fail,blamed", [
    ("CUDA_VISIBLE_DEVICES", "", NO_DEVICE, True),
    ("CUDA_VISIBLE_DEVICES", "GPU-00000000-ffff-0000-0000-000000000000", NO_DEVICE, True),
    ("CUDA_DISABLE_PTX_JIT", "1", PTX_BINARY, True),
    # CUDA_VISIBLE_DEVICES cannot fail a PTX load
    ("CUDA_VISIBLE_DEVICES", "0", PTX_BINARY, False),
    # the probe matches GPUs by UUID: a device order changes nothing it depends on
    ("CUDA_DEVICE_ORDER", "PCI_BUS_ID", NO_DEVICE, False),
    # CUDA does not read NVIDIA_VISIBLE_DEVICES (a legacy runtime hook does: the runtime's, never the image's)
    ("NVIDIA_VISIBLE_DEVICES", "none", NO_DEVICE, False),
])
@pytest.mark.parametrize("source", ["image", "spec"])
def test_an_env_setting_is_the_image_s_unless_a_spec_edit_sets_it(node, key, value, fail, blamed, source):
    spec = full_spec()
    spec["containerEdits"]["env"] = [e for e in spec["containerEdits"]["env"] if not e.startswith(key + "=")]
    image_env = None
    if source == "spec":
        spec["containerEdits"]["env"].append("%s=%s" % (key, value))
        # an env no generator writes: undeclared, FAILED_AT_CDI before any container; declared, attributed as below
        gated, _gate = node.gated(spec)
        v = node_verdict(gated)
        assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_CDI", "cdi.trust.accounted", "cdi"), v["reason"]
        assert "env %s=%s: not accounted for" % (key, value) in v["reason"]
    else:
        image_env = {key: value}
    records = records_of(node, spec=spec, fail=fail, image_env=image_env,
                         trusted_edits=[{"env": key, "why": "the lab's"}] if source == "spec" else None)
    assert records["runtime"]["status"] == PASS and records["runtime"]["evidence"]["observed"]["env"][key] == value
    v = node_verdict(records)
    assert v["verdict"] == "FAILED_AT_COMPUTE" and v["because"] == []
    if not blamed:
        assert v["points_to"] == "compute", v["reason"]
        assert "no spec edit or image setting explains" in v["reason"]
    elif source == "image":
        assert v["points_to"] == "image", v["reason"]
        assert "the image sets %s=%s (no spec edit sets it)" % (key, value) in v["reason"]
    else:
        assert v["points_to"] == "cdi", v["reason"]
        assert "the spec's env %s=%s explains" % (key, value) in v["reason"]


@pytest.mark.parametrize("how", ["LD_LIBRARY_PATH", "LD_PRELOAD"])
def test_a_stub_the_image_puts_first_is_the_image_s(node, tmp_path, how):
    """The image's loader settings (not the spec's) put the toolkit stub first: the runtime applied every edit,
    the loader check FAILs, and it points at the image, naming the setting."""
    stub = compile_libcuda(str(tmp_path / "stub" / "libcuda.so.1"), 34)
    image_env = {"LD_LIBRARY_PATH": STUBS} if how == "LD_LIBRARY_PATH" else {"LD_PRELOAD": STUBS + "/libcuda.so.1"}
    records = records_of(node, fail={("cuInit", None): 34}, image_env=image_env,
                         image_files={STUBS + "/libcuda.so.1": stub})
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == FAIL and "stub resolved first" in loader["observed"], loader
    assert records["runtime"]["points_to"] == "image"
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.loader.libcuda", "image")
    assert "the image, not the spec, put that file first (the image sets " in v["reason"]
    assert "%s=%s" % (how, node.inside(STUBS)) in v["reason"]


def test_a_library_failure_of_a_file_the_spec_mounted_names_that_mount(node):
    """dlopen refused the file the spec mounted as libcuda.so.1 (not a library): the mount edit explains it."""
    cdi = node.cdi(full_spec())
    runtime, probe = node.run(cdi, compute=False)
    steps = probe_steps(no_libcuda=True, libcuda=node.inside(LIBCUDA_IN_CONTAINER))
    probe.update(emitted(steps), compute_requested=True)
    records = {"host": node.host, "cdi": cdi, "runtime": runtime, "compute": node.compute(probe, runtime)}
    assert records["compute"]["signature"] == "compute.dlopen.libcuda"
    v = node_verdict(records)
    assert v["points_to"] == "cdi", v["reason"]
    mount = [m for m in records["runtime"]["evidence"]["expected_edits"]["mounts"]
             if m["containerPath"] == node.inside(LIBCUDA_IN_CONTAINER)][0]
    assert "the spec's mount %s -> %s explains compute.dlopen.libcuda at dlopen" % (
        mount["hostPath"], mount["containerPath"]) in v["reason"]


# ---------------------------------------------------------------------------------------------------
# the runtime that did exactly what the spec said: a rule over the spec's edits and the runtime's words

EDITS = {
    "env": ["NVIDIA_VISIBLE_DEVICES=void"],
    "deviceNodes": [{"path": "/dev/nvidia0", "permissions": "rw"}, {"path": "/dev/fakegpu1", "permissions": "r"}],
    "mounts": [{"hostPath": "/opt/driver/lib", "containerPath": "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                "options": ["ro", "bind"]}],
    "hooks": [{"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "x"]}],
}


NO_OWN_HOOKS = {"known": True, "stages": {}, "source": "containers.conf: none; hooks_dir /usr/share/containers/oci/hooks.d", "why": None}


def _start_failure(words, engine_hooks=None, edits=None):
    engine_hooks = NO_OWN_HOOKS if engine_hooks is None else engine_hooks
    edits = EDITS if edits is None else edits
    b = LayerBuilder("runtime", RUNTIME_CHECKS)
    b.evidence = {"requested_devices": ["nvidia.com/gpu=0"], "expected_edits": edits, "engine_hooks": engine_hooks}
    b.add("runtime.engine.available", PASS, "podman", observed="podman 4.3.1")
    b.add("runtime.container.started", FAIL, "gpuprobe-x", observed=words)
    signature = classify_start_error(words)
    return b.build(signature=signature, points_to=RUNTIME_SIGNATURES[signature]["points_to"])


def _open_eperm(path):
    b = LayerBuilder("runtime", RUNTIME_CHECKS)
    b.evidence = {"requested_devices": ["nvidia.com/gpu=0"], "expected_edits": EDITS}
    b.add("runtime.container.started", PASS, "gpuprobe-x", observed="started")
    b.add("runtime.device_node.present", PASS, path, observed="char 195:1")
    b.add("runtime.device_node.open", FAIL, path, observed="EPERM (Operation not permitted) as uid 0, mode 0666, "
          "cgroup permissions %s" % [n for n in EDITS["deviceNodes"] if n["path"] == path][0]["permissions"])
    return b.build(signature="runtime.device_node.open.EPERM", points_to="runtime")


@pytest.mark.parametrize("words,edit", [
    # runc names the hook it ran by number: the engine adds no hook of its own (counted from its configuration)
    ("Error: OCI runtime error: runc: runc create failed: unable to start container process: error during container "
     "init: error running hook #0: error running hook: exit status 1, stdout: , stderr: boom: unknown",
     "hook createContainer /usr/bin/nvidia-cdi-hook"),
    ("Error: OCI runtime error: error running hook: fork/exec /usr/bin/nvidia-cdi-hook: exec format error",
     "hook createContainer /usr/bin/nvidia-cdi-hook"),
    # a directory mounted onto a file: the runtime mounted exactly what the spec asked
    ('Error: OCI runtime error: runc create failed: unable to start container process: error during container init: '
     'error mounting "/opt/driver/lib" to rootfs at "/usr/lib/x86_64-linux-gnu/libcuda.so.1": mount /opt/driver/lib:'
     '/usr/lib/x86_64-linux-gnu/libcuda.so.1 (via /proc/self/fd/7), flags: 0x5001: not a directory: unknown',
     "mount /opt/driver/lib -> /usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    # the container path, under the container's root directory
    ("Error: OCI runtime error: runc: mkdir /var/lib/containers/storage/overlay/9f/merged/usr/lib/x86_64-linux-gnu/"
     "libcuda.so.1: not a directory", "mount /opt/driver/lib -> /usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    ("Error: crun: error stat'ing file `/dev/fakegpu1`: No such device or address: OCI runtime attempted to invoke",
     "deviceNode /dev/fakegpu1 permissions r"),
])
def test_a_start_failure_naming_a_spec_edit_points_at_cdi_quoting_the_runtime(words, edit):
    v = node_verdict({"runtime": _start_failure(words)})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), v["reason"]
    assert "the runtime did what the spec said: %s; the runtime said: %s" % (edit, words) in v["reason"]


@pytest.mark.parametrize("words", [
    "Error: OCI runtime error: runc: unable to apply cgroup configuration: permission denied",
    "Error: crun: cannot set limits on /sys/fs/cgroup/memory: Read-only file system",
    "Error: OCI runtime error: error running hook #0: exit status 1",  # a hook, but the spec adds none (below)
    # the spec's node and mount named, but the runtime itself was refused (rootless mknod, an LSM)
    "Error: OCI runtime error: runc: error creating device nodes: mknod /dev/fakegpu1: operation not permitted",
    'Error: runc: error mounting "/opt/driver/lib" to rootfs at "/usr/lib/x86_64-linux-gnu/libcuda.so.1": permission denied',
])
def test_a_start_failure_naming_no_spec_edit_stays_the_runtime_s(words):
    record = _start_failure(words)
    if "hook" in words:
        record["evidence"]["expected_edits"] = dict(EDITS, hooks=[])
    v = node_verdict({"runtime": record})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime"), v["reason"]


RUNC_11 = ("Error: OCI runtime error: runc: runc create failed: unable to start container process: error during container "
           "init: error running hook #%d: error running hook: exit status 1, stdout: , stderr: %s")
RUNC_12 = ("Error: OCI runtime error: runc: runc create failed: unable to start container process: error during container "
           "init: error running %s hook #%d: error running hook: exit status 1, stdout: , stderr: ")
OWN_PRESTART = dict(NO_OWN_HOOKS, stages={"prestart": ["/usr/libexec/site/prestart-hook"]})
OWN_CREATE = dict(NO_OWN_HOOKS, stages={"createContainer": ["/usr/libexec/site/create-hook"]})
UNKNOWN_HOOKS = {"known": False, "stages": {}, "source": "docker", "why": "docker's own hooks are not read"}
TWO_HOOKS = dict(EDITS, hooks=[{"hookName": "createContainer", "path": "/usr/bin/true"},
                               {"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook"}])


@pytest.mark.parametrize("words, engine_hooks, edits, points_to, hook", [
    # the engine's own prestart hook beside the spec's createContainer hook: runc 1.1's "#0" may be either (issue 42)
    (RUNC_11 % (0, ""), OWN_PRESTART, EDITS, "runtime", None),
    # the engine's own hooks not known (docker adds its own, NRI plugins, a runtime handler): a number names none
    (RUNC_11 % (0, ""), UNKNOWN_HOOKS, EDITS, "runtime", None),
    # the failing hook's own output naming the spec hook's path is not the runtime's words
    (RUNC_11 % (0, "/usr/bin/nvidia-cdi-hook"), OWN_PRESTART, EDITS, "runtime", None),
    # runc 1.2 names the stage: the prestart hook is the engine's, the createContainer one the spec's
    (RUNC_12 % ("prestart", 0), OWN_PRESTART, EDITS, "runtime", None),
    (RUNC_12 % ("createContainer", 0), OWN_PRESTART, EDITS, "cdi", "hook createContainer /usr/bin/nvidia-cdi-hook"),
    # the engine's hooks come after the spec's in a stage (podman: CDI injection, then the hooks manager appends)
    (RUNC_11 % (1, ""), OWN_CREATE, TWO_HOOKS, "cdi", "hook createContainer /usr/bin/nvidia-cdi-hook"),
    (RUNC_11 % (2, ""), OWN_CREATE, TWO_HOOKS, "runtime", None),
    # a path the engine's own hook shares says nothing of whose hook failed; the number then decides
    ("Error: OCI runtime error: error running hook: fork/exec /usr/libexec/site/create-hook: no such file or directory",
     OWN_CREATE, dict(EDITS, hooks=[{"hookName": "createContainer", "path": "/usr/libexec/site/create-hook"}]), "runtime", None),
])
def test_a_hook_is_the_spec_s_only_when_it_is_one_the_spec_added(words, engine_hooks, edits, points_to, hook):
    v = node_verdict({"runtime": _start_failure(words, engine_hooks, edits)})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", points_to), v["reason"]
    if hook:
        assert "the runtime did what the spec said: %s; the runtime said" % hook in v["reason"], v["reason"]


@pytest.mark.parametrize("path,points_to", [("/dev/fakegpu1", "cdi"), ("/dev/nvidia0", "runtime")])
def test_eperm_is_the_spec_s_when_its_edit_asked_for_no_write(path, points_to):
    """EPERM on a node whose edit asks cgroup 'r': the runtime applied that (the spec's doing); EPERM on a node the
    spec granted rw: the runtime's."""
    v = node_verdict({"runtime": _open_eperm(path)})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", points_to), v["reason"]
    if points_to == "cdi":
        assert "deviceNode /dev/fakegpu1 permissions r; the runtime said: open(O_RDWR) EPERM" in v["reason"]


# ---------------------------------------------------------------------------------------------------
# the points_to domain

def test_image_is_a_points_to_value_and_an_unknown_one_is_malformed(node):
    assert "image" in POINTS_TO and set(("host", "cdi", "runtime", "compute")) <= set(POINTS_TO)
    record = _start_failure("Error: boom")
    assert validate_record(dict(record, points_to="image")) == []
    assert validate_record(dict(record, points_to="spec")) == ["unknown points_to 'spec'"]


def test_a_ptx_failure_is_not_put_on_the_libcuda_mount_but_on_the_jit_library_the_spec_mounted(node):
    """The spec mounts a PTX JIT 'library' that is no ELF file: the cdi layer WARNs on that mount before any
    container, and the PTX load failure names it, not the (good) libcuda mount."""
    with open(node.under("/usr/local/nvidia/lib64/libnvidia-ptxjitcompiler.so.%s" % node.host["versions"]["driver"]),
              "w") as f:
        f.write("not an ELF file\n")
    records = records_of(node, fail=JIT)
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_COMPUTE", "cdi"), v["reason"]
    assert [(b["check"], b["status"]) for b in v["because"]] == [("cdi.host.mount_source", WARN)]
    assert "libnvidia-ptxjitcompiler" in v["because"][0]["subject"] and "libcuda.so.1 ->" not in v["reason"]


# the review's class: no runtime evidence compares the edits (no runtime record, or it did not run the probe), so
# the runtime is never named by default; a cdi check that explains the failure names the spec
@pytest.mark.parametrize("runtime", ["absent", "not run"])
@pytest.mark.parametrize("cgroup_r,points_to", [(False, "compute"), (True, "cdi")])
def test_without_runtime_evidence_the_runtime_is_never_blamed(node, runtime, cgroup_r, points_to):
    spec = full_spec()
    if cgroup_r:
        for n in spec["devices"][0]["containerEdits"]["deviceNodes"]:
            n["permissions"] = "rm"
    records = records_of(node, spec=spec, fail={("cuInit", None): 100})
    assert records["compute"]["status"] == FAIL and records["compute"]["points_to"] == "runtime"  # its own guess
    if runtime == "absent":
        del records["runtime"]
    else:
        records["runtime"] = not_run("runtime", "not under test")
    v = node_verdict(records)
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_COMPUTE", points_to), v["reason"]
    assert ("cdi.nvidia.cgroup_write" in [b["check"] for b in v["because"]]) == cgroup_r
