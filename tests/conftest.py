"""Session-wide set-up and guards.

- Ansible's collection loader is installed once, before any test imports the collection, as
  ansible-test units does: otherwise a test that initialises the plugin loader later changes how
  ``ansible_collections.gpuprobe.layers`` imports for every test after it.
- ``hostfixture`` (node-tree builders) and ``kubectlfixture`` (the stand-in kubectl) are importable by every test.
- The suite must leave /etc/cdi exactly as it found it (docs/safety.md).
- The suite leaves nothing of its own outside the checkout (issue 22.8): Ansible's controller and module temporary
  directories of every ansible-playbook it starts (also one interrupted on purpose, whose payload a killed worker
  cannot remove) go under .build/test-tmp/<pid>, removed at the end; /var/run/cdi, when the suite created it, is
  removed at the end if nothing but the suite used it (empty), since its presence changes the cdi layer's reasons.
"""
import os
import shutil
import sys

import pytest
from ansible.plugins.loader import init_plugin_loader

# tests/unit/fixtures/host/hostfixture.py (node trees with real mknod devices, the fake pynvml) is shared by
# the host, cdi and runtime tests: importable as ``hostfixture``
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "host"))
# tests/unit/fixtures/k8s/kubectlfixture.py (the stand-in kubectl, record lookups) for the k8s layer's tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "k8s"))
# tests/unit/fixtures/layouts/layoutfixture.py (a node tree per layout, with /proc) for the runtime discovery tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "layouts"))
# tests/unit/fixtures/report: the report's golden set, the fleet of real records replayed (replayfleet), the HTML page's
# data read back as its script reads it (pagedata)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "report"))
# tests/unit/fixtures/docs/moduledocs.py: a module's documentation with this collection's doc fragments merged in
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "docs"))


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSIBLE_TMP = os.path.join(ROOT, ".build", "test-tmp", str(os.getpid()))
VAR_RUN_CDI = "/var/run/cdi"


def pytest_configure(config):  # pylint: disable=unused-argument
    # before any test starts ansible-playbook: every run of this session inherits them (a test that sets its own keeps it)
    for var, sub in (("ANSIBLE_LOCAL_TEMP", "local"), ("ANSIBLE_REMOTE_TMP", "remote")):
        if var not in os.environ:
            os.makedirs(os.path.join(ANSIBLE_TMP, sub), exist_ok=True)
            os.environ[var] = os.path.join(ANSIBLE_TMP, sub)
    init_plugin_loader()


# integration tests that start no container and no engine, and share nothing of the system (controller-side runs on
# fixture trees, a browser, servers on ports of their own): they may run beside the others
CONTROLLER_ONLY = frozenset(("test_exit_contract.py", "test_compare_reports.py", "test_fleet_output.py",
                             "test_k8s_action_group.py", "test_k8s_kubectl_http.py", "test_report_browser.py",
                             "test_cdi_differential.py", "test_metrics.py"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):  # pylint: disable=unused-argument
    """Under pytest-xdist's ``--dist loadgroup`` (scripts/test.sh): the tests of tests/integration and tests/gpu that
    use the system's podman storage, the engines lab's sockets or /var/run/cdi stay together on one worker, one after
    another, as in a serial run; the unit tests (fixture trees, each in its own tmp_path) and CONTROLLER_ONLY go to
    either worker. Without xdist the marker does nothing."""
    here = os.path.dirname(os.path.abspath(__file__))
    shared = tuple(os.path.join(here, d) + os.sep for d in ("integration", "gpu"))
    for item in items:
        path = str(item.fspath)
        if path.startswith(shared) and os.path.basename(path) not in CONTROLLER_ONLY:
            item.add_marker(pytest.mark.xdist_group("system"))


@pytest.fixture(scope="session", autouse=True)
def nothing_left_outside_the_checkout():
    """Remove what this session created outside the checkout (see the module's docstring)."""
    var_run_cdi_was_there = os.path.lexists(VAR_RUN_CDI)
    yield
    shutil.rmtree(ANSIBLE_TMP, ignore_errors=True)
    if not var_run_cdi_was_there and os.path.isdir(VAR_RUN_CDI) and not os.path.islink(VAR_RUN_CDI):
        try:
            os.rmdir(VAR_RUN_CDI)      # only when empty: a spec another run put there meanwhile stays
        except OSError:
            pass


def _snapshot(path):
    if not os.path.isdir(path):
        return None
    out = {}
    for name in sorted(os.listdir(path)):
        st = os.lstat(os.path.join(path, name))
        out[name] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


@pytest.fixture(scope="session", autouse=True)
def etc_cdi_untouched():
    before = _snapshot("/etc/cdi")
    yield
    assert _snapshot("/etc/cdi") == before, "the test suite changed /etc/cdi"


@pytest.fixture()
def bindir(tmp_path, monkeypatch):
    """An empty directory that is the whole PATH: only the fake executables written there exist."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", str(d))
    return d
