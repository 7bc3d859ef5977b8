"""The controller's cache of what it would rebuild on every run (plugin_utils/_controller_cache): the key follows every
source file, the directory must be this user's own, and a payload moves between the cache and the run's own place
only whole. Real ansible-playbook runs reusing a payload: tests/integration/test_controller_cache.py."""
import ast
import base64
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tokenize
import zipfile

import pytest

from ansible import constants as C
from ansible.executor.module_common import _CachedModule

from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _controller_cache as cc

ROOT = cc.COLLECTION_ROOT


@pytest.fixture(name="tree")
def _tree(tmp_path):
    """A copy of the collection's modules and module_utils (what the key covers)."""
    for sub in ("modules", "module_utils"):
        shutil.copytree(os.path.join(ROOT, "plugins", sub), str(tmp_path / "plugins" / sub))
    shutil.copytree(os.path.join(ROOT, "meta"), str(tmp_path / "meta"))
    cc._KEYS.clear()  # pylint: disable=protected-access
    yield str(tmp_path)
    cc._KEYS.clear()  # pylint: disable=protected-access


def test_the_key_changes_with_any_source_file(tree):
    before = cc.sources_key(tree)
    assert before == cc.sources_key(tree)
    for rel in ("plugins/module_utils/_cdi/resolve.py", "plugins/modules/node_layers.py", "meta/runtime.yml"):
        cc._KEYS.clear()  # pylint: disable=protected-access
        with open(os.path.join(tree, rel), "a") as f:
            f.write("\n# changed\n")
        after = cc.sources_key(tree)
        assert after != before
        before = after
    cc._KEYS.clear()  # pylint: disable=protected-access
    open(os.path.join(tree, "plugins", "module_utils", "_new.py"), "w").close()  # a new file too
    assert cc.sources_key(tree) != before


def test_the_key_changes_with_how_the_bytecode_is_made(tree, tmp_path, monkeypatch):
    # the payload's bytecode is made by _controller_cache itself: a payload kept by another form of it is never used
    builder = tmp_path / "_controller_cache.py"
    shutil.copy(cc.__file__, str(builder))
    monkeypatch.setattr(cc, "__file__", str(builder))
    cc._KEYS.clear()  # pylint: disable=protected-access
    before = cc.sources_key(tree)
    with open(str(builder), "a") as f:
        f.write("\n# another form of bytecode\n")
    cc._KEYS.clear()  # pylint: disable=protected-access
    assert cc.sources_key(tree) != before
    cc._KEYS.clear()  # pylint: disable=protected-access


def test_the_directory_is_this_users_own_or_none(tmp_path):
    assert cc.cache_dir("payloads", {cc.ENV: "off"}) is None
    where = cc.cache_dir("payloads", {cc.ENV: str(tmp_path / "c")})
    assert where == str(tmp_path / "c" / "payloads") and oct(os.stat(where).st_mode & 0o777) == "0o700"
    os.chmod(str(tmp_path / "c"), 0o777)  # writable by others: not used
    assert cc.cache_dir("payloads", {cc.ENV: str(tmp_path / "c")}) is None
    (tmp_path / "file").write_text("")
    assert cc.cache_dir("payloads", {cc.ENV: str(tmp_path / "file")}) is None


def test_a_payload_built_once_is_put_where_the_next_run_looks(tmp_path, monkeypatch):
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700)
    run1 = tmp_path / "run1"
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(run1))
    slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    assert slot.prime() is False  # nothing kept yet: Ansible builds it
    os.makedirs(os.path.dirname(slot.run_file))
    _CachedModule(zip_data=b"payload-1", metadata=None, source_mapping={}).dump(slot.run_file)  # what Ansible built
    built = open(slot.run_file, "rb").read()
    assert slot.keep() is True and open(slot.kept, "rb").read() == built
    assert os.path.basename(slot.run_file) == "ansible_collections.gpuprobe.layers.plugins.modules.node_layers-ZIP_DEFLATED-none"

    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run2"))
    slot2 = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    assert slot2.prime() is True and _CachedModule.load(slot2.run_file).zip_data == b"payload-1"
    assert slot2.keep() is False  # reused: nothing new to keep
    assert not [n for n in os.listdir(os.path.dirname(slot2.run_file)) if n.startswith(".gpuprobe-")]


def test_a_new_key_replaces_the_modules_older_payloads_only(tmp_path, monkeypatch):
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700)
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run"))
    fqn = "ansible_collections.gpuprobe.layers.plugins.modules."
    old = os.path.join(keep, fqn + "node_layers-ZIP_DEFLATED-" + "0" * 64)
    other = os.path.join(keep, fqn + "node_probe-ZIP_DEFLATED-" + "0" * 64)
    for path in (old, other):
        open(path, "w").close()
    slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    os.makedirs(os.path.dirname(slot.run_file))
    open(slot.run_file, "wb").close()
    assert slot.keep() is True
    assert sorted(n for n in os.listdir(keep) if not n.startswith(".lock-")) == sorted([os.path.basename(slot.kept), os.path.basename(other)])


def test_other_modules_and_extensions_are_never_cached(tmp_path, monkeypatch):
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run"))
    assert cc.Slot("ansible.builtin.ping", {}, directory=str(tmp_path)).kept is None
    monkeypatch.setattr(cc, "_extensions", lambda task_vars: ["coverage"])
    assert cc.Slot("gpuprobe.layers.node_layers", {}, directory=str(tmp_path)).kept is None
    monkeypatch.setattr(cc, "_extensions", lambda task_vars: None)  # cannot be known: not cached either
    assert cc.Slot("gpuprobe.layers.node_layers", {}, directory=str(tmp_path)).prime() is False


def test_a_damaged_kept_payload_is_removed_and_never_primed(tmp_path, monkeypatch):
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700)
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run"))
    slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    with open(slot.kept, "wb") as f:
        f.write(b"")  # what a crash in the middle of a copy could have left
    assert slot.prime() is False and not os.path.exists(slot.kept) and not os.path.exists(slot.run_file)


def test_the_template_cache_is_per_renderer_and_never_fails_a_report(tmp_path, monkeypatch):
    from jinja2 import FileSystemBytecodeCache
    monkeypatch.setenv(cc.ENV, str(tmp_path / "c"))
    cache = cc.template_cache()
    assert os.path.dirname(cache.directory) == str(tmp_path / "c" / "templates")

    def broken(self, bucket):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(FileSystemBytecodeCache, "dump_bytecode", broken)
    monkeypatch.setattr(FileSystemBytecodeCache, "load_bytecode", broken)
    from jinja2 import DictLoader, Environment
    env = Environment(loader=DictLoader({"t": "{{ x }}"}), bytecode_cache=cc.template_cache())
    assert env.get_template("t").render(x=1) == "1"
    monkeypatch.setenv(cc.ENV, "off")
    assert cc.template_cache() is None


def _zip(files, compression=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=compression) as z:
        for name, text in files.items():
            info = zipfile.ZipInfo(name, (2026, 12, 4, 0, 0, 0))
            info.compress_type = compression  # as ansible-core's _make_zinfo does
            z.writestr(info, text)
    return buf.getvalue()


PAYLOAD = {
    "pkg/__init__.py": "",
    "pkg/mod.py": "from __future__ import annotations\nVALUE = 'compiled once'\ndef f(x: int) -> int:\n    return x + 1\n",
    "pkg/broken.py": "def (:\n",   # this Python cannot compile it: no bytecode, the node sees the source
    "pkg/data.txt": "not Python",
}


def _import(zip_path, *names):
    """What a fresh interpreter imports from the zip (zipimport, as AnsiballZ runs a module): each module's file and
    VALUE, and whether its code came from bytecode."""
    code = ("import json, sys, importlib\nsys.path.insert(0, sys.argv[1])\nout = {}\n"
            "for n in sys.argv[2:]:\n"
            "    m = importlib.import_module(n)\n"
            "    out[n] = [m.__file__.rsplit('/', 1)[-1], getattr(m, 'VALUE', None), m.f(1) if hasattr(m, 'f') else None]\n"
            "print(json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-B", "-c", code, zip_path] + list(names), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def _built(tmp_path, monkeypatch, run="run", **entry):
    """A slot of node_layers over a keep dir of this test, with the payload Ansible built in its run (PAYLOAD)."""
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700, exist_ok=True)
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / run))
    slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    os.makedirs(os.path.dirname(slot.run_file))
    _CachedModule(zip_data=base64.b64encode(_zip(PAYLOAD)), **dict(dict(metadata=None, source_mapping={}), **entry)).dump(slot.run_file)
    return keep, slot


def test_a_kept_payload_carries_bytecode_that_the_node_imports(tmp_path, monkeypatch):
    keep, slot = _built(tmp_path, monkeypatch, metadata="meta", source_mapping={"a": "b"})
    assert slot.keep() is True
    for path in (slot.kept, slot.run_file):  # kept for the next run, and replaced for this run's later nodes
        entry = _CachedModule.load(path)
        assert isinstance(entry, _CachedModule) and entry.metadata == "meta" and entry.source_mapping == {"a": "b"}
        z = zipfile.ZipFile(io.BytesIO(base64.b64decode(entry.zip_data)))
        assert sorted(z.namelist()) == sorted(list(PAYLOAD) + ["pkg/__init__.pyc", "pkg/mod.pyc"])
        for name, text in PAYLOAD.items():  # every entry of Ansible's payload as it was
            assert z.read(name).decode() == text and z.getinfo(name).date_time == (2026, 12, 4, 0, 0, 0)
        assert z.getinfo("pkg/mod.pyc").compress_type == zipfile.ZIP_DEFLATED
    zip_path = str(tmp_path / "payload.zip")
    with open(zip_path, "wb") as f:
        f.write(base64.b64decode(_CachedModule.load(slot.kept).zip_data))
    assert _import(zip_path, "pkg.mod") == {"pkg.mod": ["mod.pyc", "compiled once", 2]}
    assert not [n for n in os.listdir(keep) + os.listdir(os.path.dirname(slot.run_file)) if n.startswith(".gpuprobe-")]


def _rezip(zip_bytes, change):
    src = zipfile.ZipFile(io.BytesIO(zip_bytes))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for info in src.infolist():
            z.writestr(info, change(info.filename, src.read(info)))
    return buf.getvalue()


def test_bytecode_of_another_python_is_never_used(tmp_path):
    # another bytecode magic: the node compiles the source beside it, as without bytecode
    compiled = cc.with_bytecode(_zip(PAYLOAD))
    changed = _rezip(compiled, lambda name, body: b"\x00\x00\r\n" + body[4:] if name.endswith(".pyc") else body)
    zip_path = str(tmp_path / "payload.zip")
    with open(zip_path, "wb") as f:
        f.write(changed)
    assert _import(zip_path, "pkg.mod") == {"pkg.mod": ["mod.py", "compiled once", 2]}


def test_the_bytecode_is_the_source_beside_it_without_docstrings_and_unchecked(tmp_path):
    documented = {"pkg/__init__.py": "", "pkg/mod.py": (
        '"""The module."""\nVALUE = "compiled once"\n\n\nclass K(object):\n    """A class."""\n\n'
        '    def m(self):\n        """Only a docstring."""\n\n\ndef f(x):\n    """One more."""\n    return x + 1\n')}
    compiled = zipfile.ZipFile(io.BytesIO(cc.with_bytecode(_zip(documented))))
    for name, text in documented.items():
        pyc = compiled.read(name + "c")
        # PEP 552: the magic of this Python, hash-based and unchecked (0b01), stamped with the hash of the source beside it
        assert pyc[:4] == importlib.util.MAGIC_NUMBER and int.from_bytes(pyc[4:8], "little") == 0b01
        assert pyc[8:16] == importlib.util.source_hash(text.encode()) and compiled.read(name).decode() == text
    zip_path = str(tmp_path / "payload.zip")
    with open(zip_path, "wb") as f:
        f.write(compiled.fp.getvalue())
    code = ("import json, sys\nsys.path.insert(0, sys.argv[1])\nimport pkg.mod as m\n"
            "print(json.dumps([m.__file__.rsplit('/', 1)[-1], m.__doc__, m.K.__doc__, m.K().m(), m.f.__doc__, m.f(1)]))\n")
    r = subprocess.run([sys.executable, "-B", "-c", code, zip_path], capture_output=True, text=True, check=True)
    assert json.loads(r.stdout) == ["mod.pyc", None, None, None, None, 2]


def test_bytecode_is_added_once_and_a_payload_it_cannot_read_is_kept_as_it_is(tmp_path, monkeypatch):
    compiled = cc.with_bytecode(_zip(PAYLOAD))
    assert cc.with_bytecode(compiled) == compiled
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700)
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / "run"))
    slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
    os.makedirs(os.path.dirname(slot.run_file))
    _CachedModule(zip_data=b"not base64 of a zip!", metadata=None, source_mapping={}).dump(slot.run_file)
    built = open(slot.run_file, "rb").read()
    assert slot.keep() is True
    assert open(slot.kept, "rb").read() == built and open(slot.run_file, "rb").read() == built


def test_payloads_can_be_kept_without_bytecode_and_one_kind_replaces_the_other(tmp_path, monkeypatch):
    # GPUPROBE_PAYLOAD_BYTECODE=off: for nodes whose Python is another version (they would refuse the bytecode)
    keep = str(tmp_path / "keep")
    os.makedirs(keep, mode=0o700)
    built = _CachedModule(zip_data=base64.b64encode(_zip(PAYLOAD)), metadata=None, source_mapping={})
    kept = {}
    for n, value in enumerate(("off", "on", "no")):
        monkeypatch.setenv(cc.BYTECODE_ENV, value)
        monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path / ("run%d" % n)))
        slot = cc.Slot("gpuprobe.layers.node_layers", {}, directory=keep)
        os.makedirs(os.path.dirname(slot.run_file))
        built.dump(slot.run_file)
        # the other kind is gone, and its lock file
        assert slot.keep() is True and sorted(os.listdir(keep)) == [".lock-" + os.path.basename(slot.kept), os.path.basename(slot.kept)]
        names = zipfile.ZipFile(io.BytesIO(base64.b64decode(_CachedModule.load(slot.kept).zip_data))).namelist()
        kept[value] = (slot.kept.rsplit("-", 1)[1], any(name.endswith(".pyc") for name in names))
    assert kept == {"off": ("src", False), "on": ("pyc", True), "no": ("src", False)}
    assert cc.bytecode_wanted({}) is True and cc.bytecode_wanted({cc.BYTECODE_ENV: "OFF"}) is False


def test_one_worker_keeps_a_payload_the_others_leave_it(tmp_path, monkeypatch):
    # forks of one run reach keep() together: the one holding the lock compiles and keeps, the others do nothing
    import fcntl
    keep, slot = _built(tmp_path, monkeypatch)
    lock_path = os.path.join(keep, ".lock-" + os.path.basename(slot.kept))
    with open(lock_path, "w") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # another worker is keeping it
        assert slot.keep() is False and not os.path.exists(slot.kept)
    assert slot.keep() is True and os.path.exists(slot.kept)  # the lock is free again
    assert sorted(os.listdir(keep)) == sorted([os.path.basename(slot.kept), os.path.basename(lock_path)])


def _without_docstrings(tree):
    # as the bytecode is compiled (_code): a body that was only its docstring is a pass where the docstring ended
    for node in ast.walk(tree):
        body = node.body if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) else None
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            node.body = body[1:] or [ast.Pass(lineno=body[0].end_lineno, col_offset=body[0].col_offset)]
    return tree


def _shape(source):
    tree = _without_docstrings(ast.parse(source))
    return ast.dump(tree), [(type(n).__name__, getattr(n, "lineno", None), getattr(n, "col_offset", None)) for n in ast.walk(tree)]


def _has_text_to_drop(source):
    """Whether ``source`` has a docstring or a comment below its opening ones."""
    if ast.dump(_without_docstrings(ast.parse(source))) != ast.dump(ast.parse(source)):
        return True
    tokens = list(tokenize.generate_tokens(io.StringIO(source.decode("utf-8")).readline))
    return any(t.type == tokenize.COMMENT and t.start[0] >= cc._header_end(tokens) for t in tokens)  # pylint: disable=protected-access


def _collection_sources():
    for sub in ("modules", "module_utils"):
        for top, _dirs, files in os.walk(os.path.join(ROOT, "plugins", sub)):
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.join(top, name)


def test_every_source_shipped_lean_is_the_same_code_on_the_same_lines():
    # the node gets this collection's files without comments and docstrings; a traceback still names the right line
    before = after = 0
    for path in _collection_sources():
        with open(path, "rb") as f:
            source = f.read()
        lean = cc.lean_source(source)
        assert (lean != source) is _has_text_to_drop(source), path  # none falls back to the source as it is
        assert _shape(lean) == _shape(source), path  # the same code, each node on its line and column
        header = source.split(b"\n", 4)[:4]  # the copyright and licence lines
        assert lean.count(b"\n") == source.count(b"\n") and (not source.strip() or lean.split(b"\n", 4)[:4] == header), path
        assert cc.lean_source(lean) == lean, path
        before, after = before + len(source), after + len(lean)
    assert after < 0.85 * before


def test_a_lean_source_keeps_its_licence_and_code_and_loses_only_comments_and_docstrings():
    source = ('# -*- coding: utf-8 -*-\n# SPDX-License-Identifier: GPL-3.0-or-later\n"""The module,\n\nover lines."""\n'
              'X = "# not a comment"  # a comment\n\n\ndef f(x):  # why\n    """Only a docstring\n    here."""\n\n\n'
              'class K(object):\n    """Doc."""\n    # a note\n    y = 1\n\n\ndef g(): """One line."""; return 2\n').encode()
    lean = cc.lean_source(source).decode()
    assert lean == ('# -*- coding: utf-8 -*-\n# SPDX-License-Identifier: GPL-3.0-or-later\n\n\n\n'
                    'X = "# not a comment"\n\n\ndef f(x):\n\n    pass\n\n\nclass K(object):\n\n\n    y = 1\n\n\n'
                    'def g(): return 2\n')
    assert _shape(lean)[0] == _shape(source)[0]  # the same code (g's return one column nearer, on its line)
    assert cc.lean_source(b"def broken(:\n") == b"def broken(:\n"  # what this Python cannot read goes as it is
    # lines as Python counts them: a form feed or U+2028 in a string is not a line break
    assert cc.lean_source(b'x = "a\x0cb"  # c\n') == b'x = "a\x0cb"\n'
    odd = 'x = "\u2028"  # c\n\n\ndef f():\n    """Doc."""\n    return 1\n'.encode()
    assert cc.lean_source(odd) == 'x = "\u2028"\n\n\ndef f():\n\n    return 1\n'.encode()
    # where the lean text would not be the same code on the same lines, the source goes as it is
    joined = b'def f():\n    """D.""" \\\n    ; return 1\n'
    assert cc.lean_source(joined) == joined


def test_only_this_collections_sources_are_made_lean(tmp_path):
    ours = "ansible_collections/gpuprobe/layers/plugins/module_utils/_m.py"
    payload = {"pkg/__init__.py": "", "pkg/mod.py": '"""Theirs."""\nX = 1  # theirs\n', ours: '"""Ours."""\nX = 1  # ours\n'}
    for bytecode in (True, False):
        z = zipfile.ZipFile(io.BytesIO(cc.with_bytecode(_zip(payload), bytecode)))
        assert z.read("pkg/mod.py").decode() == payload["pkg/mod.py"] and z.read(ours).decode() == '\nX = 1\n'
        assert (ours + "c" in z.namelist()) is bytecode


def test_the_lean_probe_script_runs_as_the_repositorys_does(tmp_path):
    # the probe stage writes the script's text from the payload into the container (_probe.script.probe_source): a kept
    # payload's is lean; run as the runtime runs it, it says what the repository's says, line for line
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract, script
    with open(script.__file__, "rb") as f:
        lean = tmp_path / "probe.py"
        lean.write_bytes(cc.lean_source(f.read()))
    config = json.dumps(dict(contract.new_run_keys(), compute=True, nodes=["/dev/null", "/dev/nvidia0"]))
    said = []
    for path in (script.__file__, str(lean)):
        proc = subprocess.run([sys.executable] + list(contract.ISOLATED_FLAGS) + [path, config], capture_output=True, text=True,
                              timeout=60, check=True)
        items = [json.loads(line) for line in proc.stdout.splitlines()]
        said.append([(i["kind"], i.get("step"), i.get("name"), i.get("ok"), i.get("error"), sorted(i)) for i in items])
        assert contract.parse_output(proc.stdout, token=json.loads(config)["token"])["complete"]
    assert said[0] == said[1] and len(said[0]) >= 5
