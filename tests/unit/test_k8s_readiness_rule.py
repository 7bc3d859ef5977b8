"""docs/k8s.md's NodeReadinessRule examples, checked against the Node Readiness Controller's own CRD (issue 36.5).

The CRD is kubernetes-sigs/node-readiness-controller's, copied unchanged into tests/unit/fixtures/k8s/node-readiness-controller/
(its README names the commit). What a `kubectl apply` of a rule meets on create, restated here:

* the CRD's openAPIV3Schema (jsonschema; an unknown field is refused, as kubectl's default strict field validation does);
* every ``x-kubernetes-validations`` CEL rule of the schema that applies on create (a rule that reads ``oldSelf`` is a
  transition rule, evaluated only on update): each is restated in Python in ``CEL_ON_CREATE``, and a rule that is not
  there fails the test, so a newer CRD cannot pass unread;
* the controller's admission webhook (internal/webhook/nodereadinessgaterule_webhook.go there): a non-empty
  nodeSelector, no ``defaultStatus`` and no ``conditionPolicy: anyOf`` with ``bootstrap-only``, and no two rules with the
  same taint key and effect on overlapping nodes (the examples are meant to be applied together: their taints differ).
"""
import copy
import json
import os
import re

import jsonschema
import pytest
import yaml

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import publish as _k8s_publish

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRD = os.path.join(ROOT, "tests", "unit", "fixtures", "k8s", "node-readiness-controller",
                   "readiness.node.x-k8s.io_nodereadinessrules.yaml")
DOC = os.path.join(ROOT, "docs", "k8s.md")
_TAINT_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# the CRD's CEL rules that apply on create, by their text, restated in Python (self: the value the rule is on)
CEL_ON_CREATE = {
    "self.key.startsWith('readiness.k8s.io/')": lambda s: s["key"].startswith("readiness.k8s.io/"),
    "self.key.size() <= 253": lambda s: len(s["key"]) <= 253,
    "size(self.key.split('/')) == 2": lambda s: len(s["key"].split("/")) == 2,
    "size(self.key.split('/')[1]) > 0 && size(self.key.split('/')[1]) <= 63":
        lambda s: 0 < len(s["key"].split("/")[1]) <= 63,
    "self.key.split('/')[1].matches('^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')":
        lambda s: bool(_TAINT_NAME.search(s["key"].split("/")[1])),
    "!has(self.value) || self.value.size() <= 63": lambda s: "value" not in s or len(s["value"]) <= 63,
    "self.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute']":
        lambda s: s["effect"] in ("NoSchedule", "PreferNoSchedule", "NoExecute"),
}


def _version_schema():
    with open(CRD) as f:
        crd = yaml.safe_load(f)
    assert crd["spec"]["group"] == "readiness.node.x-k8s.io" and crd["spec"]["names"]["kind"] == "NodeReadinessRule"
    (version,) = [v for v in crd["spec"]["versions"] if v["served"] and v["storage"]]
    return "%s/%s" % (crd["spec"]["group"], version["name"]), version["schema"]["openAPIV3Schema"]


def _dicts(node):
    """Every dict of a parsed YAML/JSON tree, each before what it holds (a caller may change it as it goes)."""
    if isinstance(node, dict):
        yield node
        for value in list(node.values()):
            yield from _dicts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _dicts(value)


def _strict(schema):
    """The schema with unknown fields refused (additionalProperties false where the object lists its properties)."""
    schema = copy.deepcopy(schema)
    for node in _dicts(schema):
        if node.get("type") == "object" and "properties" in node and "additionalProperties" not in node:
            node["additionalProperties"] = False
    return schema


def _cel_rules(schema, value, path="", out=None):
    """(path, rule, value) of every x-kubernetes-validations rule of ``schema`` that has a value in ``value``."""
    out = [] if out is None else out
    for item in schema.get("x-kubernetes-validations") or []:
        out.append((path or "<root>", item["rule"], item["message"], value))
    if isinstance(value, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name in value:
                _cel_rules(sub, value[name], "%s.%s" % (path, name), out)
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _cel_rules(schema["items"], item, "%s[%d]" % (path, i), out)
    return out


def rule_errors(rule):
    """Why the API server or the controller's webhook would refuse ``rule`` on create ([] when it would not)."""
    api_version, schema = _version_schema()
    errors = ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "<root>", e.message)
              for e in jsonschema.Draft7Validator(_strict(schema)).iter_errors(rule)]
    if rule.get("apiVersion") != api_version or rule.get("kind") != "NodeReadinessRule":
        errors.append("apiVersion/kind %s/%s, not %s NodeReadinessRule" % (rule.get("apiVersion"), rule.get("kind"), api_version))
    name = (rule.get("metadata") or {}).get("name") or ""
    if not (_DNS_SUBDOMAIN.match(name) and len(name) <= 253):
        errors.append("metadata.name %r is not a DNS subdomain" % name)
    if errors:
        return errors  # the CEL rules and the webhook see only objects the schema admitted
    for path, cel, message, value in _cel_rules(schema, rule):
        if "oldSelf" in cel:
            continue  # a transition rule: evaluated on update only
        assert cel in CEL_ON_CREATE, "a CEL rule of the CRD this test does not restate (at %s): %s" % (path, cel)
        if not CEL_ON_CREATE[cel](value):
            errors.append("%s: %s" % (path, message))
    spec = rule["spec"]
    selector = spec["nodeSelector"]
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errors.append("spec.nodeSelector: nodeSelector must not be empty (webhook)")
    if spec["enforcementMode"] == "bootstrap-only":
        errors += ["spec.conditions[%d].defaultStatus: not with bootstrap-only (webhook)" % i
                   for i, c in enumerate(spec["conditions"]) if "defaultStatus" in c]
        if spec.get("conditionPolicy") == "anyOf":
            errors.append("spec.conditionPolicy: anyOf not with bootstrap-only (webhook)")
    return errors


def _doc_blocks(lang):
    with open(DOC) as f:
        return re.findall(r"```%s\n(.*?)```" % lang, f.read(), re.S)


def doc_rules():
    rules = [yaml.safe_load(block) for block in _doc_blocks("yaml") if "kind: NodeReadinessRule" in block]
    return rules


def test_the_doc_has_the_three_rules():
    assert sorted(r["metadata"]["name"] for r in doc_rules()) == [
        "gpu-compute-bootstrap", "gpu-compute-continuous", "gpu-compute-problem"]


@pytest.mark.parametrize("rule", doc_rules(), ids=lambda r: r["metadata"]["name"])
def test_doc_rule_is_accepted_by_the_crd_and_the_webhook(rule):
    assert rule_errors(rule) == []


def test_doc_rules_can_be_applied_together():
    """The webhook refuses a rule with the same taint key and effect as another on overlapping nodes: every example
    selects the same nodes, so their taints must differ."""
    taints = [(r["spec"]["taint"]["key"], r["spec"]["taint"]["effect"]) for r in doc_rules()]
    assert len(set(taints)) == len(taints), taints


def test_rules_gate_on_what_the_collection_writes():
    """The verified rules gate on k8s_publish's default condition type and require True (COMPUTE_VERIFIED); the problem
    rule gates on the condition the NPD plugin config of the doc declares, problem-oriented (False is healthy)."""
    rules = dict((r["metadata"]["name"], r) for r in doc_rules())
    for name in ("gpu-compute-bootstrap", "gpu-compute-continuous"):
        assert rules[name]["spec"]["conditions"] == [{"type": _k8s_publish.CONDITION_TYPE, "requiredStatus": "True"}]
    (npd,) = [json.loads(b) for b in _doc_blocks("json") if '"plugin": "custom"' in b]
    (condition,) = npd["conditions"]
    assert npd["rules"][0]["condition"] == condition["type"]
    assert rules["gpu-compute-problem"]["spec"]["conditions"] == [
        {"type": condition["type"], "requiredStatus": "False", "defaultStatus": "False"}]
    # the taint the doc says to register new nodes with is the bootstrap rule's
    taint = rules["gpu-compute-bootstrap"]["spec"]["taint"]
    with open(DOC) as f:
        assert "--register-with-taints=%s=%s:%s" % (taint["key"], taint["value"], taint["effect"]) in f.read()


BASE = {"apiVersion": "readiness.node.x-k8s.io/v1alpha1", "kind": "NodeReadinessRule", "metadata": {"name": "r"},
        "spec": {"nodeSelector": {"matchLabels": {"a": "b"}}, "conditions": [{"type": "C", "requiredStatus": "True"}],
                 "taint": {"key": "readiness.k8s.io/c", "effect": "NoSchedule"}, "enforcementMode": "continuous"}}


def _with(path, value):
    rule = copy.deepcopy(BASE)
    node = rule
    for key in path[:-1]:
        node = node[key]
    if value is None:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return rule


@pytest.mark.parametrize("rule, expected", [
    (_with(("spec", "taint", "key"), "gpuprobe.layers/c"), "taint key must start with 'readiness.k8s.io/'"),
    (_with(("spec", "taint", "key"), "readiness.k8s.io/-c"), "taint key name part must consist of"),
    (_with(("spec", "taint", "effect"), "NoEvict"), "taint effect must be one of"),
    (_with(("spec", "taint", "value"), "v" * 64), "taint value length must be at most 63"),
    (_with(("spec", "conditions"), [{"type": "C", "requiredStatus": "Yes"}]), "'Yes' is not one of"),
    (_with(("spec", "conditions"), []), "should be non-empty"),
    (_with(("spec", "enforcementMode"), None), "'enforcementMode' is a required property"),
    (_with(("spec", "taint", "unknownField"), 1), "Additional properties are not allowed"),
    (_with(("spec", "nodeSelector"), {}), "nodeSelector must not be empty"),
    (_with(("spec", "conditions"), [{"type": "C", "requiredStatus": "True", "defaultStatus": "False"}]),
     None),  # continuous: allowed
    (_with(("metadata", "name"), "GPU_rule"), "not a DNS subdomain"),
])
def test_the_checks_refuse_what_the_controller_refuses(rule, expected):
    errors = rule_errors(rule)
    if expected is None:
        assert errors == []
    else:
        assert any(expected in e for e in errors), errors


def test_webhook_rules_for_bootstrap_only():
    rule = _with(("spec", "enforcementMode"), "bootstrap-only")
    assert rule_errors(rule) == []
    rule["spec"]["conditions"][0]["defaultStatus"] = "False"
    rule["spec"]["conditionPolicy"] = "anyOf"
    assert rule_errors(rule) == ["spec.conditions[0].defaultStatus: not with bootstrap-only (webhook)",
                                 "spec.conditionPolicy: anyOf not with bootstrap-only (webhook)"]


def test_every_cel_rule_of_the_crd_is_known_or_a_transition_rule():
    _api, schema = _version_schema()
    rules = set(item["rule"] for node in _dicts(schema) for item in node.get("x-kubernetes-validations") or [])
    on_create = set(r for r in rules if "oldSelf" not in r)
    assert on_create == set(CEL_ON_CREATE)


# ---- issue 43: the rules against what k8s_publish writes, and the DaemonSets that must run on a tainted node ----


def _tolerates(tolerations, taint):
    return any(t.get("key") == taint["key"] and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
               and t.get("effect") in (None, taint["effect"]) for t in tolerations)


def test_the_gpu_operator_values_tolerate_every_taint_of_the_rules():
    """The GPU Operator's operands and NFD's worker must land on a node the bootstrap taint keeps (else it never gets a
    driver or its labels) and come back on a tainted node; the chart's own nvidia.com/gpu toleration is kept."""
    (values,) = [yaml.safe_load(b) for b in _doc_blocks("yaml") if b.lstrip().startswith("# GPU Operator Helm values")]
    taints = [r["spec"]["taint"] for r in doc_rules()]
    for tolerations in (values["daemonsets"]["tolerations"], values["node-feature-discovery"]["worker"]["tolerations"]):
        assert [t["key"] for t in taints if not _tolerates(tolerations, t)] == []
        assert _tolerates(tolerations, {"key": "nvidia.com/gpu", "effect": "NoSchedule"})


@pytest.mark.parametrize("mode", _k8s_publish.MODES)
@pytest.mark.parametrize("verdict", ["COMPUTE_VERIFIED", "FAILED_AT_HOST", "FAILED_AT_CDI", "FAILED_AT_RUNTIME",
                                     "FAILED_AT_COMPUTE", "INCONCLUSIVE"])
def test_the_continuous_rule_takes_a_verified_node_out_only_on_a_proven_failure(mode, verdict):
    """A Node verified by an earlier run, then published by a run of ``mode`` whose verdict for it is ``verdict``: the
    continuous rule taints it only when that run proved a failure (an unreachable node, a busy GPU, an audit of a
    verified node leave its True)."""
    rule = dict((r["metadata"]["name"], r) for r in doc_rules())["gpu-compute-continuous"]
    (required,) = rule["spec"]["conditions"]
    before = {"type": required["type"], "status": "True", "reason": "COMPUTE_VERIFIED", "message": "m",
              "lastTransitionTime": "2026-12-01T00:00:00Z"}
    node = {"metadata": {"name": "gpu-a", "labels": dict(rule["spec"]["nodeSelector"]["matchLabels"])},
            "status": {"conditions": [before]}}
    plans, _unmatched, _kept = _k8s_publish.plan({"items": [node]}, {"gpu-a": verdict}, "2026-12-03T00:00:00Z", mode=mode)
    status = plans[0]["condition"]["status"] if plans else before["status"]
    proven = verdict.startswith("FAILED_AT_") and (mode != "audit" or verdict in ("FAILED_AT_HOST", "FAILED_AT_CDI"))
    assert (status != required["requiredStatus"]) == proven
