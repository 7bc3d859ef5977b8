"""meta/runtime.yml's action groups (issue 33): ``k8s`` holds exactly the modules that take the kubectl options, so
``module_defaults: {group/gpuprobe.layers.k8s: {kubeconfig: ...}}`` reaches every module that has them and no other;
each member says so in its documentation (the ``action_group`` attribute), and every member of every group is a
module of the collection. tests/integration/test_k8s_action_group.py runs a play that sets them through the group."""
import importlib.util
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODULES = os.path.join(ROOT, "plugins", "modules")
FRAGMENTS = os.path.join(ROOT, "plugins", "doc_fragments")
K8S_OPTIONS = {"kubectl", "kubeconfig", "context", "timeout"}


def _groups():
    with open(os.path.join(ROOT, "meta", "runtime.yml")) as f:
        return yaml.safe_load(f).get("action_groups") or {}


def _fragment(name):
    """A doc fragment of this collection (gpuprobe.layers.<file>[.<variable>]) as YAML, read as ansible-doc reads it."""
    parts = name.split(".")[2:]
    spec = importlib.util.spec_from_file_location("fragment", os.path.join(FRAGMENTS, parts[0] + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return yaml.safe_load(getattr(module.ModuleDocFragment, parts[1].upper() if len(parts) > 1 else "DOCUMENTATION"))


def _documentation(name):
    """A module's DOCUMENTATION as YAML (read from the file, as ansible-doc does, without importing the module), with
    the options and attributes of this collection's doc fragments it extends (the module's own keys win, as there)."""
    with open(os.path.join(MODULES, name + ".py")) as f:
        text = f.read()
    doc = yaml.safe_load(text.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment.startswith("gpuprobe.layers."):
            for key, entries in _fragment(fragment).items():
                if key in ("options", "attributes"):
                    for entry, value in entries.items():
                        doc.setdefault(key, {})[entry] = dict(value, **(doc.get(key) or {}).get(entry, {}))
    return doc


def _modules():
    return sorted(f[:-3] for f in os.listdir(MODULES) if f.endswith(".py") and not f.startswith("_"))


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
