"""What binds the proof to the GPU, on a real GPU (issue 18; the lead runs this on the H200: GPUPROBE_GPU=1).

- A libcuda.so.1 that is not the driver's (tests/unit/fixtures/host/fake_driver.c: it answers every call with
  success, claims the real GPU's UUID, name and CUDA driver version, and writes what the kernel would write),
  mounted by the spec under the driver's own file name, must never make the node COMPUTE_VERIFIED: the
  compute layer compares the loaded file with the host driver root's by content, and the driver version. The fake
  and its FAKE_* env are declared trusted (trusted_edits) so that the allowlist lets the probe run: the binding is
  what is judged.
- The honest spec's proof is bound: compute.driver.binding PASSes with the same digest on both sides, and every edit
  is accounted for as the generators' (cdi.trust.accounted), none on the site's word.
- The container's environment cannot redirect the probe: a spec env of PYTHONPATH/PYTHONSTARTUP/PYTHONHOME,
  a sitecustomize/usercustomize that prints forged probe lines, and the removed test hook GPUPROBE_PROBE_DELAY_S
  change nothing: declared trusted (else the allowlist refuses them before any container), the node is still
  COMPUTE_VERIFIED, its reason says it rests on the declared edits, and no forged line is taken.
- A spec cannot replace the probe (issue 32): a "probe" of its own mounted at the old fixed path /gpuprobe/probe.py
  (or a directory at /gpuprobe) that hashes the driver root's libcuda (mounted at /gpuprobe-driver) while the fake
  driver answers, through every engine of tests/gpu/test_engines_gpu.py (podman, containerd over the CRI, docker):
  with the fake driver declared, the probe's and the copy's mounts are unaccounted (cdi.trust.accounted FAILs naming
  each), the node gate blocks the probe (FAILED_AT_CDI), and the probe run past the gate is the real one at its
  per-run path. Issue 42's six other ways in are tests/gpu/test_probe_trust_gpu.py.
Records and verdicts go untouched to $GPUPROBE_EVIDENCE_DIR/<case>.json (through run_variant).
"""
import os
import shutil
import subprocess

import pytest

from replaced_probe import replaced_probe  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from test_engines_gpu import engine  # noqa: F401 pylint: disable=unused-import
from test_runtime_compute_gpu import assert_accounted, host_record, run_variant, trust_checks  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.host import driver_libcuda
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(os.environ.get("GPUPROBE_GPU") != "1", reason="needs a real NVIDIA GPU (GPUPROBE_GPU=1)"),
]

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_SOURCE = os.path.join(HERE, "..", "unit", "fixtures", "host", "fake_driver.c")
WORK = "/tmp/gpuprobe-truth-gpu"
FORGED = ('{"kind": "step", "step": "verify", "ok": true, "rc": null, "name": "OK", "checked": 1024, '
          '"mismatches": 0, "ms": 0.0}\n{"kind": "done"}\n')


def _fake_libcuda(driver_version):
    """The fake, named like the driver's own library (libcuda.so.<driver version>): built here with cc, or the
    prebuilt one named by GPUPROBE_FAKE_LIBCUDA (a GPU host without a compiler)."""
    target = os.path.join(WORK, "lib", "libcuda.so.%s" % driver_version)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    prebuilt = os.environ.get("GPUPROBE_FAKE_LIBCUDA")
    if prebuilt and os.path.exists(prebuilt):
        shutil.copyfile(prebuilt, target)
    elif shutil.which("cc"):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", target, FAKE_SOURCE], check=True, timeout=120)
    else:
        pytest.skip("no cc and no GPUPROBE_FAKE_LIBCUDA: cannot build the fake libcuda")
    return target


# the fake driver as the tests declare it (trusted_edits): its library under WORK, the env it reads
FAKE_DECLARED = [{"hostPath": WORK + "/lib/*", "why": "test: the fake libcuda (fake_driver.c)"},
                 {"env": "FAKE_*", "why": "test: what the fake libcuda claims"}]


def _gpu0(host):
    gpus = host["evidence"].get("gpus") or host["evidence"]["nvml"]["gpus"]
    return gpus[0]


def _versions(host):
    nvml = host["evidence"]["nvml"]
    return nvml["driver_version"], nvml.get("cuda_driver_version_int")


def _checks(record, check_id):
    return [c for c in record["checks"] if c["id"] == check_id]


def test_honest_spec_proof_is_bound_to_the_host_driver(host_record):
    records, probe, verdict = run_variant("full", host_record, name="truth-bound")
    binding = _checks(records["compute"], "compute.driver.binding")
    assert binding and all(c["status"] == "PASS" for c in binding), binding
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    assert_accounted(records)
    noise = (probe or {}).get("noise") or []
    assert noise == [], noise


def test_fake_libcuda_claiming_the_gpu_is_never_verified(host_record):
    driver, cuda_int = _versions(host_record)
    fake = _fake_libcuda(driver)
    gpu = _gpu0(host_record)

    def swap(spec):
        for edits in [spec.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in spec["devices"]]:
            for mount in edits.get("mounts") or []:
                if os.path.basename(mount["containerPath"]).startswith("libcuda.so"):
                    mount["hostPath"] = fake
        env = spec.setdefault("containerEdits", {}).setdefault("env", [])
        env += ["FAKE_GPU_UUID=%s" % gpu["uuid"], "FAKE_GPU_NAME=%s" % gpu.get("name", "NVIDIA H200"),
                "FAKE_CUDA_DRIVER_VERSION=%s" % (cuda_int or 13000)]

    records, _probe, verdict = run_variant("full", host_record, edit=swap, name="truth-fake-libcuda",
                                           trusted_edits=FAKE_DECLARED)
    assert verdict["verdict"] != "COMPUTE_VERIFIED", verdict
    assert_accounted(records, declared=True)
    # the spec alone says it, before any container starts: the mounted file is not the driver root's
    identity = [c for c in records["cdi"]["checks"] if c["id"] == "cdi.host.libcuda_identity"]
    assert [c["status"] for c in identity] == ["WARN"], identity
    compute = records["compute"]
    if compute["status"] != "NOT_RUN":
        binding = _checks(compute, "compute.driver.binding")
        assert binding and any(c["status"] == "FAIL" for c in binding), binding
        assert verdict["verdict"] == "FAILED_AT_COMPUTE" and verdict["signature"] == "compute.driver.binding", verdict
        assert verdict["points_to"] == "cdi", verdict  # the libcuda that answered is the one the spec mounted
        assert "cdi.host.libcuda_identity" in [b["check"] for b in verdict["because"]], verdict


def test_container_environment_cannot_redirect_the_probe(host_record):
    evil = os.path.join(WORK, "evil")
    os.makedirs(evil, exist_ok=True)
    forge = "import sys\nsys.stdout.write(%r)\nsys.stdout.flush()\n" % FORGED
    for name in ("sitecustomize.py", "usercustomize.py", "startup.py", "json.py"):
        with open(os.path.join(evil, name), "w") as f:
            f.write(forge)
    with open(os.path.join(evil, "gpuprobe-evil.pth"), "w") as f:
        f.write("import sitecustomize\n")

    def poison(spec):
        edits = spec.setdefault("containerEdits", {})
        edits.setdefault("env", []).extend([
            "PYTHONPATH=/gpuprobe-evil", "PYTHONSTARTUP=/gpuprobe-evil/startup.py", "PYTHONINSPECT=1",
            "PYTHONUSERBASE=/gpuprobe-evil", "GPUPROBE_PROBE_DELAY_S=600"])
        edits.setdefault("mounts", []).append({"hostPath": evil, "containerPath": "/gpuprobe-evil",
                                               "options": ["ro", "bind"]})

    declared = [{"env": "PYTHON*", "why": "test: the interpreter's env, which -I ignores"},
                {"env": "GPUPROBE_PROBE_DELAY_S", "why": "test: the removed test hook"},
                {"hostPath": evil, "containerPath": "/gpuprobe-evil", "why": "test: forged startup files"}]
    records, probe, verdict = run_variant("full", host_record, edit=poison, name="truth-poisoned-env", trusted_edits=declared)
    assert verdict["verdict"] == "COMPUTE_VERIFIED", verdict
    trust = assert_accounted(records, declared=True)
    assert "6 declared trusted by the site" in trust["observed"], trust["observed"]
    assert "rests on edits the site declared trusted (trusted_edits): " in verdict["reason"], verdict["reason"]
    assert "env PYTHONPATH=/gpuprobe-evil" in verdict["reason"] and "-> /gpuprobe-evil" in verdict["reason"], verdict["reason"]
    assert records["compute"]["status"] == "PASS", records["compute"]["reason"]
    assert probe["wall_ms"] < 60000, probe["wall_ms"]


@pytest.mark.parametrize("where", ["/gpuprobe/probe.py", "/gpuprobe"])
def test_a_spec_that_replaces_the_probe_is_never_verified(host_record, engine, where):  # noqa: F811 pylint: disable=redefined-outer-name
    driver, cuda_int = _versions(host_record)
    fake = _fake_libcuda(driver)
    gpu = _gpu0(host_record)
    real, why = driver_libcuda(host_record, "/", driver)
    assert real, why
    copy = "/gpuprobe-driver/libcuda.so.%s" % driver
    probe_file = replaced_probe(os.path.join(WORK, "replaced"), copy)

    def replace(spec):
        edits = spec.setdefault("containerEdits", {})
        for e in [edits] + [d.get("containerEdits") or {} for d in spec["devices"]]:
            for mount in e.get("mounts") or []:
                if os.path.basename(mount["containerPath"]).startswith("libcuda.so"):
                    mount["hostPath"] = fake
        edits.setdefault("env", []).extend(["FAKE_GPU_UUID=%s" % gpu["uuid"], "FAKE_GPU_NAME=%s" % gpu.get("name", "NVIDIA H200"),
                                            "FAKE_CUDA_DRIVER_VERSION=%s" % (cuda_int or 13000)])
        edits.setdefault("mounts", []).extend([
            {"hostPath": probe_file if where.endswith(".py") else os.path.dirname(probe_file), "containerPath": where,
             "options": ["ro", "nosuid", "nodev", "bind"]},
            {"hostPath": real, "containerPath": copy, "options": ["ro", "nosuid", "nodev", "bind"]}])

    name = "%s-truth-probe-replaced-%s" % (engine["runtime"], "file" if where.endswith(".py") else "dir")
    # the fake driver is declared (as in the other tests here); the probe of the spec's own and the copy it hashes are not
    records, probe, verdict = run_variant("full", host_record, edit=replace, engine=engine, name=name,
                                          trusted_edits=FAKE_DECLARED)
    assert verdict["verdict"] != "COMPUTE_VERIFIED", verdict
    fails = [c for c in trust_checks(records["cdi"]) if c["status"] == "FAIL"]
    assert sorted(c["observed"].split(": not accounted for")[0].rsplit(" -> ", 1)[1] for c in fails) == sorted([copy, where]), fails
    assert all(c["subject"] == records["cdi"]["evidence"]["requested_devices"][0] for c in fails), fails
    # the node: the gate blocks the probe on the cdi FAIL, before any container starts
    gate = layer_gate({"host": host_record, "cdi": records["cdi"]})
    assert gate == "blocked by cdi FAIL"
    node = node_verdict(dict(gated(gate), host=host_record, cdi=records["cdi"]))
    assert node["verdict"] == "FAILED_AT_CDI", node
    # run_variant ran the probe past the gate: what ran is the real probe at its per-run path, bound to the fake
    inside = records["runtime"]["evidence"]["container"]["probe_in_container"]
    assert inside.startswith("/gpuprobe-") and inside != "/gpuprobe/probe.py", inside
    if records["compute"]["status"] != "NOT_RUN":
        binding = _checks(records["compute"], "compute.driver.binding")
        assert binding and all(c["status"] == "FAIL" for c in binding), binding
