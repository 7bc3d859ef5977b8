"""verify_node gives the node side its probe_timeout (verify_probe_timeout) for every question to a runtime: the
inspect stage's runtime selection (runtime_timeout of node_layers and node_verify) and the sweep of the run's probe
containers (probe_cleanup's timeout), never the modules' fixed defaults (issue 34 item 6). The node side is
test_verify_node's: _node.inspect and _node_verify.verify run in this process on a synthetic node tree."""
from test_verify_node import Node, _action, run  # pylint: disable=no-name-in-module

from hostfixture import build_node


def _tree(tmp_path):
    build_node(str(tmp_path / "node"), gpus=1, procfs=True)
    return str(tmp_path / "node")


def test_the_inspect_call_of_an_audit_selects_the_runtimes_with_the_probe_timeout(tmp_path):
    node = Node()
    run(_action({"mode": "audit", "root": _tree(tmp_path), "nvml": False, "probe_timeout": 77}), node)
    assert [(c[0], c[1]["runtime_timeout"]) for c in node.calls] == [("inspect", 77)]


def test_the_whole_node_call_and_its_sweep_use_the_probe_timeout(tmp_path):
    node = Node(fail={"verify": "failed"})
    run(_action({"root": _tree(tmp_path), "k8s": False, "probe_runtime": "podman", "probe_timeout": 77}), node)
    assert [c[0] for c in node.calls] == ["verify", "probe_cleanup"]
    assert node.calls[0][1]["runtime_timeout"] == node.calls[0][1]["timeout"] == 77
    assert node.calls[1][1]["timeout"] == 77
