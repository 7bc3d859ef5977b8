# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE doc fragment: the option record_limits of verify_node and fleet_report (not public API). The argument spec
is _common.args.RECORD_LIMITS_SPEC, the defaults _common.limits.DEFAULT_LIMITS."""


class ModuleDocFragment(object):  # pylint: disable=too-few-public-methods

    DOCUMENTATION = r"""
options:
  record_limits:
    description:
      - The cap on what one node may return, checked where its records enter the controller (M(gpuprobe.layers.verify_node)
        as the node's result arrives, M(gpuprobe.layers.fleet_report) as the records are read back;
        L(docs/safety.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/safety.md)).
      - Above any limit, or when its records do not conform to the result contract
        (L(docs/contract.md,https://github.com/gpuprobe/gpuprobe.layers/blob/main/docs/contract.md), with the types of
        every field the report reads), the node's records are dropped before anything reads, spools or renders them, its
        layers are C(NOT_RUN) and the node is RUN_FAILED, the reason starting with "malformed record from the node" and
        naming the sizes or the violations. Every other node is reported as usual.
      - The node-side modules cut every string longer than the default O(record_limits.max_string) with a marker (never
        a status), so an honest node stays within the defaults (its records are about 70 KB, with fewer than 300 checks).
      - The verify role's C(verify_record_limits) sets it for both (the fleet playbook passes it to the report).
    type: dict
    default: {}
    suboptions:
      max_bytes:
        description: The most bytes of JSON one node's records (all layers, all runtimes) may hold. Default 33554432 (32 MiB).
        type: int
      max_checks:
        description: The most checks one record may hold. Default 10000.
        type: int
      max_string:
        description: The longest string (characters) anywhere in a node's records. Default 65536.
        type: int
      max_clock_skew:
        description:
          - The seconds a node's clock may differ from the controller's. Every record is bound to the run that asked for
            it; its C(started_at) must lie between the run's start (the verify task's, on the controller) and now, each
            widened by this allowance. Records outside it, or naming another run's id, probe container, self-built CDI
            kind or spec file, are another run's; the node is RUN_FAILED, the reason starting with "record of another run
            from the node". Default 300 (5 minutes).
        type: int
"""
