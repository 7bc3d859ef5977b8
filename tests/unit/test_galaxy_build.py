"""What the collection tarball holds (issue 33, shipped as Galaxy users expect): ``ansible-galaxy collection build``
of this checkout, with galaxy.yml's ``build_ignore``, leaves out the tests, the evidence of real runs, the
screenshots, benchmarks, molecule and the development scripts, and keeps every plugin, role, playbook and meta file,
the docs text, README, the licence and the changelog."""
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what an installed collection's docs send a user to (the probe image; the CRI API descriptor, `engines.sh stubs`)
SHIPPED_SCRIPTS = {"scripts/build-probe-image.sh", "scripts/probe-image.sh", "scripts/engines.sh"}
LEFT_OUT = ("tests/", "docs/evidence/", "docs/screenshots/", "benchmarks/", "molecule/", "ee/", "reports/",
            "changelogs/fragments/", ".build/", ".venv/", ".ci/", ".git/")
CACHES = ("__pycache__", ".pytest_cache", ".hypothesis", ".mypy_cache")


def _ansible_galaxy():
    here = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    return here if os.path.exists(here) else shutil.which("ansible-galaxy")


def _walk(top):
    """The files under ``top`` (relative to the checkout), caches and compiled files left out."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
        dirnames[:] = [d for d in dirnames if d not in CACHES]
        out.update(os.path.relpath(os.path.join(dirpath, f), ROOT) for f in filenames if not f.endswith(".pyc"))
    return out


@pytest.fixture(scope="module")
def tarball_files(tmp_path_factory):
    galaxy = _ansible_galaxy()
    if galaxy is None:
        pytest.fail("ansible-galaxy not found (it comes with ansible-core, requirements-dev.txt)")
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([galaxy, "collection", "build", "--output-path", str(out), ROOT],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = [p for p in out.iterdir() if p.name.endswith(".tar.gz")]
    with tarfile.open(str(tarball)) as tar:
        return set(m.name for m in tar.getmembers() if not m.isdir())


def test_the_tarball_holds_no_tests_evidence_or_development_files(tarball_files):
    found = sorted(name for name in tarball_files if name.startswith(LEFT_OUT))
    assert found == []


def test_the_tarball_holds_no_caches(tarball_files):
    found = sorted(name for name in tarball_files
                   if name.endswith(".pyc") or any(part in CACHES for part in name.split("/")))
    assert found == []


def test_the_tarball_holds_only_the_scripts_an_installed_collection_points_at(tarball_files):
    assert set(name for name in tarball_files if name.startswith("scripts/")) == SHIPPED_SCRIPTS


@pytest.mark.parametrize("top", ["plugins", "roles", "playbooks", "meta", "LICENSES"])
def test_every_file_of_the_collection_is_in_the_tarball(tarball_files, top):
    wanted = _walk(top)
    assert wanted, top
    assert sorted(wanted - tarball_files) == []


def test_the_docs_text_readme_licence_and_changelog_are_in_the_tarball(tarball_files):
    docs = set("docs/" + name for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md"))
    wanted = docs | {"README.md", "COPYING", "CHANGELOG.rst", "changelogs/changelog.yaml", "changelogs/config.yaml",
                     "MANIFEST.json", "FILES.json"}
    assert sorted(wanted - tarball_files) == []


def test_what_meta_execution_environment_names_is_in_the_tarball(tarball_files):
    """ansible-builder's introspection reads these from the installed collection (scripts/ee-check.sh runs it)."""
    with open(os.path.join(ROOT, "meta", "execution-environment.yml")) as f:
        declared = yaml.safe_load(f)["dependencies"]
    assert sorted(set(declared.values()) - tarball_files) == []
