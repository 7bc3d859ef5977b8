"""playbooks/compare-reports.yml over a real ansible-playbook run: two reports of runs made in different modes are
compared, and the comparison says so first (issue 22.9), in its output, its JSON and its Markdown."""
import json
import os
import subprocess

import pytest

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import fleet as F
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report import jsonfile as J
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import not_run

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "compare-reports.yml")
SAID = "the two runs were not made the same way"


def _report(path, mode, generated_at):
    # the same node, the same records: only the runs differ
    records = dict((layer, not_run(layer, "not selected in this run (tags)")) for layer in ("host", "cdi", "runtime", "compute"))
    path.write_text(J.render_json(F.build_report([{"name": "gpu-1", "records": records}], generated_at,
                                                 run={"mode": mode, "cdi_source": "node", "hosts_pattern": "all"})))
    return str(path)


@pytest.mark.parametrize("old_mode,new_mode", [("audit", "full"), ("full", "audit"), ("full", "postcheck"), ("audit", "audit")])
def test_compare_reports_says_when_the_modes_differ(tmp_path, old_mode, new_mode):
    old = _report(tmp_path / "old.json", old_mode, "2026-12-01T00:00:00Z")
    new = _report(tmp_path / "new.json", new_mode, "2026-12-02T00:00:00Z")
    r = subprocess.run(["ansible-playbook", PLAYBOOK, "-e", "old=%s" % old, "-e", "new=%s" % new,
                        "-e", "diff_out=%s" % (tmp_path / "diff.json"), "-e", "diff_md=%s" % (tmp_path / "diff.md")],
                       capture_output=True, text=True, timeout=120, check=False)
    output = r.stdout + r.stderr
    assert r.returncode == 0, output[-3000:]
    differ = old_mode != new_mode
    diff = json.loads((tmp_path / "diff.json").read_text())
    assert diff["runs_differ"] == ([{"field": "mode", "old": old_mode, "new": new_mode}] if differ else [])
    md = (tmp_path / "diff.md").read_text()
    for text in (output, md):
        assert (SAID in text, "mode %s in the old report, %s in the new" % (old_mode, new_mode) in text) == (differ, differ), text[-3000:]
