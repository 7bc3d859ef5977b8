"""DESIGN.md safety rules, enforced: no code path loads/unloads kernel modules, manages services, or
writes under /etc/cdi."""
import os
import re

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils import _run

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
    assert any(f.endswith("_run.py") for f in files)


@pytest.mark.parametrize("path", sorted(code_files()), ids=lambda p: os.path.relpath(p, ROOT))
def test_no_driver_or_service_changes(path):
    rel = os.path.relpath(path, ROOT)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    if rel != os.path.join("plugins", "module_utils", "_run.py"):
        assert not FORBIDDEN_WORDS.search(text), "%s mentions a module loader / service manager" % rel
    assert not FORBIDDEN_MODULES.search(text), "%s uses a service/reboot/kernel-module task" % rel
    assert not WRITE_ETC_CDI.search(text), "%s targets /etc/cdi" % rel


def test_runner_refuses_module_loaders_and_service_managers():
    for prog in ("modprobe", "rmmod", "insmod", "systemctl"):
        with pytest.raises(_run.ForbiddenCommand):
            _run.run([prog, "nvidia"], timeout=1)


def test_self_built_specs_are_never_written_under_etc_cdi(tmp_path):
    """write_spec/sweep_specs refuse /etc/cdi, paths under it, and directories that resolve into it."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils import _cdi_spec

    link = tmp_path / "looks-harmless"
    os.symlink("/etc/cdi", str(link))
    spec = {"cdiVersion": "0.5.0", "kind": _cdi_spec.KIND, "devices": []}
    for spec_dir in ("/etc/cdi", "/etc/cdi/", "/etc/cdi/sub", "/etc/../etc/cdi", str(link), str(link / "sub")):
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.write_spec(spec, spec_dir, "safety-test")
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.sweep_specs(spec_dir)
        with pytest.raises(_cdi_spec.SpecError, match="refusing"):
            _cdi_spec.remove_spec(spec_dir, "safety-test")
    assert not os.path.exists("/etc/cdi/gpuprobe-safety-test.yaml")
