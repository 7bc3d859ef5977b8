"""meta/runtime.yml's action groups (issue 33): ``k8s`` holds exactly the modules that take the kubectl options, so
``module_defaults: {group/gpuprobe.layers.k8s: {kubeconfig: ...}}`` reaches every module that has them and no other;
each member says so in its documentation (the ``action_group`` attribute), and every member of every group is a
module of the collection. tests/integration/test_k8s_action_group.py runs a play that sets them through the group."""
import os

import pytest
import yaml

from moduledocs import module_doc as _documentation, module_names as _modules  # tests/conftest.py: fixtures/docs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
K8S_OPTIONS = {"kubectl", "kubeconfig", "context", "timeout"}


def _groups():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as f:
        return yaml.safe_load(f).get("action_groups") or {}


def test_the_k8s_group_is_exactly_the_modules_with_the_kubectl_options():
    takers = [m for m in _modules() if K8S_OPTIONS <= set((_documentation(m).get("options") or {}))]
    assert takers == ["k8s_facts", "k8s_publish"]
    assert sorted(_groups()["k8s"]) == takers


@pytest.mark.parametrize("group", sorted(_groups()))
def test_every_member_of_a_group_is_a_module_of_the_collection(group):
    members = _groups()[group]
    assert members and len(members) == len(set(members))
    assert sorted(set(members) - set(_modules())) == []


@pytest.mark.parametrize("module", _modules())
def test_the_action_group_attribute_agrees_with_runtime_yml(module):
    """A module's documented membership (attributes.action_group.membership) is the groups runtime.yml puts it in."""
    documented = ((_documentation(module).get("attributes") or {}).get("action_group") or {}).get("membership") or []
    in_runtime = ["gpuprobe.layers.%s" % g for g, members in sorted(_groups().items()) if module in members]
    assert sorted(documented) == in_runtime
