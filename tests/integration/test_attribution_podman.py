"""Attribution from the cause with REAL podman + runc (issue 10): the three cases measured on the H200 with
node-style specs, reproduced with synthetic char devices, a compiled libcuda whose cuInit answers what the
driver answered there, and real CDI injection from /var/run/cdi. The cdi record comes from the cdi layer on
the same spec file; the node verdict is the real one.

The lab's files, synthetic device nodes and env stand in for a driver, and no NVIDIA generator writes them: the cdi
layer is told they are the site's declared trusted edits (trusted_edits, ``accounted.declaring``), as a site running
such a lab declares them; without that the node is FAILED_AT_CDI by cdi.trust.accounted and no container starts
(``_undeclared``). An edit a test adds as its subject that no GPU spec makes (the toolkit's stub on LD_LIBRARY_PATH, a
hook of its own) is FAILED_AT_CDI undeclared, and declared it runs the old path.
"""
import json
import os

import pytest

import verdictlab  # tests/conftest.py puts tests/unit/fixtures/host on sys.path
from accounted import declaring
from test_runtime_podman import LIB_IN_CONTAINER, Lab, idle_host, lab, podman_env, probe_image  # noqa: F401 pylint: disable=unused-import

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, LayerBuilder, validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration
STUBS = "/usr/local/cuda/lib64/stubs"


def _cdi_record(lab_, trusted_edits=None):
    record = _cdi_layer.record(spec_dirs=[os.path.dirname(lab_.spec_path)], discover_runtime_dirs_=False,
                               devices=[lab_.device], kinds=[lab_.device.split("=")[0]], trusted_edits=trusted_edits)
    assert validate_record(record) == []
    return record


def _unaccounted(cdi):
    return [c["observed"].split(": not accounted for: ")[0] for c in cdi["checks"]
            if c["id"] == "cdi.trust.accounted" and c["status"] == FAIL]


def _undeclared(lab_, trusted_edits=None):
    """The node of the spec written last on an idle host whose layer PASSed, its cdi layer given ``trusted_edits`` (none:
    the site declared nothing), as the node-side flow leaves it: (verdict, signature, the unaccounted edits), the gate's
    reason; no container is run."""
    host = LayerBuilder("host")
    host.evidence = idle_host()["evidence"]
    host = host.build(status=PASS)
    cdi = _cdi_record(lab_, trusted_edits)
    blocked = layer_gate({"host": host, "cdi": cdi})
    v = node_verdict(dict(gated(blocked), host=host, cdi=cdi) if blocked else {"host": host, "cdi": cdi})
    return (v["verdict"], v["signature"], _unaccounted(cdi)), blocked


def _node_edits(lab_, rc=100):
    """nvidia0, nvidiactl, nvidia-uvm (mem-driver numbers: open() works) and a libcuda whose cuInit says ``rc``."""
    lib = verdictlab.compile_libcuda(os.path.join(lab_.lib, "libcuda.so.1"), rc)
    return {
        "env": ["GPUPROBE_TEST=1"],
        "deviceNodes": [lab_.node("nvidia0", 1, 3), lab_.node("nvidiactl", 1, 5), lab_.node("nvidia-uvm", 1, 7)],
        "mounts": [{"hostPath": lib, "containerPath": LIB_IN_CONTAINER, "options": ["ro", "nosuid", "nodev", "bind"]},
                   {"hostPath": lab_.library("libnvidia-ptxjitcompiler.so.1"),
                    "containerPath": "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
                    "options": ["ro", "nosuid", "nodev", "bind"]}],
    }


def _records(lab_, edits, control=verdictlab.passing_control, trusted_edits=None):
    """The node's records; the cdi layer given ``trusted_edits``, by default every edit of the lab's (``declaring``)."""
    lab_.write_spec(edits)
    cdi = _cdi_record(lab_, declaring(edits) if trusted_edits is None else trusted_edits)
    # an idle GPU per the host's NVML evidence (without it the probe would not touch the GPU at all)
    runtime, probe = lab_.run(cdi["evidence"]["expected_edits"], host=idle_host())
    compute = _compute_layer.record(probe, runtime, host_record=idle_host(), host_runner=control, timeout=30)
    assert validate_record(compute) == []
    return {"cdi": cdi, "runtime": runtime, "compute": compute}


def _statuses(record, check_id):
    return [c["status"] for c in record["checks"] if c["id"] == check_id]


@pytest.fixture(autouse=True)
def tools():
    if not verdictlab.have_tools():
        pytest.skip("needs root and cc")


def test_spec_without_nvidiactl_points_at_cdi(lab):
    edits = _node_edits(lab)
    edits["deviceNodes"] = [n for n in edits["deviceNodes"] if n["path"] != "/dev/nvidiactl"]
    records = _records(lab, edits)
    assert _statuses(records["cdi"], "cdi.nvidia.nvidiactl") == [WARN]
    assert records["runtime"]["status"] == PASS, records["runtime"]["reason"]
    assert _statuses(records["runtime"], "runtime.loader.libcuda") == [PASS]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_NO_DEVICE"
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_COMPUTE", "compute.cuda.CUDA_ERROR_NO_DEVICE", "cdi")
    assert [(b["check"], b["observed"]) for b in v["because"]] == [("cdi.nvidia.nvidiactl", "absent")]
    (verdict, signature, _edits), gate = _undeclared(lab)  # the lab's stand-in driver undeclared
    assert (verdict, signature, gate) == ("FAILED_AT_CDI", "cdi.trust.accounted", "blocked by cdi FAIL")


def test_stub_first_on_the_library_path_fails_the_loader_check_and_points_at_cdi(lab):
    edits = _node_edits(lab)
    lab_driver = declaring(edits)
    stub = verdictlab.compile_libcuda(os.path.join(lab.lib, "stubs", "libcuda.so.1"), 34)
    edits["mounts"].append({"hostPath": stub, "containerPath": STUBS + "/libcuda.so.1", "options": ["ro", "bind"]})
    edits["env"].append("LD_LIBRARY_PATH=%s" % STUBS)
    # the toolkit's stub and the loader path to it are edits no generator writes: FAILED_AT_CDI, and no container runs
    lab.write_spec(edits)
    assert _undeclared(lab, lab_driver) == (("FAILED_AT_CDI", "cdi.trust.accounted", [
        "mount %s -> %s/libcuda.so.1" % (stub, STUBS), "env LD_LIBRARY_PATH=%s" % STUBS]), "blocked by cdi FAIL")
    # declared by the site, the same drill runs: the runtime's loader check FAILs and points at the spec, as it did
    records = _records(lab, edits)
    assert "WARN" in _statuses(records["cdi"], "cdi.nvidia.libcuda")
    loader = [c for c in records["runtime"]["checks"] if c["id"] == "runtime.loader.libcuda"][0]
    assert loader["status"] == FAIL
    assert loader["observed"].startswith("the CUDA toolkit stub resolved first: %s/libcuda.so.1" % STUBS)
    assert "LD_LIBRARY_PATH %s" % STUBS in loader["observed"]
    assert records["compute"]["signature"] == "compute.cuda.CUDA_ERROR_STUB_LIBRARY"
    v = node_verdict(records)
    assert (v["verdict"], v["signature"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime.loader.libcuda", "cdi")
    assert [b["check"] for b in v["because"]] == ["cdi.nvidia.libcuda"]


def test_spec_version_this_podman_cannot_read_is_unresolvable_and_points_at_cdi(lab):
    edits = _node_edits(lab)
    lab.write_spec(edits)
    with open(lab.spec_path) as f:
        text = f.read()
    with open(lab.spec_path, "w") as f:
        f.write(text.replace("cdiVersion: 0.5.0", "cdiVersion: 0.6.0"))
    cdi = _cdi_record(lab)
    runtime, probe = lab.run(cdi["evidence"]["expected_edits"], compute=False)
    assert probe is None and runtime["signature"] == "runtime.start.cdi_unresolvable"
    v = node_verdict({"cdi": cdi, "runtime": runtime})
    explaining = [c["id"] for c in cdi["checks"] if c["status"] in (WARN, FAIL) and c["id"].startswith(("cdi.spec", "cdi.resolve", "cdi.discovery"))]
    if cdi["status"] == FAIL:  # the cdi layer judged the version for this runtime: it says so first
        assert v["verdict"] == "FAILED_AT_CDI"
    else:
        assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi")
        assert [b["check"] for b in v["because"]] == explaining


# the runtime that did exactly what the spec said (issue 18): the runtime's own words name an edit of the spec


def _hook(lab_, exit_code):
    path = os.path.join(lab_.base, "hook.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\necho 'gpuprobe test hook refuses' >&2\nexit %d\n" % exit_code)
    os.chmod(path, 0o755)
    return path


def test_a_spec_hook_that_fails_is_the_spec_s_quoting_the_runtime(lab):
    edits = lab.full_edits()
    lab_driver = declaring(edits)
    hook = _hook(lab, 3)
    edits["hooks"] = [{"hookName": "createContainer", "path": hook, "args": ["hook.sh"]}]
    lab.write_spec(edits)
    # a hook of the spec's own is no edit a generator writes: FAILED_AT_CDI, the gate blocks, the hook never runs
    assert _undeclared(lab, lab_driver) == (("FAILED_AT_CDI", "cdi.trust.accounted", ["hook createContainer %s " % hook]),
                                            "blocked by cdi FAIL")
    # declared by the site, it runs: the runtime's words name the spec's hook, as they did
    cdi = _cdi_record(lab, declaring(edits))
    assert _statuses(cdi, "cdi.host.hook") == [PASS]  # it exists, root-owned and executable: only running it fails
    runtime, probe = lab.run(cdi["evidence"]["expected_edits"], compute=False)
    assert probe is None and runtime["status"] == FAIL
    words = [c for c in runtime["checks"] if c["id"] == "runtime.container.started"][0]["observed"]
    assert "hook" in words
    v = node_verdict({"cdi": cdi, "runtime": runtime})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), v["reason"]
    assert "the runtime did what the spec said: hook createContainer %s; the runtime said: %s" % (hook, words) in v["reason"]
    assert runtime["evidence"]["engine_hooks"]["known"] is True  # podman adds no hook of its own here (no hooks_dir file)
    assert node_verdict({"runtime": runtime})["points_to"] == "cdi"


def _own_hook_conf(tmp_path, failing):
    """A containers.conf (the test one, through CONTAINERS_CONF, never /etc) whose hooks_dir holds one OCI hook
    (oci-hooks(5)) that runs ``failing`` at prestart, for every container."""
    hooks = tmp_path / "hooks.d"
    hooks.mkdir()
    (hooks / "gpuprobe-test-own.json").write_text(json.dumps(
        {"version": "1.0.0", "hook": {"path": failing}, "when": {"always": True}, "stages": ["prestart"]}))
    base = os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF")
    text = open(base).read() if base else ""
    line = "hooks_dir = [%s]\n" % json.dumps(str(hooks))
    text = text.replace("[engine]\n", "[engine]\n" + line, 1) if "[engine]\n" in text else text + "\n[engine]\n" + line
    conf = tmp_path / "containers.conf"
    conf.write_text(text)
    return str(conf)


def test_a_failing_hook_of_podman_s_own_hooks_dir_is_the_runtime_s_beside_a_harmless_spec_hook(lab, tmp_path, monkeypatch):
    """runc 1.1 names the failing hook by its number in its stage only ("error running hook #0"): the engine's
    prestart hook #0 and the spec's createContainer hook #0 read alike, so the spec is not blamed (issue 42)."""
    failing = _hook(lab, 4)
    monkeypatch.setenv("CONTAINERS_CONF", _own_hook_conf(tmp_path, failing))
    edits = lab.full_edits()
    edits["hooks"] = [{"hookName": "createContainer", "path": "/usr/bin/true"}]
    lab.write_spec(edits)
    cdi = _cdi_record(lab)
    runtime, probe = lab.run(cdi["evidence"]["expected_edits"], compute=False)
    assert probe is None and runtime["status"] == FAIL
    words = [c for c in runtime["checks"] if c["id"] == "runtime.container.started"][0]["observed"]
    assert "error running hook #0" in words and "gpuprobe test hook refuses" in words, words  # the engine's hook ran
    v = node_verdict({"runtime": runtime})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime"), v["reason"]
    assert "the runtime did what the spec said" not in v["reason"]
    assert runtime["evidence"]["engine_hooks"]["known"] is True
    assert runtime["evidence"]["engine_hooks"]["stages"] == {"prestart": [failing]}
    v = node_verdict({"cdi": cdi, "runtime": runtime})
    if cdi["status"] != FAIL:  # (a cdi FAIL says its own first)
        assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "runtime"), v["reason"]


def test_a_mount_of_a_missing_path_is_the_spec_s_quoting_the_runtime(lab):
    edits = lab.full_edits()
    missing = os.path.join(lab.lib, "absent.so.1")
    edits["mounts"].append({"hostPath": missing, "containerPath": "/usr/lib/x86_64-linux-gnu/libabsent.so.1",
                            "options": ["ro", "nosuid", "nodev", "bind"]})
    lab.write_spec(edits)
    cdi = _cdi_record(lab)
    assert FAIL in _statuses(cdi, "cdi.host.mount_source")  # the cdi layer says so before any container starts
    runtime, probe = lab.run(cdi["evidence"]["expected_edits"], compute=False)
    assert probe is None and runtime["status"] == FAIL
    words = [c for c in runtime["checks"] if c["id"] == "runtime.container.started"][0]["observed"]
    assert node_verdict({"cdi": cdi, "runtime": runtime})["verdict"] == "FAILED_AT_CDI"
    # the runtime record alone (a caller without the cdi layer): the runtime's words name the spec's mount
    v = node_verdict({"runtime": runtime})
    assert (v["verdict"], v["points_to"]) == ("FAILED_AT_RUNTIME", "cdi"), v["reason"]
    assert "the runtime did what the spec said: mount %s -> /usr/lib/x86_64-linux-gnu/libabsent.so.1" % missing in v["reason"]
    assert words in v["reason"]
