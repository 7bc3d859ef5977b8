"""What galaxy-importer (the importer Galaxy and Automation Hub run on an upload) checks, held here where it is cheap
(issue 46); scripts/galaxy-importer.sh runs the importer itself on the built tarball in scripts/test.sh.

- flake8 with the importer's own selection and line length on every plugin file: the importer lints each file
  ansible-doc names as a plugin's, so a filter's documentation lives in its Python file (a YAML file next to it was
  read as Python: E999), and no expression breaks a line at a binary operator (W503 and W504 are both selected);
- every role has a README (the importer refuses a role without one);
- galaxy.yml's version is 1.0.0 or later (Automation Hub's rule)."""
import glob
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
constants = pytest.importorskip("galaxy_importer.constants", reason="galaxy-importer is pinned in requirements-dev.txt")


def test_plugin_docs_are_python_files():
    assert sorted(glob.glob(os.path.join(ROOT, "plugins", "filter", "*.y*ml"))) == []


def test_flake8_as_the_importer_runs_it():
    files = sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "plugins", "**", "*.py"), recursive=True)
                   if os.path.basename(p) != "__init__.py")
    assert "plugins/filter/node_verdict.py" in files
    proc = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--extend-ignore", constants.FLAKE8_IGNORE_ERRORS,
                           "--select", constants.FLAKE8_SELECT_ERRORS, "--max-line-length",
                           str(constants.FLAKE8_MAX_LINE_LENGTH), "--"] + files,
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


@pytest.mark.parametrize("role", sorted(os.listdir(os.path.join(ROOT, "roles"))))
def test_every_role_has_a_readme(role):
    with open(os.path.join(ROOT, "roles", role, "README.md"), encoding="utf-8") as f:
        text = f.read()
    assert text.startswith("# gpuprobe.layers.%s\n" % role)
    assert "(meta/argument_specs.yml)" in text and "```yaml\n- name:" in text


def test_version_is_at_least_1_0_0():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as f:
        version = yaml.safe_load(f)["version"]
    assert tuple(int(part) for part in version.split(".")[:3]) >= (1, 0, 0)
