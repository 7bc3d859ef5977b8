"""Every module's DOCUMENTATION, EXAMPLES and RETURN parse as YAML, and its documented options are exactly its
argument spec, with the same types and defaults (what ansible-test validate-modules also checks)."""
import ast
import importlib
import inspect
import os

import pytest
import yaml

MODULES_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "modules")
MODULES = sorted(f[:-3] for f in os.listdir(MODULES_DIR) if f.endswith(".py") and not f.startswith("_"))


def _argument_spec(module):
    tree = ast.parse(inspect.getsource(module.main))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "argument_spec" and isinstance(node.value, ast.Call):
            return dict((kw.arg, dict((k.arg, k.value) for k in kw.value.keywords)) for kw in node.value.keywords)
    return None


@pytest.mark.parametrize("name", MODULES)
def test_module_docs_parse_and_match_the_argument_spec(name):
    module = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.modules.%s" % name)
    doc = yaml.safe_load(module.DOCUMENTATION)
    yaml.safe_load(module.EXAMPLES)
    yaml.safe_load(module.RETURN)
    spec = _argument_spec(module)
    if spec is None:  # an action-backed module may build its spec elsewhere
        return
    assert sorted(spec) == sorted(doc.get("options") or {})
    for option, fields in spec.items():
        documented = doc["options"][option]
        assert ast.literal_eval(fields["type"]) == documented.get("type"), option
        if "default" in fields:
            try:
                default = ast.literal_eval(fields["default"])
            except ValueError:  # a name (a module constant): the doc states its value
                continue
            assert default == documented.get("default"), option
