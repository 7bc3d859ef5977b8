# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the kernel's Xid log: the NVRM Xid events of this boot, for host.health.xid. Not public API.

``read_kernel_xids`` reads this boot's kernel log through _common/run.py's ``run`` (journalctl -k -b, else dmesg;
of a long log, the lines that start with the Xid prefix are kept wherever they are) and ``parse_xids`` turns its Xid
lines into events: the GPU's PCI address, the Xid, the GPU instance of a MIG GPU's line and the Xid's documented
meaning (``XID_MEANINGS``). ``XID_FAIL`` lists the Xids that mean memory or the GPU itself is lost or needs a reset
(_host/health/judge.py FAILs them).
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run, which

KERNEL_LOG_TIMEOUT = 15.0
XID_PREFIX = b"NVRM: Xid"
# the kernel log of this boot, first source that answers with any line (a booted kernel's log is never empty)
KERNEL_LOG_COMMANDS = (("journalctl", "-k", "-b", "--no-pager", "-q", "-o", "cat"), ("dmesg", "--notime"))
# Xid meanings (NVIDIA's Xid catalogue); the FAIL ones mean memory or the GPU itself is lost or needs a reset
XID_MEANINGS = {
    13: "graphics engine exception (usually an application fault, e.g. an out-of-range access)",
    31: "GPU memory page fault (usually an application's illegal address)",
    32: "invalid or corrupted push buffer stream",
    38: "driver firmware error",
    43: "GPU stopped processing (a faulting application's channel was reset)",
    45: "preemptive cleanup after previous errors (a process ended while its work ran)",
    48: "double-bit ECC error (uncorrectable memory error)",
    56: "display engine error",
    57: "error programming video memory interface",
    61: "internal micro-controller breakpoint/warning",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event (a reset is needed to apply it)",
    64: "ECC page retirement or row remapper recording failure",
    68: "video processor exception",
    69: "graphics engine class error",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error (the application on the bad memory was stopped; the GPU needs a reset)",
    95: "uncontained ECC error (every application on the GPU is affected; the GPU needs a reset)",
    109: "context switch timeout",
    119: "GSP RPC timeout",
    120: "GSP error",
    121: "C2C link corrected error",
    140: "unrecovered ECC error",
    154: "GPU recovery action changed (the driver asks for a reset or a reboot)",
}
XID_FAIL = frozenset((48, 63, 64, 79, 94, 95))
# "NVRM: Xid (PCI:0000:01:00): 94, ..." and, on a MIG GPU, "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ..." (NVIDIA's
# GPU memory error management guide, Table 3): the GPU instance the event hit
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?(?: GPU-I:(\d+))?\): "
                  r"(\d+)(?:, (.*))?")


def parse_xids(text):
    """The NVRM Xid events of kernel log text: [{pci (dddd:bb:dd), xid, gpu_instance (the GPU-I of a MIG GPU's line,
    else None), detail, meaning, line}]."""
    events = []
    for line in (text or "").splitlines():
        match = _XID.search(line)
        if not match:
            continue
        domain, bus, dev = match.group(1).split(":")
        xid = int(match.group(3))
        events.append({"pci": "%04x:%s:%s" % (int(domain, 16), bus.lower(), dev.lower()), "xid": xid,
                       "gpu_instance": int(match.group(2)) if match.group(2) is not None else None,
                       "detail": (match.group(4) or "").strip(), "meaning": XID_MEANINGS.get(xid, "not in the catalogue here"),
                       "line": line.strip()[:500]})
    return events


def read_kernel_xids(root="/", timeout=KERNEL_LOG_TIMEOUT):
    """{source, error, events, lines}: the Xid events of this boot from the first kernel log source that gives any
    line; source None and error saying why when none could be read (the node tree of a test has no kernel log)."""
    if os.path.realpath(root) != "/":
        return {"source": None, "error": "the kernel log is only read when root is /", "events": [], "lines": 0}
    tried = []
    for argv in KERNEL_LOG_COMMANDS:
        if which(argv[0]) is None:
            tried.append("%s: not installed" % argv[0])
            continue
        res = run(list(argv), timeout=timeout, keep_prefix=XID_PREFIX)
        text = res["stdout"] or ""
        if res["rc"] == 0 and text.strip():
            return {"source": " ".join(argv), "error": None, "events": parse_xids(text), "lines": len(text.splitlines()),
                    "truncated": res["truncated"]}
        why = res["error"] or ("rc %s: %s" % (res["rc"], (res["stderr"] or "").strip()[:200] or "no output")
                               if res["rc"] != 0 else "no line (no kernel log for this boot)")
        tried.append("%s: %s" % (" ".join(argv), why))
    return {"source": None, "error": "; ".join(tried), "events": [], "lines": 0}
