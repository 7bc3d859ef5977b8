"""Runtime + compute layers on a real GPU (the lead runs this on the H200: GPUPROBE_GPU=1).

For each self-built spec variant (``_cdi.spec.VARIANTS``, the fault drills of docs/usage.md): write the spec under
/var/run/cdi, run the cdi layer for the expected edits, start the probe container through podman with the CDI device (compute
steps included), build the compute record with the host control, and compute the node verdict. Each
variant must land in the layer and signature that the variant's entry predicts. The records are written,
untouched, as JSON to $GPUPROBE_EVIDENCE_DIR/<variant>.json when that is set.

Trust is an allowlist (cdi.trust.accounted): the self-built spec's edits are accounted for as the generators' shapes.
A variant whose spec holds an edit no GPU spec makes (stub_libcuda: the toolkit's stub is no file of the driver) is
FAILED_AT_CDI and run with the node's gate (run_variant(gate=True): no container); a test whose subject comes after
the allowlist (the stub first on LD_LIBRARY_PATH) declares its own edits (run_variant(trusted_edits=...)), as a site
would, so that the probe runs and the verdict says what it rests on.

Environment: GPUPROBE_GPU=1 (else skipped), GPUPROBE_PROBE_IMAGE (default localhost/gpuprobe-probe:local, the
verify_probe_image default), GPUPROBE_DRIVER_ROOT (default /usr/local/nvidia), GPUPROBE_EVIDENCE_DIR (optional).
"""
import json
import os
import uuid

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SELF_BUILT_SPEC_DIR
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import layer as _host
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.args import VERIFY_NODE_ARGSPEC
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

# the collection's own default (verify_probe_image), the image scripts/build-probe-image.sh builds and gpu-e2e.sh uses
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", VERIFY_NODE_ARGSPEC["probe_image"]["default"])
DRIVER_ROOT = os.environ.get("GPUPROBE_DRIVER_ROOT", "/usr/local/nvidia")
SPEC_DIR = SELF_BUILT_SPEC_DIR
EVIDENCE_DIR = os.environ.get("GPUPROBE_EVIDENCE_DIR")
TRUST = "cdi.trust.accounted"


@pytest.fixture(scope="module")
def host_record():
    # every run has its own kind now, so leftovers cannot conflict with ours; still sweep what interrupted
    # runs left (only what is over: owner gone, or older than an hour)
    if os.path.isdir(SPEC_DIR):
        _cdi_spec.sweep_specs(SPEC_DIR)
    record = _host.record(driver_root=DRIVER_ROOT)
    _save("host", {"host": record})
    assert record["status"] != "FAIL", record["reason"]
    return record


def _save(name, records):
    if not EVIDENCE_DIR:
        return
    os.makedirs(EVIDENCE_DIR, exist_ok=True)
    with open(os.path.join(EVIDENCE_DIR, "%s.json" % name), "w") as f:
        json.dump(records, f, indent=2, sort_keys=True, default=str)


def run_variant(variant, host, user=None, edit=None, name=None, engine=None, trusted_edits=None, gate=False):
    """All four layers for one spec variant (``edit``: a change made to its spec first, saved as ``name``);
    returns the records and the verdict (and saves them). ``engine``: runtime_facts' runtime options (runtime,
    runtime_endpoint, cri_descriptor), podman when not given. ``trusted_edits``: the site's declared trusted edits,
    given to the cdi layer (a test whose spec adds edits of its own declares them, so that what it exercises comes
    after the allowlist, cdi.trust.accounted). ``gate``: apply the node's gate (``_node.gate.layer_gate``) as the node
    does, so that after a host or cdi FAIL no container starts (runtime and compute NOT_RUN, probe None); without it
    the probe runs past the gate, for the drills that show what the runtime and the GPU then do."""
    engine = engine or {"runtime": "podman"}
    run_id = "gpu-%s-%s" % (variant.replace("_", "-"), uuid.uuid4().hex[:6])
    try:
        spec = _cdi_spec.build_spec(run_id, variant=variant, driver_root=DRIVER_ROOT, host=host)
    except _cdi_spec.SpecError as exc:
        pytest.skip("variant %s cannot be built here: %s" % (variant, exc))
    if edit is not None:
        edit(spec)
    device = "%s=0" % spec["kind"]  # the run's own kind
    _cdi_spec.write_spec(spec, SPEC_DIR, run_id)
    probe, blocked = None, ""
    try:
        cdi = _cdi_layer.record(spec_dirs=[SPEC_DIR], discover_runtime_dirs_=False, devices=[device], host=host,
                                trusted_edits=trusted_edits)
        blocked = layer_gate({"host": host, "cdi": cdi}) if gate else ""
        if blocked:
            runtime, compute = gated(blocked)["runtime"], gated(blocked)["compute"]
        else:
            runtime, probe = _runtime_layer.record(dict(engine, **{
                "run_id": run_id, "image": IMAGE, "cdi_devices": [device], "timeout": 60,
                "expected_edits": cdi["evidence"]["expected_edits"], "compute": True, "host": host, "user": user}))
            compute = _compute_layer.record(probe, runtime, host_record=host, host_control=True, timeout=60)
    finally:
        _cdi_spec.remove_spec(SPEC_DIR, run_id)
        leftovers = _runtime_cleanup.cleanup(run_id=run_id, runtime=engine["runtime"], spec_dir=SPEC_DIR,
                                             endpoint=engine.get("runtime_endpoint"), descriptor=engine.get("cri_descriptor"))
    records = {"host": host, "cdi": cdi, "runtime": runtime, "compute": compute}
    verdict = node_verdict(records)
    _save(name or variant, {"variant": name or variant, "prediction": _cdi_spec.prediction(variant), "user": user,
                            "engine": dict((runtime.get("evidence") or {}).get("engine") or {}, options=engine),
                            "trusted_edits": trusted_edits, "gate": blocked or ("passed" if gate else "not applied"),
                            "records": dict(records, probe=probe), "verdict": verdict, "cleanup": leftovers})
    for layer in ("cdi", "runtime", "compute"):
        assert validate_record(records[layer]) == [], layer
    assert leftovers["containers"] == [] and leftovers["errors"] == [], leftovers
    if compute["status"] == "NOT_RUN" and "GPU in use" in compute["reason"]:
        pytest.skip(compute["reason"])
    return records, probe, verdict


def trust_checks(record):
    """The cdi record's cdi.trust.accounted checks."""
    return [c for c in record["checks"] if c["id"] == TRUST]


def assert_accounted(records, declared=False):
    """cdi.trust.accounted PASSed for the requested device: every edit as NVIDIA's generators write it, or (``declared``)
    some declared trusted by the site, said so in the check."""
    checks = trust_checks(records["cdi"])
    assert [c["status"] for c in checks] == ["PASS"], checks
    assert ("declared trusted by the site" in checks[0]["observed"]) == declared, checks[0]["observed"]
    return checks[0]


def _failed_call(compute):
    steps = compute["evidence"]["container"]["steps"]
    failed = [s for s in steps if not s.get("ok")]
    return failed[0]["step"] if failed else None


def test_full_spec_compute_verified(host_record):
    records, probe, verdict = run_variant("full", host_record)
    runtime, compute = records["runtime"], records["compute"]
    assert runtime["status"] == "PASS", runtime["reason"]
    assert compute["status"] == "PASS", compute["reason"]
    verify = [s for s in compute["evidence"]["container"]["steps"] if s["step"] == "verify"]
    assert verify and verify[0]["ok"] and verify[0]["checked"] == 1024 and verify[0]["mismatches"] == 0
    assert compute["evidence"]["container"]["executed"] and compute["evidence"]["container"]["cdi_devices"]
    assert compute["evidence"]["host_control"]["status"] == "PASS"
    rows = compute["evidence"]["gpus"]  # one row per GPU the container saw, each verified on its own
    assert rows and all(r["status"] == "PASS" and r["uuid"] and r["seen_in_container"] for r in rows), rows
    assert compute["evidence"]["host_control"]["only_uuids"] == [r["uuid"] for r in rows]
    loaded = probe["inventory"]["libraries"]["libcuda.so.1"]
    assert loaded["ok"] and os.path.basename(loaded["realpath"]).startswith("libcuda.so.")
    assert probe["nvml"]["ok"], "NVML should work in the full spec's container"
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert verdict["gpus"] and all(r["status"] == "PASS" for r in verdict["gpus"] if r["expected"]), verdict["gpus"]
    assert [c["status"] for c in runtime["checks"] if c["id"] == "runtime.loader.libcuda"] == ["PASS"]
    # every edit of the self-built spec is one the allowlist accounts for, none on the site's word
    assert_accounted(records)
    assert "declared trusted" not in verdict["reason"], verdict["reason"]


def test_no_ptxjit_mount_jit_compiler_not_found(host_record):
    records, _probe, verdict = run_variant("no_ptxjit_mount", host_record)
    compute = records["compute"]
    assert records["runtime"]["status"] == "PASS", records["runtime"]["reason"]
    assert compute["signature"] == "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND", compute["reason"]
    assert _failed_call(compute) == "cuModuleLoadData"
    assert compute["points_to"] == "runtime"  # the host control passed
    assert verdict["verdict"] == "FAILED_AT_COMPUTE"
    # the runtime applied every edit and the host control passed: the spec is the cause, and cdi says which check
    assert (verdict["points_to"], [b["check"] for b in verdict["because"]]) == ("cdi", ["cdi.nvidia.ptxjit"]), verdict


def test_no_uvm_node_unknown_error_with_hint(host_record):
    records, probe, verdict = run_variant("no_uvm_node", host_record)
    compute = records["compute"]
    assert records["runtime"]["status"] == "PASS", records["runtime"]["reason"]
    assert compute["signature"] == "compute.cuda.CUDA_ERROR_UNKNOWN", compute["reason"]
    assert _failed_call(compute) == "cuInit"
    assert "/dev/nvidia-uvm absent" in compute["reason"]
    assert probe["nvml"]["ok"], "NVML works while CUDA fails"
    assert compute["points_to"] == "runtime"
    assert verdict["verdict"] == "FAILED_AT_COMPUTE"
    assert (verdict["points_to"], [b["check"] for b in verdict["because"]]) == ("cdi", ["cdi.nvidia.uvm"]), verdict


def test_cgroup_read_only_open_eperm_then_no_device(host_record):
    records, _probe, verdict = run_variant("cgroup_read_only", host_record)
    assert records["runtime"]["signature"] == "runtime.device_node.open.EPERM", records["runtime"]["reason"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE", records["compute"]["reason"]
    assert verdict["verdict"] == "FAILED_AT_RUNTIME"
    assert (verdict["points_to"], [b["check"] for b in verdict["because"]]) == ("cdi", ["cdi.nvidia.cgroup_write"]), verdict


def test_stub_libcuda(host_record):
    """The toolkit's stub mounted as libcuda.so.1 is no file of the driver: an unaccounted edit, FAILED_AT_CDI by
    cdi.trust.accounted as the variant predicts, and the node's gate starts no container (what the stub does in a
    container, CUDA_ERROR_STUB_LIBRARY, is test_stub_first_on_the_library_path..., with the stub declared)."""
    records, probe, verdict = run_variant("stub_libcuda", host_record, gate=True)
    prediction = _cdi_spec.prediction("stub_libcuda")
    fails = [c for c in trust_checks(records["cdi"]) if c["status"] == "FAIL"]
    assert len(fails) == 1 and "-> /usr/local/nvidia/lib64/libcuda.so.1" in fails[0]["observed"], fails
    assert "stubs" in fails[0]["observed"] and "not accounted for" in fails[0]["observed"], fails
    assert (verdict["verdict"], verdict["layer"], verdict["signature"], verdict["points_to"]) == (
        "FAILED_AT_CDI", prediction["layer"], prediction["signature"], "cdi"), verdict
    assert probe is None
    assert (records["runtime"]["status"], records["runtime"]["reason"]) == ("NOT_RUN", "blocked by cdi FAIL")


def test_file_mode_0000_as_uid_1000(host_record):
    """The variant's prediction: compute passes. Seen on the H200 (2026-12-02): podman+runc DID apply fileMode 0000
    (open() as uid 1000 -> EACCES), and CUDA still initialised and ran the kernel. The runtime layer reports the
    denied open as a WARN (the spec asked for that mode), so the node is COMPUTE_VERIFIED with a runtime WARN."""
    records, _probe, verdict = run_variant("file_mode_0000", host_record, user="1000:1000")
    runtime = records["runtime"]
    modes = [c for c in runtime["checks"] if c["id"] == "runtime.device_node.mode"]
    assert modes, "the fileMode was not compared"
    assert runtime["status"] == "WARN", runtime["reason"]
    if all(c["status"] == "PASS" for c in modes):  # the mode was applied: the non-root open is denied by it
        opens = [c for c in runtime["checks"] if c["id"] == "runtime.device_node.open" and c["subject"] == "/dev/nvidia0"]
        assert opens and opens[0]["status"] == "WARN" and "EACCES" in opens[0]["observed"], opens
    assert records["compute"]["status"] == "PASS", records["compute"]["reason"]
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict


@pytest.mark.parametrize("variant,cdi_signature", [("missing_hostpath", "cdi.host.mount_source"),
                                                   ("stale_library", "cdi.host.library_version")])
def test_missing_host_path_never_starts(host_record, variant, cdi_signature):
    records, probe, verdict = run_variant(variant, host_record)
    assert records["runtime"]["signature"] == "runtime.start.hostpath_missing", records["runtime"]["reason"]
    assert probe is None
    assert records["compute"]["status"] == "NOT_RUN"
    assert records["cdi"]["status"] == "FAIL" and verdict["verdict"] == "FAILED_AT_CDI"
    assert verdict["signature"] == cdi_signature, verdict
    # the mount whose source is missing is no file of the driver either: the allowlist names it too (after the host check)
    fails = [c for c in trust_checks(records["cdi"]) if c["status"] == "FAIL"]
    assert len(fails) == 1 and "cannot be read" in fails[0]["observed"], fails


# issue 10: node-style specs whose failure the spec causes, measured on this host before attribution followed
# the cause (they pointed at runtime with a generic hint)

def _drop_nvidiactl(spec):
    edits = spec["containerEdits"]
    edits["deviceNodes"] = [n for n in edits["deviceNodes"] if n["path"] != "/dev/nvidiactl"]


def test_spec_without_nvidiactl_points_at_cdi(host_record):
    records, _probe, verdict = run_variant("full", host_record, edit=_drop_nvidiactl, name="no_nvidiactl")
    assert records["runtime"]["status"] in ("PASS", "WARN"), records["runtime"]["reason"]
    assert records["compute"]["status"] == "FAIL", records["compute"]["reason"]
    assert verdict["verdict"] == "FAILED_AT_COMPUTE", verdict
    assert (verdict["points_to"], [b["check"] for b in verdict["because"]]) == ("cdi", ["cdi.nvidia.nvidiactl"]), verdict


STUBS_IN_CONTAINER = "/usr/local/cuda/lib64/stubs"


def _stub_first_on_the_library_path(spec):
    stub = os.environ.get("GPUPROBE_STUB_LIBCUDA")
    if not stub:
        pytest.skip("no CUDA toolkit stub libcuda here (GPUPROBE_STUB_LIBCUDA)")
    edits = spec["containerEdits"]
    edits["mounts"].append({"hostPath": stub, "containerPath": STUBS_IN_CONTAINER + "/libcuda.so.1",
                            "options": ["ro", "nosuid", "nodev", "bind"]})
    edits["env"] = ["LD_LIBRARY_PATH=%s:%s" % (STUBS_IN_CONTAINER, e.split("=", 1)[1]) if e.startswith("LD_LIBRARY_PATH=")
                    else e for e in edits["env"]]


def _stub_declared():
    """The stub's mount and the LD_LIBRARY_PATH that puts its directory first: no GPU spec's edits, declared here so
    that the probe runs and the runtime's loader check is what is judged."""
    return [{"hostPath": os.environ.get("GPUPROBE_STUB_LIBCUDA") or "-", "containerPath": STUBS_IN_CONTAINER + "/libcuda.so.1",
             "why": "test: the CUDA toolkit's stub first on the library path"},
            {"env": "LD_LIBRARY_PATH", "why": "test: the stubs' directory first"}]


def test_stub_first_on_the_library_path_fails_the_loader_check_and_points_at_cdi(host_record):
    records, probe, verdict = run_variant("full", host_record, edit=_stub_first_on_the_library_path, name="stub_first",
                                          trusted_edits=_stub_declared())
    assert_accounted(records, declared=True)
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"]
    assert [c["status"] for c in loader] == ["FAIL"], loader
    assert STUBS_IN_CONTAINER + "/libcuda.so.1" in loader[0]["observed"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_STUB_LIBRARY", records["compute"]["reason"]
    assert (verdict["verdict"], verdict["signature"], verdict["points_to"]) == (
        "FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi"), verdict
    assert [b["check"] for b in verdict["because"]] == ["cdi.nvidia.libcuda"], verdict
