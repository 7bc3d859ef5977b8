# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the command line a systemd service starts, read from its unit files as systemd reads them. Not public API.

systemd.unit(5): the unit file is the first found in the search path (``/etc/systemd/system.control``,
``/run/systemd/system.control``, ``/run/systemd/transient``, ``/etc/systemd/system``, ``/run/systemd/system``,
``/usr/local/lib/systemd/system``, ``/usr/lib/systemd/system``, ``/lib/systemd/system``); its drop-ins are every
``<unit>.d/*.conf`` of those directories, a file of a directory earlier in the path masking the same name of a later
one, applied in the lexical order of their file names whatever their directory. A line ending in a backslash
continues on the next. systemd.exec(5): ``Environment=`` assignments (an empty one resets the list), then the
``EnvironmentFile=`` files (``-`` prefix: optional) read in order, overriding ``Environment=``. systemd.service(5):
``ExecStart=`` (an empty assignment resets it; prefixes ``-@:+!`` are not part of the path); ``${VAR}`` is replaced
inside a word, ``$VAR`` as a word of its own becomes the value split at whitespace. Specifiers ``%n %N %p %i %%``.
"""

from __future__ import annotations

import re
import shlex

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs

UNIT_DIRS = ("/etc/systemd/system.control", "/run/systemd/system.control", "/run/systemd/transient",
             "/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system",
             "/lib/systemd/system")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def unit_files(root, unit):
    """(unit file or None, [drop-in files in the order systemd applies them]) as node paths."""
    main = None
    for d in UNIT_DIRS:
        path = "%s/%s" % (d, unit)
        if nodefs.is_file(root, path):
            main = path
            break
    by_name = {}
    for d in UNIT_DIRS:
        dropdir = "%s/%s.d" % (d, unit)
        for name in nodefs.list_dir(root, dropdir):
            if name.endswith(".conf") and name not in by_name and nodefs.is_file(root, "%s/%s" % (dropdir, name)):
                by_name[name] = "%s/%s" % (dropdir, name)
    return main, [by_name[n] for n in sorted(by_name)]


def logical_lines(text):
    """The lines of a unit file with backslash continuations joined (systemd replaces the backslash-newline by a
    space) and comments (``#``, ``;``) dropped."""
    out, cur = [], None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if cur is None and line.lstrip()[:1] in ("#", ";"):
            continue
        if line.endswith("\\"):
            cur = (cur or "") + line[:-1] + " "
            continue
        out.append((cur or "") + line)
        cur = None
    if cur is not None:
        out.append(cur)
    return out


def service_settings(text):
    """[(key, value)] of the [Service] section of a unit file, in order."""
    out, section = [], None
    for line in logical_lines(text):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if section != "Service" or "=" not in stripped:
            continue
        key, value = stripped.split("=", 1)
        out.append((key.strip(), value.strip()))
    return out


def specifiers(value, unit):
    """``%n`` (unit name), ``%N`` (without the type suffix), ``%p`` (prefix), ``%i`` (instance), ``%%``."""
    base = unit.rsplit(".", 1)[0]
    prefix, _sep, instance = base.partition("@")
    table = {"n": unit, "N": base, "p": prefix, "i": instance, "%": "%"}
    return re.sub(r"%(.)", lambda m: table.get(m.group(1), m.group(0)), value)


def parse_env_file(text):
    """{name: value} of an environment file as systemd reads it (systemd.exec(5) EnvironmentFile=): ``KEY=VALUE``
    lines, ``#``/``;`` comments, single quotes taken literally, double quotes with backslash escapes, a value in
    quotes may span lines, a backslash at the end of a line continues it; later assignments win."""
    out = {}
    text = text or ""
    i, n = 0, len(text)
    while i < n:
        # skip blank space and comment lines
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] in "#;":
            while i < n and text[i] != "\n":
                i += 1
            continue
        m = re.compile(r"(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=").match(text, i)
        if not m:
            while i < n and text[i] != "\n":
                i += 1
            continue
        key = m.group(1)
        i = m.end()
        value = []
        while i < n and text[i] in " \t":
            i += 1
        while i < n and text[i] != "\n":
            c = text[i]
            if c == "'":
                j = text.find("'", i + 1)
                j = n if j < 0 else j
                value.append(text[i + 1:j])
                i = j + 1
            elif c == '"':
                i += 1
                while i < n and text[i] != '"':
                    if text[i] == "\\" and i + 1 < n:
                        if text[i + 1] != "\n":
                            value.append(text[i + 1])
                        i += 2
                        continue
                    value.append(text[i])
                    i += 1
                i += 1
            elif c == "\\" and i + 1 < n:
                if text[i + 1] != "\n":
                    value.append(text[i + 1])
                i += 2
            else:
                value.append(c)
                i += 1
        out[key] = "".join(value).rstrip()
    return out


def expand_command(line, env):
    """The argv of an ExecStart= command line: words split as systemd splits them (quotes), ``$VAR`` as a word of its
    own replaced by the value's whitespace-separated words (none when unset), ``${VAR}`` replaced inside a word."""
    try:
        words = shlex.split(line, comments=False, posix=True)
    except ValueError:
        words = line.split()
    argv = []
    for word in words:
        m = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*)$", word) or re.match(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$", word)
        if m and word.startswith("${"):
            argv.append(env.get(m.group(1), ""))
        elif m:
            argv.extend(env.get(m.group(1), "").split())
        else:
            argv.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda mm: env.get(mm.group(1), ""), word))
    return [a for a in argv if a != ""] if argv else []


def exec_start(root, unit):
    """What systemd would start for ``unit``: dict unit_file, dropins, files (the environment files read), env, argv
    (None when no ExecStart=), source (a sentence naming the files), errors."""
    main, dropins = unit_files(root, unit)
    out = {"unit": unit, "unit_file": main, "dropins": dropins, "files": [], "env": {}, "argv": None, "source": None,
           "errors": []}
    if main is None and not dropins:
        return out
    env_assign, env_files, command = [], [], None
    for path in ([main] if main else []) + dropins:
        text = nodefs.read_text(root, path)
        if text is None:
            out["errors"].append("%s not readable" % path)
            continue
        for key, value in service_settings(text):
            value = specifiers(value, unit)
            if key == "Environment":
                if not value:
                    env_assign = []
                    continue
                try:
                    parts = shlex.split(value)
                except ValueError:
                    parts = value.split()
                env_assign.extend(p for p in parts if "=" in p)
            elif key == "EnvironmentFile":
                if not value:
                    env_files = []
                else:
                    env_files.append(value)
            elif key == "ExecStart":
                command = value or None
    env = {}
    for item in env_assign:
        name, _sep, val = item.partition("=")
        if NAME_RE.match(name):
            env[name] = val
    for spec in env_files:
        optional = spec.startswith("-")
        path = spec[1:] if optional else spec
        text = nodefs.read_text(root, path)
        if text is None:
            if not optional:
                out["errors"].append("EnvironmentFile %s not readable" % path)
            continue
        out["files"].append(path)
        env.update(parse_env_file(text))
    out["env"] = env
    if command:
        command = command.lstrip("-@:+!")
        out["argv"] = expand_command(command, env)
        files = " with %s" % ", ".join(out["files"]) if out["files"] else ""
        out["source"] = "ExecStart= of %s in %s%s" % (unit, ", ".join(([main] if main else []) + dropins), files)
    return out
