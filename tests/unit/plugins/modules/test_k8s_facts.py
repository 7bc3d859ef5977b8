"""gpuprobe.layers.k8s_facts main() through patch_module_args: real kubectl without a cluster, and a stand-in
kubectl executable serving the fixture JSON (the only boundary replaced)."""
import json
import os
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, validate_record
from ansible_collections.gpuprobe.layers.plugins.modules import k8s_facts

FIXTURES = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "k8s"))
STAND_IN = """#!%s
import sys
args = sys.argv[1:]
if "get" not in args:
    print('{"clientVersion": {"gitVersion": "v1.32.4"}}'); sys.exit(0)
sys.stdout.write(open("%s/" + args[args.index("get") + 1] + ".json").read())
"""


def run_main(capsys, args):
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            k8s_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert exc.value.code == 0, out
    assert out["changed"] is False and set(out) - {"invocation"} == {"changed", "ansible_facts"}
    record = out["ansible_facts"]["gpuprobe_k8s"]
    assert validate_record(record) == []
    return record


@pytest.mark.parametrize("check_mode", [False, True])
def test_fixture_cluster(tmp_path, capsys, check_mode):
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(STAND_IN % (sys.executable, FIXTURES))
    kubectl.chmod(0o755)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("{}")
    args = {"kubectl": str(kubectl), "kubeconfig": str(kubeconfig), "namespaces": ["ml"]}
    if check_mode:
        args["_ansible_check_mode"] = True
    record = run_main(capsys, args)
    assert record["status"] == FAIL
    pending = [c for c in record["checks"] if c["id"] == "k8s.pod.pending" and c["status"] == FAIL]
    assert [c["subject"] for c in pending] == ["ml/trainer-0", "ml/trainer-1"]
    assert "Insufficient nvidia.com/gpu" in pending[1]["observed"]


def test_missing_kubeconfig_is_not_run(tmp_path, capsys):
    record = run_main(capsys, {"kubectl": sys.executable, "kubeconfig": str(tmp_path / "absent")})
    assert record["status"] == NOT_RUN and record["reason"] == "kubeconfig %s does not exist" % (tmp_path / "absent")


def test_missing_kubectl_is_not_run(capsys):
    record = run_main(capsys, {"kubectl": "/nonexistent/kubectl"})
    assert record["status"] == NOT_RUN and record["reason"] == "kubectl not found: /nonexistent/kubectl"
