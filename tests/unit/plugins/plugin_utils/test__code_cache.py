"""The controller's cache of this collection's compiled code (plugin_utils/_code_cache): compiled once and loaded after,
an edited source is another entry, a damaged entry is compiled again, a syntax error is still the compiler's. The
loader patch over real ansible-playbook runs: tests/integration/test_controller_cache.py."""
import builtins
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.plugin_utils import _code_cache as cc

SOURCE = b"from __future__ import annotations\nVALUE = 'one'\ndef f(x: int) -> int:\n    return x * 2\n"


def _run(code):
    namespace = {}
    exec(code, namespace)  # pylint: disable=exec-used
    return namespace["VALUE"], namespace["f"](21)


def test_compiled_once_then_loaded(tmp_path, monkeypatch):
    path = "/collections/ansible_collections/gpuprobe/layers/plugins/module_utils/_x.py"
    code = cc.compiled(str(tmp_path), path, SOURCE)
    assert code.co_filename == path and _run(code) == ("one", 42)
    assert os.listdir(str(tmp_path)) == [os.path.basename(cc.entry_path(str(tmp_path), path, SOURCE))]

    def no_compile(*args, **kwargs):
        raise AssertionError("compiled again")
    monkeypatch.setattr(builtins, "compile", no_compile)
    again = cc.compiled(str(tmp_path), path, SOURCE.decode())  # text or bytes: the same entry
    assert again.co_filename == path and _run(again) == ("one", 42)


def test_an_edited_source_or_another_path_is_another_entry(tmp_path):
    path = "/c/ansible_collections/gpuprobe/layers/plugins/module_utils/_x.py"
    cc.compiled(str(tmp_path), path, SOURCE)
    edited = SOURCE.replace(b"'one'", b"'two'")
    assert _run(cc.compiled(str(tmp_path), path, edited)) == ("two", 42)
    assert cc.compiled(str(tmp_path), "/elsewhere/_x.py", SOURCE).co_filename == "/elsewhere/_x.py"
    assert len(os.listdir(str(tmp_path))) == 3


@pytest.mark.parametrize("damage", [b"", b"gpuprobe-code\0\0\0\r\n" + b"x" * 40, b"not an entry at all"])
def test_a_damaged_entry_is_compiled_again_and_replaced(tmp_path, damage):
    path = "/c/_x.py"
    entry = cc.entry_path(str(tmp_path), path, SOURCE)
    with open(entry, "wb") as f:
        f.write(damage)
    assert _run(cc.compiled(str(tmp_path), path, SOURCE)) == ("one", 42)
    with open(entry, "rb") as f:
        assert f.read() != damage
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".gpuprobe-")]


def test_a_syntax_error_is_the_compilers_and_nothing_is_kept(tmp_path):
    with pytest.raises(SyntaxError):
        cc.compiled(str(tmp_path), "/c/_bad.py", b"def (:\n")
    assert os.listdir(str(tmp_path)) == []


def test_the_directory_is_this_users_own_or_none(tmp_path):
    assert cc.cache_dir("code", {cc.ENV: "off"}) is None
    where = cc.cache_dir("code", {cc.ENV: str(tmp_path / "c")})
    assert where == str(tmp_path / "c" / "code") and oct(os.stat(where).st_mode & 0o777) == "0o700"
    os.chmod(where, 0o777)
    assert cc.cache_dir("code", {cc.ENV: str(tmp_path / "c")}) is None
