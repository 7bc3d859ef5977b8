"""The attributes doc fragment (plugins/doc_fragments/_attributes.py): FACTS and ACTION repeat DOCUMENTATION whole
(ansible-test's yamllint reads each as one string literal) and only add to it; a module that declares the facts
attributes (its action plugin keeps its payload) has that action plugin, and the other way round."""
import os
import re

import yaml

from ansible_collections.gpuprobe.layers.plugins.doc_fragments._attributes import ModuleDocFragment as Fragment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BASE = yaml.safe_load(Fragment.DOCUMENTATION)


def test_facts_and_action_are_documentation_and_only_add_to_it():
    for text, added in ((Fragment.FACTS, {"facts", "action"}), (Fragment.ACTION, {"action", "async", "bypass_host_loop"})):
        assert text.startswith(Fragment.DOCUMENTATION.rstrip("\n"))
        doc = yaml.safe_load(text)
        assert doc["author"] == BASE["author"] and set(doc) == set(BASE)
        assert dict((k, v) for k, v in doc["attributes"].items() if k in BASE["attributes"]) == BASE["attributes"]
        assert set(doc["attributes"]) - set(BASE["attributes"]) == added


def _modules_extending(fragment):
    found = set()
    for name in os.listdir(os.path.join(ROOT, "plugins", "modules")):
        with open(os.path.join(ROOT, "plugins", "modules", name)) as f:
            if re.search(r"^  - %s$" % re.escape(fragment), f.read(), re.M):
                found.add(name[:-3])
    return found


def test_a_module_documented_as_keeping_its_payload_has_the_action_that_keeps_it():
    kept = set()
    for name in os.listdir(os.path.join(ROOT, "plugins", "action")):
        with open(os.path.join(ROOT, "plugins", "action", name)) as f:
            if "plugin_utils._kept_module import KeptPayloadAction as ActionModule" in f.read():
                kept.add(name[:-3])
    assert kept == _modules_extending("gpuprobe.layers._attributes.facts")
    assert kept == {"host_facts", "cdi_facts", "runtime_facts", "compute_facts", "k8s_facts"}
    assert _modules_extending("gpuprobe.layers._attributes.action") == {"verify_node", "fleet_report"}
