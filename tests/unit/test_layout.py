# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The code is laid out as the architecture is (docs/code-map.md): one room (package) per layer and concern, each
with its doors. Read from the source tree with ``ast`` (every import, at any depth, counts: AnsiballZ ships what any
import names)."""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
PREFIX = "ansible_collections.gpuprobe.layers.plugins."

# the modules of a room that code outside it may import ("*": every module; the shared kit)
DOORS = {
    "module_utils._common": "*",
    "module_utils._host": {"layer", "catalogue", "busy", "driver"},
    "module_utils._host.health": {"readers", "xid", "dcgm", "judge", "limits", "reasons"},
    "module_utils._cdi": {"layer", "catalogue", "spec", "engine", "trust"},
    "module_utils._runtime": {"layer", "catalogue", "select", "cleanup", "handler", "nodefs"},
    "module_utils._probe": {"script", "contract"},
    "module_utils._compute": {"layer", "catalogue", "binding", "host_control"},
    "module_utils._k8s": {"layer", "catalogue", "nodes", "publish"},
    "module_utils._node": {"inspect", "gate", "probe", "verify"},
    "module_utils._verdict": {"verdict", "attribution"},
    "plugin_utils._report": "*",
}
# what no plugin file may exceed (the standalone probe script is one file by design: it is copied into the container)
MAX_LINES = 600
LONG_BY_DESIGN = {"plugins/module_utils/_probe/script.py"}
# files still waiting for their split (issue 33); each leaves this list in the commit that splits it
STILL_LONG = set()


def _modules():
    out = {}
    for base in ("module_utils", "plugin_utils"):
        for dirpath, _dirs, files in os.walk(os.path.join(PLUGINS, base)):
            for name in files:
                if name.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, name), PLUGINS)[:-3].replace(os.sep, ".")
                    out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(dirpath, name)
    return out


MODULES = _modules()


def _imports(path):
    """The collection's modules a file imports (a ``from pkg import name`` where name is a module counts as that module)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PREFIX):
            src = node.module[len(PREFIX):]
            for alias in node.names:
                found.add(src + "." + alias.name if src + "." + alias.name in MODULES else src)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PREFIX):
                    found.add(alias.name[len(PREFIX):])
    return found


def _room(module):
    """The room (package) a module is in: the deepest package of DOORS that holds it, or None."""
    best = None
    for room in DOORS:
        if module.startswith(room + ".") and (best is None or len(room) > len(best)):
            best = room
    return best


def _all_sources():
    for base in ("modules", "action", "callback", "filter", "module_utils", "plugin_utils", "doc_fragments"):
        for dirpath, _dirs, files in os.walk(os.path.join(PLUGINS, base)):
            for name in files:
                if name.endswith(".py"):
                    yield os.path.join(dirpath, name)


def _module_name(path):
    rel = os.path.relpath(path, PLUGINS)[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def test_module_utils_has_no_layer_file_outside_its_room():
    top = sorted(n for n in os.listdir(os.path.join(PLUGINS, "module_utils")) if n.endswith(".py") and n != "__init__.py")
    assert top == [], "files directly in plugins/module_utils (each belongs in a room): %s" % top


def test_every_init_under_module_utils_and_modules_is_empty():
    """ansible-core 2.17's sanity (empty-init; the collection claims 2.17) requires every __init__.py under
    plugins/module_utils and plugins/modules to be empty: not even a docstring (2.19 dropped module_utils from the
    rule). What a room holds is said in docs/code-map.md and in its door modules' docstrings."""
    found = []
    for top in ("module_utils", "modules"):
        for dirpath, _dirs, files in os.walk(os.path.join(PLUGINS, top)):
            if "__init__.py" in files and os.path.getsize(os.path.join(dirpath, "__init__.py")) > 0:
                found.append(os.path.relpath(os.path.join(dirpath, "__init__.py"), ROOT))
    assert found == []


def test_every_room_is_a_package_whose_init_only_documents():
    for room in DOORS:
        init = os.path.join(PLUGINS, room.replace(".", os.sep), "__init__.py")
        with open(init, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        assert body == [], "%s: an __init__ that does more than document (re-exports load the whole room): %s" % (
            room, [ast.dump(n)[:80] for n in body])


@pytest.mark.parametrize("path", sorted(_all_sources()), ids=lambda p: os.path.relpath(p, PLUGINS))
def test_code_outside_a_room_enters_only_by_its_doors(path):
    me = _module_name(path)
    bad = []
    for target in sorted(_imports(path)):
        room = _room(target)
        if room is None or _room(me) == room or me.startswith(room + "."):
            continue
        doors = DOORS[room]
        if doors != "*" and target[len(room) + 1:].split(".")[0] not in doors:
            bad.append(target)
    assert bad == [], "%s imports %s, which are not doors of their rooms (DOORS)" % (me, bad)


def test_no_import_cycle():
    graph = {m: {t for t in _imports(p) if t in MODULES and t != m} for m, p in MODULES.items()}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v, counter=[0]):  # pylint: disable=dangerous-default-value
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert cycles == []


def test_no_plugin_file_is_over_the_line_limit():
    long_files = []
    for dirpath, _dirs, files in os.walk(PLUGINS):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, ROOT)
                with open(path, encoding="utf-8") as f:
                    n = sum(1 for _line in f)
                if (n > MAX_LINES) != (rel in STILL_LONG) and rel not in LONG_BY_DESIGN:
                    long_files.append((rel, n))
    assert long_files == [], "over %d lines, or split and still listed in STILL_LONG" % MAX_LINES
