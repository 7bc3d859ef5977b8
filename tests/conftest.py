"""Session-wide set-up and guards.

- Ansible's collection loader is installed once, before any test imports the collection, as
  ansible-test units does: otherwise a test that initialises the plugin loader later changes how
  ``ansible_collections.gpuprobe.layers`` imports for every test after it.
- ``hostfixture`` (node-tree builders) and ``kubectlfixture`` (the stand-in kubectl) are importable by every test.
- The suite must leave /etc/cdi exactly as it found it (DESIGN.md safety rules).
"""
import os
import sys

import pytest
from ansible.plugins.loader import init_plugin_loader

# tests/unit/fixtures/host/hostfixture.py (node trees with real mknod devices, the fake pynvml) is shared by
# the host, cdi and runtime tests: importable as ``hostfixture``
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "host"))
# tests/unit/fixtures/k8s/kubectlfixture.py (the stand-in kubectl, record lookups) for the k8s layer's tests
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "unit", "fixtures", "k8s"))


def pytest_configure(config):  # pylint: disable=unused-argument
    init_plugin_loader()


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
