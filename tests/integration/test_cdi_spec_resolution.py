"""The cdi layer end to end through the real modules (ansible-playbook): cdi_spec writes a real spec from a
host tree of synthetic char devices (mknod) and driver library files; cdi_facts resolves it and checks
every device node, mount and library on the host. Also one run in /var/run/cdi with a per-run name,
removed again, and the "spec that parses on a node without a GPU" drill."""
import json
import os
import shutil
import subprocess
import sys
import uuid

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS, WARN, validate_record

pytestmark = pytest.mark.integration
DRIVER = "580.159.04"


@pytest.fixture(scope="module", autouse=True)
def needs_root_and_ansible():
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    if not shutil.which("ansible-playbook", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")):
        pytest.skip("ansible-playbook not installed")


@pytest.fixture
def host_tree(tmp_path):
    return hostfixture.spec_host_tree(tmp_path / "host", (("/dev/nvidia0", 195, 0), ("/dev/nvidiactl", 195, 255),
                                                          ("/dev/nvidia-uvm", 238, 0), ("/dev/nvidia-uvm-tools", 238, 1)),
                                      version=DRIVER)


def _playbook(tmp_path, tasks):
    out = tmp_path / "out.json"
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": tasks + [
        {"name": "dump", "ansible.builtin.copy": {"content": "{{ {'spec': spec_result | default({}), "
                                                  "'cdi': ansible_facts.gpuprobe_cdi | default({}), "
                                                  "'removed': removed | default({})} | to_json }}",
                                                  "dest": str(out), "mode": "0600"}}]}]
    path = tmp_path / "play.json"
    path.write_text(json.dumps(play))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    exe = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    r = subprocess.run([exe, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return json.loads(out.read_text())


def _tasks(run_id, spec_dir, root, variant="full", devices=None):
    return [
        {"name": "write", "register": "spec_result", "gpuprobe.layers.cdi_spec": {
            "run_id": run_id, "spec_dir": spec_dir, "root": str(root), "driver_root": "/usr/local/nvidia", "variant": variant}},
        {"name": "check", "gpuprobe.layers.cdi_facts": {
            "spec_dirs": [spec_dir], "discover_runtime_dirs": False, "devices": devices or ["{{ spec_result.kind }}=0"],
            "host": {"evidence": {"nvml": {"driver_version": DRIVER}, "root": str(root), "driver_root": "/usr/local/nvidia",
                                  "device_nodes": {"/dev/nvidia0": {"exists": True, "type": "char", "major": 195, "minor": 0}}}}}},
        {"name": "remove", "register": "removed", "gpuprobe.layers.cdi_spec": {"run_id": run_id, "spec_dir": spec_dir, "state": "absent"}},
    ]


def test_self_built_spec_resolves_and_every_host_check_passes(tmp_path, host_tree):
    spec_dir = str(tmp_path / "cdi")
    out = _playbook(tmp_path, _tasks("it-full", spec_dir, host_tree))
    rec = out["cdi"]
    assert validate_record(rec) == [] and rec["status"] == PASS, rec["reason"]
    assert out["spec"]["changed"] is True and out["removed"]["changed"] is True
    assert not os.path.exists(out["spec"]["path"])
    ev = rec["evidence"]
    assert out["spec"]["kind"] == "gpuprobe.local/gpu-it-full"  # the run's own kind (I5)
    assert ev["requested_devices"] == ["gpuprobe.local/gpu-it-full=0"]
    nodes = dict((n["path"], (n["hostPath"], n["type"], n["major"], n["minor"])) for n in ev["expected_edits"]["deviceNodes"])
    assert nodes["/dev/nvidia0"] == (str(host_tree / "dev/nvidia0"), "c", 195, 0)
    assert nodes["/dev/nvidia-uvm"] == (str(host_tree / "dev/nvidia-uvm"), "c", 238, 0)
    host_checks = [c for c in rec["checks"] if c["id"].startswith("cdi.host.")]
    not_pass = [c for c in host_checks if c["status"] != PASS and c["id"] != "cdi.host.host_layer_match"]
    assert host_checks and not_pass == [], not_pass
    match = [c for c in host_checks if c["id"] == "cdi.host.host_layer_match" and c["subject"].startswith("/dev/nvidia0")]
    assert [c["status"] for c in match] == [PASS]
    assert ev["spec_digest"].startswith("sha256:") and rec["versions"]["cdi_spec"] == "0.5.0"


def test_stale_library_variant_fails_as_stale(tmp_path, host_tree):
    out = _playbook(tmp_path, _tasks("it-stale", str(tmp_path / "cdi"), host_tree, variant="stale_library"))
    rec = out["cdi"]
    assert rec["status"] == FAIL and rec["signature"] == "cdi.host.library_version" == out["spec"]["prediction"]["signature"]


def test_spec_on_a_node_without_gpu_fails_with_absent_nodes(tmp_path, host_tree):
    spec_dir = str(tmp_path / "cdi")
    out = _playbook(tmp_path, [
        {"name": "write", "register": "spec_result", "gpuprobe.layers.cdi_spec": {
            "run_id": "it-nogpu", "spec_dir": spec_dir, "root": str(host_tree), "driver_root": "/usr/local/nvidia"}},
        {"name": "the GPU goes away", "ansible.builtin.file": {"path": str(host_tree / "dev"), "state": "absent"}},
        {"name": "check", "gpuprobe.layers.cdi_facts": {
            "spec_dirs": [spec_dir], "discover_runtime_dirs": False, "devices": ["{{ spec_result.kind }}=0"]}},
    ])
    rec = out["cdi"]
    assert [c["status"] for c in rec["checks"] if c["id"] == "cdi.spec.parse"] == [PASS]
    assert rec["status"] == FAIL and rec["signature"] == "cdi.host.device_node"
    assert all(c["status"] == FAIL for c in rec["checks"] if c["id"] == "cdi.host.device_node")


def test_var_run_cdi_with_a_per_run_name_is_cleaned_up(tmp_path, host_tree):
    run_id = "it-%s" % uuid.uuid4().hex[:12]
    path = "/var/run/cdi/gpuprobe-%s.yaml" % run_id
    try:
        out = _playbook(tmp_path, _tasks(run_id, "/var/run/cdi", host_tree, devices=["{{ spec_result.kind }}=all"]))
        assert out["spec"]["path"] == path
        assert out["cdi"]["evidence"]["device_sources"] == {"gpuprobe.local/gpu-%s=all" % run_id: path}
        assert out["cdi"]["status"] in (PASS, WARN), out["cdi"]["reason"]
        assert not os.path.exists(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)
