"""The changelog is antsibull-changelog's (issue 33): CHANGELOG.rst is exactly what ``antsibull-changelog generate``
writes from changelogs/changelog.yaml (releases are made with ``antsibull-changelog release``, the file is never
edited by hand), and ``antsibull-changelog lint`` accepts the fragments and changelog.yaml. Fragments go to
changelogs/fragments/; a release moves them into changelogs/changelog.yaml."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _antsibull_changelog():
    here = os.path.join(os.path.dirname(sys.executable), "antsibull-changelog")
    found = here if os.path.exists(here) else shutil.which("antsibull-changelog")
    if found is None:
        pytest.fail("antsibull-changelog not found (requirements-dev.txt pins it)")
    return found


def _run(args, cwd):
    return subprocess.run([_antsibull_changelog()] + args, cwd=cwd, capture_output=True, text=True, timeout=300,
                          check=False)


def test_changelog_rst_is_what_antsibull_changelog_generates(tmp_path):
    """generate in a copy of galaxy.yml and changelogs/ (it writes CHANGELOG.rst in place) gives the committed file."""
    shutil.copy(os.path.join(ROOT, "galaxy.yml"), str(tmp_path / "galaxy.yml"))
    (tmp_path / "changelogs" / "fragments").mkdir(parents=True)
    for name in ("config.yaml", "changelog.yaml"):
        shutil.copy(os.path.join(ROOT, "changelogs", name), str(tmp_path / "changelogs" / name))
    proc = _run(["generate"], str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(os.path.join(ROOT, "CHANGELOG.rst")) as f:
        committed = f.read()
    assert (tmp_path / "CHANGELOG.rst").read_text() == committed


def test_antsibull_changelog_lint_passes():
    proc = _run(["lint"], ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


def test_changelog_yaml_lint_passes():
    proc = _run(["lint-changelog-yaml", os.path.join("changelogs", "changelog.yaml")], ROOT)
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")
