"""The layers run by an unprivileged user (docs/privileges.md), through Ansible as on a fleet: the controller
(root here) connects locally and becomes ``nobody`` (become_method su, pipelining: the module is piped to a
Python that ``nobody`` can execute, no temporary file to share). Each test first needs that the module
really ran as uid 65534 (the ``nobody_ansible`` fixture proves it with ``id -u``).

What must hold without root: the host layer reads what it needs; the cdi layer reads world-readable specs;
the runtime layer is NOT_RUN with the runtime's own reason when no usable (rootless) runtime exists; writing a
self-built spec under /var/run/cdi fails with "Permission denied" and writes nothing; a whole verify run
finishes with an honest report (cdi NOT_RUN naming the denied write, runtime/compute blocked), never a crash
and never a PASS by inference. The node is a fixture tree (real mknod devices) in a directory ``nobody`` can
traverse; NVML is off (no GPU here).
"""
import glob
import json
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import uuid

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _runs_as_nobody(argv):
    """Whether ``argv`` runs as nobody, switched to the way Ansible's become does it (su)."""
    r = subprocess.run(["su", "-s", "/bin/sh", "nobody", "-c", " ".join(shlex.quote(a) for a in argv)],
                       capture_output=True, text=True, check=False, timeout=60)
    return r.returncode == 0


class Nobody(object):
    """Runs gpuprobe.layers modules and playbooks as ``nobody`` through Ansible's become."""

    def __init__(self, base, python, site):
        self.base = base
        self.python = python
        self.site = site
        self.env = dict(os.environ, ANSIBLE_PIPELINING="1", ANSIBLE_REMOTE_TMP=os.path.join(base, "remote-tmp"),
                        ANSIBLE_BECOME_FLAGS="-s /bin/sh",  # nobody's login shell is nologin
                        ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
                        ANSIBLE_DEPRECATION_WARNINGS="0", ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_NOCOLOR="1")
        self.env.pop("ANSIBLE_CALLBACKS_ENABLED", None)

    def interpreter(self):
        return "/usr/bin/env PYTHONPATH=%s %s" % (self.site, self.python) if self.site else self.python

    def become_args(self):
        return ["-e", "ansible_python_interpreter='%s'" % self.interpreter(), "-e", "ansible_become=true",
                "-e", "ansible_become_method=su", "-e", "ansible_become_user=nobody"]

    def module(self, name, args):
        """(failed, result) of one module run as nobody on localhost (a one-task playbook; the result is written
        to a file by the controller as root)."""
        out = os.path.join(self.base, "result-%s.json" % uuid.uuid4().hex[:8])
        play = [{"name": "One module as nobody", "hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "Run the module", name: args, "register": "result", "ignore_errors": True,
             "become": True, "become_method": "su", "become_user": "nobody"},
            {"name": "Keep its result", "ansible.builtin.copy": {"content": "{{ result | to_json }}", "dest": out},
             "delegate_to": "localhost"}]}]
        playbook = out + ".yml"
        with open(playbook, "w") as f:
            json.dump(play, f)  # JSON is YAML
        argv = [shutil.which("ansible-playbook"), "-i", os.path.join(ROOT, "inventory", "localhost.yml"), playbook,
                "-e", "ansible_python_interpreter='%s'" % self.interpreter()]
        r = subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False, timeout=300)
        if r.returncode != 0 or not os.path.exists(out):  # not an AssertionError: a precondition, not the claim under test
            raise RuntimeError("ansible-playbook rc %s\n%s\n%s" % (r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
        with open(out) as f:
            result = json.load(f)
        return bool(result.get("failed")), result

    def playbook(self, *args):
        argv = [shutil.which("ansible-playbook"), "-i", os.path.join(ROOT, "inventory", "localhost.yml"),
                os.path.join(ROOT, "playbooks", "verify-gpu.yml")] + self.become_args() + list(args)
        return subprocess.run(argv, env=self.env, capture_output=True, text=True, check=False, timeout=600)


def _nobody_python(base):
    """A Python that nobody can execute, and a PYTHONPATH dir with PyYAML when that Python lacks it."""
    for python in (sys.executable, os.path.realpath(sys.executable), "/usr/bin/python3"):
        if os.path.exists(python) and _runs_as_nobody([python, "-c", "import json"]):
            break
    else:
        pytest.skip("no Python interpreter that nobody can execute")
    if _runs_as_nobody([python, "-c", "import yaml"]):
        return python, None
    yaml = pytest.importorskip("yaml")
    site = os.path.join(base, "site")  # what `pip install PyYAML` on the node would give that Python
    shutil.copytree(os.path.dirname(yaml.__file__), os.path.join(site, "yaml"),
                    ignore=shutil.ignore_patterns("*.so", "__pycache__"))  # pure Python: no ABI question
    return python, site


@pytest.fixture(scope="module")
def nobody_ansible():
    if os.geteuid() != 0:
        pytest.skip("needs root (to become nobody)")
    for tool in ("su", "ansible", "ansible-playbook"):
        if not shutil.which(tool):
            pytest.skip("needs %s" % tool)
    user = pwd.getpwnam("nobody")
    base = tempfile.mkdtemp(prefix="gpuprobe-nonroot-", dir="/tmp")
    os.chmod(base, 0o755)  # pytest's tmp_path lives under a 0700 directory that nobody cannot enter
    remote = os.path.join(base, "remote-tmp")
    os.mkdir(remote)
    os.chmod(remote, 0o1777)
    try:
        python, site = _nobody_python(base)
        runner = Nobody(base, python, site)
        failed, result = runner.module("ansible.builtin.command", {"cmd": "id -u"})
        if failed or result["stdout"].strip() != str(user.pw_uid):
            raise RuntimeError("the module did not run as nobody: %s" % result)
        yield runner
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def node(nobody_ansible):
    """A node tree with two GPUs; /dev/nvidia1 is 0660 root:root (a common NVreg_DeviceFileMode)."""
    root = os.path.join(nobody_ansible.base, "node")
    hostfixture.build_node(root, gpus=2)
    os.chmod(os.path.join(root, "dev", "nvidia1"), 0o660)
    return root


def _spec_dir(node, name, dir_mode, file_mode):
    """A spec dir /NAME of the node (inside its tree), with one spec for nvidia.com/gpu=0; returns /NAME."""
    d = os.path.join(node, name)
    os.mkdir(d)
    path = os.path.join(d, "nvidia.json")
    with open(path, "w") as f:
        json.dump({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
                   "devices": [{"name": "0", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
                   "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}]}}, f)
    os.chmod(path, file_mode)
    os.chmod(d, dir_mode)
    return "/" + name


def _record(result, fact):
    record = result["ansible_facts"][fact]
    assert validate_record(record) == [], record
    return record


def _checks(record, check_id, status=None):
    return [c for c in record["checks"] if c["id"] == check_id and (status is None or c["status"] == status)]


def test_host_layer_reads_the_node_without_root(nobody_ansible, node):
    failed, result = nobody_ansible.module("gpuprobe.layers.host_facts", {"root": node, "nvml": False})
    assert not failed, result
    record = _record(result, "gpuprobe_host")
    assert _checks(record, "host.driver.present", "PASS")
    assert not _checks(record, "host.driver.present", "FAIL") and record["status"] == "WARN", record["reason"]
    # the mode that keeps a non-root user out is named, not hidden
    mode = _checks(record, "host.device_node.mode", "WARN")
    assert [c["subject"] for c in mode] == ["/dev/nvidia1"] and "0660" in mode[0]["observed"]
    assert _checks(record, "host.nvml.init", "NOT_RUN")  # disabled here: no GPU; never PASS by inference


def test_cdi_layer_reads_world_readable_specs_without_root(nobody_ansible, node):
    spec_dir = _spec_dir(node, "cdi-readable", 0o755, 0o644)
    failed, result = nobody_ansible.module("gpuprobe.layers.cdi_facts", {
        "spec_dirs": [spec_dir], "discover_runtime_dirs": False, "root": node})
    assert not failed, result
    record = _record(result, "gpuprobe_cdi")
    assert "nvidia.com/gpu=0" in json.dumps(record["evidence"])
    assert not _checks(record, "cdi.resolve.kind", "FAIL"), record["reason"]
    assert not [c for c in record["checks"] if "ermission denied" in (c.get("observed") or "")]


def test_cdi_layer_names_a_spec_dir_it_may_not_read(nobody_ansible, node):
    spec_dir = _spec_dir(node, "cdi-root-only", 0o700, 0o600)
    failed, result = nobody_ansible.module("gpuprobe.layers.cdi_facts", {
        "spec_dirs": [spec_dir], "discover_runtime_dirs": False, "root": node})
    assert not failed, result
    record = _record(result, "gpuprobe_cdi")
    if record["evidence"].get("spec_dirs_existing") != [os.path.join(node, "cdi-root-only")]:
        raise RuntimeError("precondition: the cdi layer must see the directory: %s" % record["evidence"])
    # the cdi layer names the denied read (cdi.discovery.spec_dir_readable), not "no CDI spec provides"
    readable = [c for c in record["checks"] if c["id"] == "cdi.discovery.spec_dir_readable"]
    assert readable and readable[0]["status"] == "WARN" and "ermission denied" in readable[0]["observed"], record["checks"]


def test_runtime_layer_without_a_usable_runtime_is_not_run_with_its_reason(nobody_ansible):
    failed, result = nobody_ansible.module("gpuprobe.layers.runtime_facts", {
        "image": "localhost/gpuprobe-probe:local", "run_id": "nr" + uuid.uuid4().hex[:8],
        "cdi_devices": ["nvidia.com/gpu=0"], "runtime": "auto"})
    assert not failed, result
    record = _record(result, "gpuprobe_runtime")
    assert record["status"] == "NOT_RUN", record
    if shutil.which("podman"):
        # auto falls back to podman (no kubelet, no docker daemon here); podman is the runtime it speaks for, and
        # the record says in podman's own words why it cannot run as this user (rootless podman without a home)
        assert record["reason"].startswith("podman info failed"), record["reason"]
        assert record["evidence"]["engine"]["name"] == "podman", record["evidence"]["engine"]
    else:
        assert record["reason"].startswith("no usable container runtime"), record["reason"]


def test_self_built_spec_needs_root_and_writes_nothing(nobody_ansible, node):
    run_id = "nr" + uuid.uuid4().hex[:8]
    failed, result = nobody_ansible.module("gpuprobe.layers.cdi_spec", {
        "run_id": run_id, "root": node, "driver_root": "/usr/local/nvidia"})
    assert failed and "Permission denied" in result["msg"] and "/var/run/cdi" in result["msg"], result
    assert glob.glob("/var/run/cdi/*%s*" % run_id) == []


def test_verify_run_without_root_reports_what_did_not_run_and_why(nobody_ansible, node):
    reports = os.path.join(nobody_ansible.base, "reports")
    r = nobody_ansible.playbook("-e", "gpuprobe_cdi_source=self-built", "-e", "verify_root=%s" % node,
                                "-e", "verify_nvml=false", "-e", "gpuprobe_report_dir=%s" % reports, "--skip-tags", "k8s")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(os.path.join(reports, "gpuprobe-report-latest.json")) as f:
        host = _expand_report(json.load(f))["hosts"]["localhost"]
    layers = host["layers"]
    assert layers["host"]["status"] in ("PASS", "WARN"), layers["host"]["reason"]
    assert layers["cdi"]["status"] == "NOT_RUN" and "Permission denied" in layers["cdi"]["reason"]
    for name in ("runtime", "compute"):
        assert layers[name]["status"] == "NOT_RUN" and "blocked" in layers[name]["reason"], layers[name]
    assert host["verdict"] == "INCONCLUSIVE" and "Permission denied" in host["reason"]
