# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_common.args, the one argument spec module, against what documents it: the doc fragment gpuprobe.layers._node
(DOCUMENTATION: node_layers' and node_verify's inspect options; PROBE: the probe's own), the DOCUMENTATION of the
modules whose spec lives there (with the fragments they extend), and the verify role's meta/argument_specs.yml,
whose verify_* options are verify_node's options 1:1. Names, types, defaults, choices, elements and required must
agree, so that a spec is changed in one place and its documentation cannot drift."""
from __future__ import annotations

import os

import pytest
import yaml

from ansible_collections.gpuprobe.layers.plugins.doc_fragments import _node as node_fragment
from ansible_collections.gpuprobe.layers.plugins.doc_fragments import _record_limits as limits_fragment
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import args as _args
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import vocab as _vocab
from ansible_collections.gpuprobe.layers.plugins.modules import fleet_report, node_layers, node_probe, node_verify, verify_node

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FRAGMENTS = {
    "gpuprobe.layers._node": node_fragment.ModuleDocFragment.DOCUMENTATION,
    "gpuprobe.layers._node.probe": node_fragment.ModuleDocFragment.PROBE,
    "gpuprobe.layers._record_limits": limits_fragment.ModuleDocFragment.DOCUMENTATION,
}
# the options a role's task passes as omit when the role's value is empty (roles/verify/tasks/main.yml:
# "{{ verify_x | default(omit, true) }}"): the role says "" of type str where the action has no default


def _omitted_when_empty():
    """The role options its tasks pass as ``verify_X | default(omit, true)``: an empty string is the action's None."""
    import re  # pylint: disable=import-outside-toplevel
    with open(os.path.join(ROOT, "roles", "verify", "tasks", "main.yml"), encoding="utf-8") as f:
        return tuple(sorted(set(re.findall(r"\{\{\s*verify_(\w+)\s*\|\s*default\(omit,\s*true\)\s*\}\}", f.read()))))


OMITTED_WHEN_EMPTY = _omitted_when_empty()


def _options(text):
    return (yaml.safe_load(text) or {}).get("options") or {}


def documented(module):
    """The options a module documents: its own and those of the collection's fragments it extends."""
    doc = yaml.safe_load(module.DOCUMENTATION)
    out = dict(doc.get("options") or {})
    for fragment in doc.get("extends_documentation_fragment") or []:
        if fragment in FRAGMENTS:  # (gpuprobe.layers._attributes documents attributes, no option)
            for name, option in _options(FRAGMENTS[fragment]).items():
                assert name not in out, "%s documents %s twice" % (module.__name__, name)
                out[name] = option
    return out


def _norm_doc(option):
    out = {"type": option.get("type", "str"), "default": option.get("default"), "choices": option.get("choices"),
           "elements": option.get("elements"), "required": bool(option.get("required", False))}
    if option.get("suboptions"):
        out["options"] = dict((k, _norm_doc(v)) for k, v in option["suboptions"].items())
    return out


def _norm_spec(spec):
    out = {"type": spec.get("type", "str"), "default": spec.get("default"),
           "choices": list(spec["choices"]) if spec.get("choices") is not None else None,
           "elements": spec.get("elements"), "required": bool(spec.get("required", False))}
    if spec.get("options"):
        out["options"] = dict((k, _norm_spec(v)) for k, v in spec["options"].items())
    return out


def disagreements(docs, spec):
    """What differs between documented options and an argument spec, one line each."""
    lines = ["%s: documented, not in the argument spec" % n for n in sorted(set(docs) - set(spec))]
    lines += ["%s: in the argument spec, not documented" % n for n in sorted(set(spec) - set(docs))]
    for name in sorted(set(docs) & set(spec)):
        want, got = _norm_doc(docs[name]), _norm_spec(spec[name])
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                lines.append("%s.%s: documented %r, argument spec %r" % (name, key, want.get(key), got.get(key)))
    return lines


def test_the_fragment_documents_the_inspect_stage_spec():
    assert disagreements(_options(node_fragment.ModuleDocFragment.DOCUMENTATION), _args.NODE_LAYERS_ARGSPEC) == []


def test_the_fragment_documents_the_probes_own_options():
    probe_docs = _options(node_fragment.ModuleDocFragment.PROBE)
    assert sorted(probe_docs) == sorted(_args.PROBE_OPTIONS)
    assert disagreements(probe_docs, dict((n, _args.NODE_PROBE_ARGSPEC[n]) for n in _args.PROBE_OPTIONS)) == []


@pytest.mark.parametrize("module,spec", [
    (node_layers, _args.NODE_LAYERS_ARGSPEC),
    (node_probe, _args.NODE_PROBE_ARGSPEC),
    (node_verify, _args.NODE_VERIFY_ARGSPEC),
    (verify_node, _args.VERIFY_NODE_ARGSPEC),
    (fleet_report, _args.FLEET_REPORT_ARGSPEC),
], ids=lambda v: getattr(v, "__name__", "").rsplit(".", 1)[-1] or "spec")
def test_each_module_documents_its_spec(module, spec):
    assert disagreements(documented(module), spec) == []


def test_the_verify_roles_options_are_verify_nodes():
    with open(os.path.join(ROOT, "roles", "verify", "meta", "argument_specs.yml"), encoding="utf-8") as f:
        role = yaml.safe_load(f)["argument_specs"]["main"]["options"]
    spec = _args.VERIFY_NODE_ARGSPEC
    names = dict((n[len("verify_"):], o) for n, o in role.items() if n.startswith("verify_"))
    assert sorted(n for n in role if not n.startswith("verify_")) == []
    # every role option is an action option; the action's 'layers' is chosen by tags in the role (docs/usage.md)
    assert sorted(set(names) - set(spec)) == []
    assert sorted(set(spec) - set(names)) == ["layers"]
    bad = []
    for name, option in sorted(names.items()):
        want = _norm_spec(spec[name])
        got = _norm_doc(option)
        if name in OMITTED_WHEN_EMPTY and got["default"] == "" and got["type"] == "str" and want["default"] is None:
            got.update(type=want["type"], default=None)
        got.pop("options", None)   # a role spec may leave a dict's keys to the action (record_limits, health_thresholds)
        want.pop("options", None)
        if got["type"] == "list" and got.get("elements") == "str" and want.get("elements") == "path":
            got["elements"] = "path"   # the role's lists are templated strings; the action expands the paths
        if got.get("choices") is None:
            got["choices"] = want.get("choices")   # the role leaves the closed sets to the action and the fleet checks
        for key in sorted(want):
            if want[key] != got.get(key):
                bad.append("verify_%s.%s: role %r, verify_node %r" % (name, key, got.get(key), want[key]))
    assert bad == []


def test_the_shared_words_are_the_layers_own():
    assert sorted(_cdi_spec.VARIANTS) == sorted(_vocab.VARIANTS)
    assert set(_vocab.INSPECT_LAYERS) | set(_vocab.PROBE_LAYERS) == set(_args.VERIFY_NODE_ARGSPEC["layers"]["choices"])
    assert _vocab.RUNTIMES == ("auto",) + _vocab.ENGINES and set(_vocab.CRI_ENGINES) <= set(_vocab.ENGINES)
