# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_common.digest.file_sha256, the one sha256 of a file: the whole file or its first ``limit`` bytes, and never a
wait on something that is not a regular file (a spec dir entry or a library path can be a FIFO)."""
from __future__ import annotations

import hashlib
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import digest as _digest


def test_the_whole_file_or_its_first_bytes(tmp_path):
    path = tmp_path / "f"
    data = os.urandom(3 * _digest.CHUNK + 5)
    path.write_bytes(data)
    assert _digest.file_sha256(str(path)) == hashlib.sha256(data).hexdigest()
    assert _digest.file_sha256(str(path), limit=10) == hashlib.sha256(data[:10]).hexdigest()
    assert _digest.file_digest(str(path))["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_fifo_is_refused_without_waiting(tmp_path):
    path = tmp_path / "fifo"
    os.mkfifo(str(path))
    with pytest.raises(_digest.NotRegularFile):
        _digest.file_sha256(str(path))
    assert _digest.same_file(str(path), str(path))[0] is True  # the same inode: nothing is read
    other = tmp_path / "other"
    os.mkfifo(str(other))
    assert _digest.same_file(str(path), str(other)) == (None, "cannot read: %s is not a regular file" % path)


def test_a_missing_file_is_an_oserror(tmp_path):
    with pytest.raises(OSError):
        _digest.file_sha256(str(tmp_path / "absent"))
