"""The controller cache over real ansible-playbook runs (plugin_utils/_controller_cache): the second audit of the same
sources loads the node_layers payload the first one built instead of building it (Ansible's own debug lines say
which), and gives the same records, its payload kept with bytecode beside every source; with the cache off every
run builds. Local connection, a synthetic node tree."""
import base64
import io
import json
import marshal
import os
import subprocess
import sys
import zipfile

import pytest
from ansible.executor.module_common import _CachedModule

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._code_cache import HEADER
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._controller_cache import lean_source

from hostfixture import build_node
from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.compact import expand as _expand_report

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(ROOT, "playbooks", "verify-gpu.yml")
BUILT = "ANSIBALLZ: Creating module"
LOADED = "ANSIBALLZ: using cached module"


def _audit(tmp_path, cache, n):
    reports = tmp_path / ("reports-%d" % n)
    env = dict(os.environ, GPUPROBE_CACHE=cache, ANSIBLE_DEBUG="1")
    r = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                        PLAYBOOK, "-e", "gpuprobe_mode=audit", "-e", "verify_root=%s" % (tmp_path / "node"), "-e", "verify_nvml=false",
                        "-e", "verify_k8s=false", "-e", "gpuprobe_report_dir=%s" % reports],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(str(reports / "gpuprobe-report-latest.json")) as f:
        host = _expand_report(json.load(f))["hosts"]["localhost"]
    return r.stdout + r.stderr, host


def test_the_second_run_loads_the_payload_the_first_built(tmp_path):
    build_node(str(tmp_path / "node"), gpus=2)
    cache = str(tmp_path / "cache")
    out1, host1 = _audit(tmp_path, cache, 1)
    assert BUILT in out1 and LOADED not in out1
    kept = [n for n in os.listdir(os.path.join(cache, "payloads")) if not n.startswith(".lock-")]
    assert len(kept) == 1 and kept[0].startswith("ansible_collections.gpuprobe.layers.plugins.modules.node_layers-")
    # kept with bytecode beside every source file, for the nodes whose Python is the controller's
    payload = zipfile.ZipFile(io.BytesIO(base64.b64decode(_CachedModule.load(os.path.join(cache, "payloads", kept[0])).zip_data)))
    sources = [n for n in payload.namelist() if n.endswith(".py")]
    assert "ansible_collections/gpuprobe/layers/plugins/modules/node_layers.py" in sources
    assert sorted(n for n in payload.namelist() if n.endswith(".pyc")) == sorted(n + "c" for n in sources)
    out2, host2 = _audit(tmp_path, cache, 2)
    assert LOADED in out2 and BUILT not in out2
    assert [n for n in os.listdir(os.path.join(cache, "payloads")) if not n.startswith(".lock-")] == kept
    for key in ("verdict", "failing_layer", "signature"):
        assert host2[key] == host1[key]
    assert [(k, r["status"]) for k, r in sorted(host2["layers"].items())] == [(k, r["status"]) for k, r in sorted(host1["layers"].items())]
    # the report templates' compiled code is kept beside it
    assert os.listdir(os.path.join(cache, "templates"))
    # and so is the compiled code of the collection's own Python that the controller imports (plugin_utils/_code_cache)
    [tag] = os.listdir(os.path.join(cache, "code"))
    compiled = set()
    for name in os.listdir(os.path.join(cache, "code", tag)):
        with open(os.path.join(cache, "code", tag, name), "rb") as f:
            blob = f.read()
        assert blob.startswith(HEADER)
        compiled.add("/".join(marshal.loads(blob[len(HEADER):]).co_filename.split("/")[-2:]))
    assert {"_report/options.py", "_verdict/verdict.py", "_report/model.py", "_report/render.py", "plugin_utils/_spool.py"} <= compiled, compiled


def test_with_the_cache_off_every_run_builds(tmp_path):
    build_node(str(tmp_path / "node"), gpus=1)
    for n in (1, 2):
        out, _host = _audit(tmp_path, "off", n)
        assert BUILT in out and LOADED not in out


FACTS_PLAY = """- hosts: all
  gather_facts: false
  tasks:
    - gpuprobe.layers.host_facts:
        root: "{{ node_root }}"
        nvml: false
    - ansible.builtin.copy:
        content: "{{ ansible_facts.gpuprobe_host | to_json }}"
        dest: "{{ record_file }}"
      delegate_to: localhost
"""


def _host_facts(tmp_path, cache, n):
    play = tmp_path / "facts.yml"
    play.write_text(FACTS_PLAY)
    record = tmp_path / ("host-%d.json" % n)
    env = dict(os.environ, GPUPROBE_CACHE=cache, ANSIBLE_DEBUG="1")
    r = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
                        str(play), "-e", "node_root=%s" % (tmp_path / "node"), "-e", "record_file=%s" % record],
                       capture_output=True, text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    with open(str(record)) as f:
        return r.stdout + r.stderr, json.load(f)


def _payloads(out, marker):
    """The module of each payload Ansible's debug lines say it built (its lock) or loaded from its run's cache."""
    names = set()
    for line in out.splitlines():
        if marker in line:
            names.add(os.path.basename(line.split(marker, 1)[1].strip()).split("-", 1)[0].rsplit(".", 1)[-1])
    return names


def test_a_facts_module_called_directly_keeps_its_payload_lean(tmp_path):
    # plugins/action/host_facts.py (plugin_utils/_kept_module): the module's own result, its payload built once
    build_node(str(tmp_path / "node"), gpus=2)
    cache = str(tmp_path / "cache")
    built, loaded = "ANSIBALLZ: Lock acquired: ", LOADED + ": "  # with the payload's path (the copy task has its own)
    out1, record1 = _host_facts(tmp_path, cache, 1)
    assert "host_facts" in _payloads(out1, built) and "host_facts" not in _payloads(out1, loaded)
    [kept] = [n for n in os.listdir(os.path.join(cache, "payloads")) if not n.startswith(".lock-")]
    assert kept.startswith("ansible_collections.gpuprobe.layers.plugins.modules.host_facts-")
    payload = zipfile.ZipFile(io.BytesIO(base64.b64decode(_CachedModule.load(os.path.join(cache, "payloads", kept)).zip_data)))
    ours = [n for n in payload.namelist() if n.startswith("ansible_collections/gpuprobe/layers/plugins/") and n.endswith(".py")]
    assert "ansible_collections/gpuprobe/layers/plugins/module_utils/_host/layer.py" in ours
    for name in ours:  # each of the collection's files as lean_source makes it, its bytecode beside it
        path = os.path.join(ROOT, name.split("/layers/", 1)[1])
        if os.path.exists(path):
            with open(path, "rb") as f:
                assert payload.read(name) == lean_source(f.read()), name
        else:  # a package's __init__ Ansible writes itself
            assert payload.read(name) == b"", name
        assert name + "c" in payload.namelist()
    out2, record2 = _host_facts(tmp_path, cache, 2)
    assert "host_facts" in _payloads(out2, loaded) and "host_facts" not in _payloads(out2, built)
    assert record1["layer"] == "host" and record2["status"] == record1["status"]
    assert [(c["id"], c["status"], c["observed"]) for c in record2["checks"]] == [(c["id"], c["status"], c["observed"]) for c in record1["checks"]]
