"""Session-wide guards: the suite must leave /etc/cdi exactly as it found it (DESIGN.md safety rules)."""
import os

import pytest


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
