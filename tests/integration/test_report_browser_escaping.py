"""Issue 43.6: the HTML page in a real browser shows a node's text as it is, never reordered or hidden. A signature
with a right-to-left override (``cdi.x<U+202E>DEIFIREV_ETUPMOC``, which a browser displays as "cdi.xCOMPUTE_VERIFIED")
and a host name with zero-width and isolate characters: headless Chromium opens the page, its script draws the hosts
table and a host's detail, and the DOM it gives back holds none of these characters, only their visible escapes, in
the failures, causes and hosts tables and the detail. The other sinks (JUnit, metrics, the retry file):
tests/unit/plugins/action/test_escaping_sinks.py."""
import os
import sys

import pytest

from actionlab import make_action
from hostilefixture import HIDDEN
from test_report_browser import chromium, page

# the hostile fleet is the one the other sinks are read with (tests/unit/plugins/action/test_escaping_sinks.py)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "unit", "plugins", "action"))
from test_escaping_sinks import ZW_HOST, hostile_fleet  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpuprobe.layers.plugins.action import fleet_report as A

pytestmark = pytest.mark.integration

SHOWN_SIGNATURE = "cdi.x\\u202eDEIFIREV_ETUPMOC"
SHOWN_HOST = "gpu\\u200b-b\\u2066x\\u2069"


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    chromium()
    tmp = tmp_path_factory.mktemp("browser-escaping")
    hostvars = hostile_fleet()
    result = make_action(A, "gpuprobe.layers.fleet_report", {"hosts": sorted(hostvars), "report_dir": str(tmp)}).run(
        task_vars={"hostvars": hostvars})
    assert result["verdicts"][ZW_HOST] == "FAILED_AT_CDI"
    return result["files"]["html"]


def test_the_tables_show_the_escapes_never_the_controls(html):
    dom = page(html, "#view=hosts")
    rows = dict((r["cells"][0], r) for r in dom.rows)
    assert SHOWN_HOST in rows and SHOWN_SIGNATURE in rows[SHOWN_HOST]["cells"]
    for row in dom.rows:
        assert not [c for c in row["cells"] if HIDDEN.search(c)], row
    with open(html) as f:
        served = f.read()
    # the failures and causes tables, written by the template
    assert served.count(SHOWN_SIGNATURE) >= 2 and not HIDDEN.search(served)


def test_the_host_detail_shows_the_escapes(html):
    dom = page(html, "#host=" + SHOWN_HOST)
    assert dom.detail_hidden is False
    assert SHOWN_HOST in dom.detail_text and SHOWN_SIGNATURE in dom.detail_text
    assert not HIDDEN.search(dom.detail_text)
