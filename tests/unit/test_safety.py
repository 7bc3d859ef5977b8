"""The safety rules of docs/safety.md, enforced: no code path loads/unloads kernel modules, manages services, or
writes under /etc/cdi."""
import os
import re

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import allowlist as _allowlist
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import run as _run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODE_DIRS = ("plugins", "roles", "playbooks", "molecule", "scripts", ".ci")
CODE_EXT = (".py", ".yml", ".yaml", ".sh", ".j2", "")
FORBIDDEN_WORDS = re.compile(r"\b(modprobe|rmmod|insmod|depmod|systemctl)\b")
FORBIDDEN_MODULES = re.compile(
    r"^\s*-?\s*(ansible\.builtin\.)?(systemd|systemd_service|service|sysvinit|reboot|"
    r"community\.general\.modprobe|community\.general\.kernel_blacklist)\s*:", re.M)
WRITE_ETC_CDI = re.compile(r"(dest|path|src)\s*[:=]\s*['\"]?/etc/cdi")


def code_files():
    for top in CODE_DIRS:
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, top)):
            for name in files:
                if os.path.splitext(name)[1] in CODE_EXT:
                    yield os.path.join(dirpath, name)


def test_code_tree_is_scanned():
    files = list(code_files())
    assert any(f.endswith(os.path.join("_common", "run.py")) for f in files)


@pytest.mark.parametrize("path", sorted(code_files()), ids=lambda p: os.path.relpath(p, ROOT))
def test_no_driver_or_service_changes(path):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if rel != os.path.join("plugins", "module_utils", "_common", "run.py"):
        assert not FORBIDDEN_WORDS.search(text), "%s mentions a module loader / service manager" % rel
    assert not FORBIDDEN_MODULES.search(text), "%s uses a service/reboot/kernel-module task" % rel
    assert not WRITE_ETC_CDI.search(text), "%s targets /etc/cdi" % rel


def test_runner_refuses_module_loaders_and_service_managers():
    for prog in ("modprobe", "rmmod", "insmod", "systemctl"):
        with pytest.raises(_allowlist.ForbiddenCommand):
            _run.run([prog, "nvidia"], timeout=1)


# Every command shape the collection runs, with one real example each (from the code that builds it).
ALLOWED = {
    "tool --version": [["nvidia-ctk", "--version"], ["/usr/sbin/runc", "--version"], ["podman", "--version"]],
    "engine info": [["/usr/bin/podman", "info", "--format", "{{.Version.Version}}|{{.Host.OCIRuntime.Name}}"],
                    ["docker", "info", "--format", "{{json .}}"]],
    "engine version": [["podman", "version"]],
    "engine config read": [["/usr/bin/containerd", "--config", "/etc/containerd/config.toml", "config", "dump"],
                           ["containerd", "config", "default"], ["containerd", "config", "dump"],
                           ["crio", "status", "--socket", "/var/run/crio/crio.sock", "config"], ["crio", "status", "config"]],
    "engine run probe": [["/usr/bin/podman", "run", "--rm", "--name", "gpuprobe-r1-0a1b2c3d", "--label", "gpuprobe.run=r1",
                          "--label", "gpuprobe.owner=h:12:34", "--label", "gpuprobe.created=1", "--network=none",
                          "--pull=never", "--device", "gpuprobe.local/gpu-r1=0", "-v", "/tmp/gpuprobe-probe-x/gpuprobe_probe.py:/gpuprobe/probe.py:ro",
                          "--user", "1000:1000", "--entrypoint", "python3", "localhost/gpuprobe-probe:local",
                          "/gpuprobe/probe.py", "{}"]],
    "engine rm gpuprobe-*": [["podman", "rm", "-f", "-t", "0", "-i", "gpuprobe-r1-0a1b2c3d"], ["docker", "rm", "-f", "gpuprobe-x"]],
    "engine ps label=gpuprobe.run": [["podman", "ps", "-a", "--filter", "label=gpuprobe.run", "--format", "json"],
                                     ["docker", "ps", "-a", "--filter", "label=gpuprobe.run=r1", "--format", "{{json .}}"]],
    "python probe": [["/usr/bin/python3", "-I", "-S", "/tmp/gpuprobe-probe-x/gpuprobe_probe.py", '{"compute": true}'],
                     ["python3.11", "-I", "-S", "/tmp/d/gpuprobe_probe.py", "{}"],
                     ["/usr/libexec/platform-python", "-I", "-S", "/tmp/d/gpuprobe_probe.py", "{}"]],
    "kubectl read": [["kubectl", "version", "--client", "-o", "json"],
                     ["/usr/bin/kubectl", "--kubeconfig", "/k", "--context", "c", "--request-timeout", "10s", "get", "nodes", "-o", "json"],
                     ["kubectl", "--request-timeout", "10s", "get", "events", "--field-selector", "reason=FailedScheduling",
                      "--all-namespaces", "-o", "json"],
                     ["kubectl", "get", "pods", "-n", "gpu", "-o", "json"],
                     ["kubectl", "--request-timeout", "10s", "get", "resourceslices", "-o", "json"],
                     ["kubectl", "get", "deviceclasses", "-o", "json"],
                     ["kubectl", "get", "resourceclaims", "--all-namespaces", "-o", "json"],
                     ["kubectl", "get", "resourceclaimtemplates", "-n", "ml", "-o", "json"],
                     ["kubectl", "get", "events", "--field-selector", "reason=FailedPrepareDynamicResources", "-n", "ml",
                      "-o", "json"]],
    "kubectl node condition write": [
        ["kubectl", "--kubeconfig", "/k", "--request-timeout", "10s", "patch", "node", "gpu-a", "--subresource=status",
         "--type=strategic", "-p", '{"status": {"conditions": [{"type": "GPUComputeVerified", "status": "True"}]}}', "-o", "json"],
        ["kubectl", "patch", "node", "gpu-a", "--type=merge", "-p", '{"metadata": {"labels": {"gpuprobe.layers/verdict": "FAILED_AT_CDI"}}}',
         "-o", "json"]],
    "nvidia-smi query": [["nvidia-smi"], ["nvidia-smi", "-L"], ["nvidia-smi", "-q", "-x"],
                         ["nvidia-smi", "--query-gpu=name,uuid", "--format=csv,noheader", "-i", "0"]],
    "ldconfig -p": [["ldconfig", "-p"]],
    "journalctl kernel log": [["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "cat"],
                              ["/usr/bin/journalctl", "-k", "-b", "--no-pager", "-q", "-o", "cat"]],
    "dmesg read": [["dmesg", "--notime"], ["/bin/dmesg", "--notime"]],
    "dcgmi diag": [["dcgmi", "diag", "-r", "1", "-j"], ["/usr/bin/dcgmi", "diag", "-r", "3", "-j"]],
}

_STATUS_PATCH = ["kubectl", "patch", "node", "n1", "--subresource=status", "--type=strategic", "-p"]

REFUSED = [
    ["modprobe", "nvidia"], ["insmod", "nvidia.ko"], ["/sbin/rmmod", "nvidia"], ["systemctl", "restart", "docker"],
    ["nvidia-smi", "-pm", "1"], ["nvidia-smi", "--compute-mode=EXCLUSIVE_PROCESS"], ["nvidia-smi", "-c", "3"],
    ["nvidia-smi", "mig", "-cgi", "9"], ["nvidia-smi", "-r"], ["nvidia-smi", "-mig", "1"], ["nvidia-smi", "drain", "-p", "0"],
    ["podman", "system", "reset"], ["podman", "rm", "-f", "someone-elses-container"], ["podman", "rm", "-a", "-f"],
    ["podman", "run", "--privileged", "--rm", "--name", "gpuprobe-x", "--label", "gpuprobe.run=x", "--network=none", "img"],
    ["podman", "run", "--rm", "--name", "gpuprobe-x", "--label", "gpuprobe.run=x", "--network=none", "-v", "/:/host", "img"],
    ["podman", "run", "--rm", "--name", "gpuprobe-x", "--label", "gpuprobe.run=x", "img"],
    ["podman", "run", "--name", "gpuprobe-x", "--label", "gpuprobe.run=x", "--network=none", "img"],
    ["podman", "ps", "-a"], ["podman", "ps", "--filter", "label=other"], ["podman", "volume", "rm", "x"],
    ["kubectl", "delete", "node", "n1", "-o", "json"], ["kubectl", "get", "secrets", "-o", "json"], ["kubectl", "get", "nodes"],
    # node writes other than one condition / one label: taints, spec, two conditions, Pods, status without the subresource
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"spec": {"unschedulable": true}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"metadata": {"labels": {"a": "1", "b": "2"}}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"metadata": {"annotations": {"a": "1"}}}', "-o", "json"],
    # a kubelet-owned condition, a strategic merge directive, a field a NodeCondition has not, a reserved label key
    _STATUS_PATCH + ['{"status": {"conditions": [{"type": "Ready", "status": "False"}]}}', "-o", "json"],
    _STATUS_PATCH + ['{"status": {"conditions": [{"type": "MemoryPressure", "status": "True"}]}}', "-o", "json"],
    _STATUS_PATCH + ['{"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}', "-o", "json"],
    _STATUS_PATCH + ['{"status": {"conditions": [{"$patch": "replace", "type": "X", "status": "True"}]}}', "-o", "json"],
    _STATUS_PATCH + ['{"status": {"conditions": [{"type": "X", "status": "True", "extra": "y"}]}}', "-o", "json"],
    _STATUS_PATCH + ['{"status": {"conditions": [{"type": "X", "status": "Maybe"}]}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"metadata": {"labels": {"kubernetes.io/hostname": "x"}}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p",
     '{"metadata": {"labels": {"node-role.kubernetes.io/control-plane": ""}}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", '{"metadata": {"labels": {"x.k8s.io/y": "1"}}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--subresource=status", "--type=strategic", "-p",
     '{"status": {"conditions": [{"type": "A"}, {"type": "B"}]}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--subresource=status", "--type=merge", "-p", '{"status": {"conditions": [{"type": "A"}]}}', "-o", "json"],
    ["kubectl", "patch", "node", "n1", "--subresource=status", "--type=strategic", "-p", '{"status": {"capacity": {"x": "1"}}}', "-o", "json"],
    ["kubectl", "patch", "pod", "p1", "--type=merge", "-p", '{"metadata": {"labels": {"a": "1"}}}', "-o", "json"],
    ["kubectl", "label", "node", "n1", "a=1"], ["kubectl", "taint", "node", "n1", "k=v:NoSchedule"],
    ["kubectl", "patch", "node", "n1", "--type=merge", "-p", "not json", "-o", "json"],
    ["python3", "-c", "import os"], ["python3", "/tmp/other.py", "{}"], ["python3", "/tmp/gpuprobe_probe.py", "not json"],
    ["python3", "/tmp/gpuprobe_probe.py", "{}"], ["python3", "-I", "/tmp/gpuprobe_probe.py", "{}"],
    ["rm", "-rf", "/var/run/cdi"], ["sh", "-c", "true"], ["bash"], ["ldconfig"], ["runc", "delete", "x"],
    ["nvidia-ctk", "cdi", "generate", "--output=/etc/cdi/nvidia.yaml"], ["dmesg", "-c"], ["dmesg", "-C"], ["dmesg", "--clear"],
    ["dmesg", "-n", "1"], ["dmesg"], ["journalctl", "--vacuum-time=1s"], ["journalctl", "--rotate"], ["journalctl", "-k"],
    ["podman", "--version", "--remote"], ["dcgmi", "diag", "-r", "1"], ["dcgmi", "diag", "-r", "5", "-j"],
    ["dcgmi", "diag", "-r", "1", "-j", "--host", "10.0.0.1"], ["dcgmi", "config", "--set", "-c", "2"], ["dcgmi", "policy", "--clear"],
    ["dcgmi", "diag", "-r", "memory", "-j"],
    ["podman", "--version", "--remote"], ["containerd", "--config", "/x.toml"], ["containerd", "config", "migrate"],
    ["containerd", "--config", "/x.toml", "--address", "/tmp/s", "config", "dump"], ["crio", "--config", "/x", "config"],
    ["crio", "status", "--socket", "/s", "containers"], ["crio", "wipe"], [],
]


def test_every_allowed_shape_is_enumerated_here():
    assert sorted(ALLOWED) == sorted(s[0] for s in _allowlist.SHAPES)


@pytest.mark.parametrize("shape", sorted(ALLOWED))
def test_allowed_shapes(shape):
    for argv in ALLOWED[shape]:
        assert _allowlist.check_allowed(argv) == shape, argv


@pytest.mark.parametrize("argv", REFUSED, ids=lambda a: " ".join(a)[:60] or "empty")
def test_anything_else_is_refused_before_a_process_exists(argv):
    with pytest.raises(_allowlist.ForbiddenCommand, match="not an allowed command shape|empty command"):
        _run.run(argv, timeout=1)


def test_only_the_runner_executes_without_the_allowlist():
    """_execute skips the allowlist: production code never calls it (tests may, for real capture tests), and no
    plugin starts processes by itself (the in-container probe is the one exception: it runs alone in the
    container, where _run.py does not exist)."""
    offenders = []
    for path in code_files():
        rel = os.path.relpath(path, ROOT)
        if not rel.startswith("plugins" + os.sep) or not path.endswith(".py") or rel.endswith(os.path.join("_common", "run.py")):
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if re.search(r"(?<![\w.])_execute\(|\w*run\._execute\b", text) or re.search(r"\bos\.(system|popen|exec\w*|spawn\w*)\(", text):
            offenders.append(rel)
        if re.search(r"\bsubprocess\.", text) and not rel.endswith(os.path.join("_probe", "script.py")):
            offenders.append(rel)
    assert offenders == []


def test_self_built_specs_are_never_written_under_etc_cdi(tmp_path):
    """write_spec/sweep_specs refuse /etc/cdi, paths under it, and directories that resolve into it."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec

    link = tmp_path / "looks-harmless"
    os.symlink("/etc/cdi", str(link))
    spec = {"cdiVersion": "0.5.0", "kind": _cdi_spec.run_kind("safety-test"), "devices": []}
    for spec_dir in ("/etc/cdi", "/etc/cdi/", "/etc/cdi/sub", "/etc/../etc/cdi", str(link), str(link / "sub")):
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.write_spec(spec, spec_dir, "safety-test")
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.sweep_specs(spec_dir)
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.remove_spec(spec_dir, "safety-test")
    assert not os.path.exists("/etc/cdi/gpuprobe-safety-test.yaml")
