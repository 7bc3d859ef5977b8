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


def _reserved_result_keys():
    """Keys of a task result that Ansible itself interprets (issue 19.3: probe_cleanup's ``skipped`` made the task
    show as skipped): those the task result strips or keeps (ansible.executor.task_result) and those the task
    executor reads (rc sets failed, results is a loop's, unreachable, ...)."""
    from ansible.executor import task_result  # pylint: disable=import-outside-toplevel

    keys = set(task_result._IGNORE) | set(task_result._PRESERVE)  # pylint: disable=protected-access
    keys |= {"failed", "skipped", "changed", "unreachable", "rc", "results", "skip_reason", "invocation", "diff",
             "attempts", "retries", "exception", "warnings", "deprecations", "item", "ansible_loop_var"}
    return keys


def test_the_reserved_key_list_is_ansibles():
    reserved = _reserved_result_keys()
    assert {"skipped", "failed", "changed", "warnings"} <= reserved


@pytest.mark.parametrize("name", MODULES)
def test_no_module_returns_a_key_ansible_reserves(name):
    module = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.modules.%s" % name)
    returned = set(yaml.safe_load(module.RETURN) or {})
    clash = sorted(k for k in returned if k in _reserved_result_keys() or k.startswith("_ansible")
                   or (k.startswith("ansible_") and k != "ansible_facts"))
    assert clash == [], "%s returns keys Ansible reserves: %s" % (name, clash)


def test_probe_cleanup_result_has_no_reserved_key(tmp_path):
    """The real cleanup result (runtime=auto: every installed runtime is listed; a spec dir of its own)."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cleanup import cleanup  # pylint: disable=import-outside-toplevel

    out = cleanup(runtime="auto", spec_dir=str(tmp_path), check_mode=True, tmp_dir=str(tmp_path))
    module = importlib.import_module("ansible_collections.gpuprobe.layers.plugins.modules.probe_cleanup")
    assert set(out) - {"changed"} == set(yaml.safe_load(module.RETURN))
    assert not (set(out) - {"changed"}) & _reserved_result_keys()
