# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): what a file mounted at a library name is, read from its ELF header and its
dynamic section (the SONAME the loader knows it by), in pure Python with bounded reads.

``read_library(path)`` -> {"elf": bool, "why": str or None, "soname": str or None, "class": 32 or 64, "machine": int}.
Every read is positioned (``os.pread``) and bounded: the header (64 bytes), the program headers (at most
MAX_PHDRS), the dynamic section (at most MAX_DYNAMIC bytes) and the SONAME string (at most MAX_NAME bytes); the
file is opened without following a FIFO's writer (``O_NONBLOCK``) and only a regular file is read. A 100 MB libcuda
costs a few kilobytes.
"""

from __future__ import annotations

import os
import stat
import struct

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import PATH_ERRORS, path_error

MAGIC = b"\x7fELF"
MAX_PHDRS = 256
MAX_DYNAMIC = 64 * 1024
MAX_NAME = 256
PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_STRTAB, DT_SONAME = 0, 5, 14


def _fail(why, **extra):
    out = {"elf": False, "why": why, "soname": None}
    out.update(extra)
    return out


def _pread(fd, size, offset):
    if size <= 0 or offset < 0:
        return b""
    return os.pread(fd, size, offset)


def _layout(ident):
    """(struct byte order, 64-bit?) from e_ident, or None when the class or data encoding is unknown."""
    if len(ident) < 6:
        return None
    klass, data = ident[4], ident[5]
    if klass not in (1, 2) or data not in (1, 2):
        return None
    return ("<" if data == 1 else ">"), klass == 2


def _headers(fd, header, order, is64):
    """The program headers as (p_type, p_offset, p_vaddr, p_filesz), at most MAX_PHDRS of them."""
    if is64:
        phoff, = struct.unpack_from(order + "Q", header, 32)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 54)
        fmt, size = order + "IIQQQQQQ", 56
    else:
        phoff, = struct.unpack_from(order + "I", header, 28)
        phentsize, phnum = struct.unpack_from(order + "HH", header, 42)
        fmt, size = order + "IIIIIIII", 32
    if phentsize < size or not phoff:
        return []
    raw = _pread(fd, phentsize * min(phnum, MAX_PHDRS), phoff)
    out = []
    for i in range(len(raw) // phentsize):
        fields = struct.unpack_from(fmt, raw, i * phentsize)
        if is64:   # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, ...
            out.append((fields[0], fields[2], fields[3], fields[5]))
        else:      # p_type, p_offset, p_vaddr, p_paddr, p_filesz, ...
            out.append((fields[0], fields[1], fields[2], fields[4]))
    return out


def _file_offset(vaddr, headers):
    for p_type, offset, start, filesz in headers:
        if p_type == PT_LOAD and start <= vaddr < start + filesz:
            return offset + (vaddr - start)
    return None


def _soname(fd, headers, order, is64):
    dynamic = next((h for h in headers if h[0] == PT_DYNAMIC), None)
    if dynamic is None:
        return None, "no dynamic section (not a shared library)"
    raw = _pread(fd, min(dynamic[3], MAX_DYNAMIC), dynamic[1])
    fmt, size = (order + "qQ", 16) if is64 else (order + "iI", 8)
    strtab = soname = None
    for i in range(len(raw) // size):
        tag, value = struct.unpack_from(fmt, raw, i * size)
        if tag == DT_NULL:
            break
        if tag == DT_STRTAB:
            strtab = value
        elif tag == DT_SONAME:
            soname = value
    if soname is None:
        return None, "no DT_SONAME in its dynamic section"
    base = _file_offset(strtab, headers) if strtab is not None else None
    if base is None:
        return None, "its string table is outside the file's loaded segments"
    name = _pread(fd, MAX_NAME, base + soname).split(b"\0", 1)[0]
    return name.decode("utf-8", "replace") or None, None


def read_library(path):
    """What the file at ``path`` is as a shared library (see the module's docstring); never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except PATH_ERRORS as exc:
        return _fail("cannot open: %s" % path_error(exc))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            return _fail("a directory")
        if not stat.S_ISREG(st.st_mode):
            return _fail("not a regular file")
        header = _pread(fd, 64, 0)
        if header[:4] != MAGIC:
            return _fail("not an ELF file (starts %r)" % header[:4])
        layout = _layout(header)
        if layout is None or len(header) < (64 if layout[1] else 52):
            return _fail("an ELF header of unknown class or encoding")
        order, is64 = layout
        machine, = struct.unpack_from(order + "H", header, 18)
        out = {"elf": True, "why": None, "class": 64 if is64 else 32, "machine": machine}
        out["soname"], out["soname_why"] = _soname(fd, _headers(fd, header, order, is64), order, is64)
        return out
    except (OSError, struct.error) as exc:
        return _fail("unreadable: %s" % exc)
    finally:
        os.close(fd)


def name_stem(name):
    """The library a name stands for: 'libcuda.so.580.159.04', 'libcuda.so.1' and 'libcuda.so' are all 'libcuda'."""
    base = os.path.basename(name or "")
    return base.split(".so", 1)[0] if ".so" in base else base


def name_major(name):
    """The first version number after '.so.' ('libcuda.so.1' -> '1'), None without one."""
    _stem, sep, tail = os.path.basename(name or "").partition(".so.")
    return tail.split(".", 1)[0] if sep and tail else None
