#!/usr/bin/env python3
# Dependencies between the layers of src/ point down. The rules, on the
# #include lines of every file of a layer and, transitively, of every
# project header it reaches:
#
#   core/ (with core/host/)         no sd-bus or <systemd/...>, nothing from
#                                   bus/ daemon/ reconcile/ store/
#                                   hypervisor/ util/: core is pure
#   reconcile/                      no <systemd/...>, nothing from bus/
#                                   daemon/ hypervisor/ store/: it uses
#                                   core's interfaces, which those fill
#   store/ hypervisor/ util/        nothing from bus/ daemon/ reconcile/
#   network/ storage/               nothing from bus/ daemon/ reconcile/
#                                   hypervisor/: host layers side by side
#   guest/                          nothing from bus/ daemon/ reconcile/
#                                   hypervisor/ store/: the agent's host
#                                   side knows channels, not VMMs
#
# A quoted include is looked up as the compiler does: beside the including
# file, then at the top of the tree, then in src/. One that is found
# nowhere (config.h, generated into the build tree) is not a project
# header. An angle include names a project header if src/ holds it.
#
#   check-layering.py SRC_DIR
#
# Prints each violation as "file: includes X (via A -> B)", with the chain
# of includes that reaches X, and exits 1 if there was any.

import os
import re
import sys
from collections import deque

SYSTEMD = "systemd"

RULES = [
    (("core/",), {SYSTEMD, "bus/", "daemon/", "reconcile/", "store/", "hypervisor/", "util/",
                  "guest/", "agent/"}),
    (("reconcile/",), {SYSTEMD, "bus/", "daemon/", "hypervisor/", "store/", "guest/"}),
    (("store/", "hypervisor/", "util/"), {"bus/", "daemon/", "reconcile/"}),
    (("network/", "storage/"), {"bus/", "daemon/", "reconcile/", "hypervisor/"}),
    (("guest/",), {"bus/", "daemon/", "reconcile/", "hypervisor/", "store/"}),
]

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)
SYSTEMD_HEADER = re.compile(r"^(?:systemd/.*|(?:.*/)?sd-[\w-]+\.h)$")


def strip_comments(text):
    """Blanks out C comments, keeping string and character literals and
    the line structure, so that a commented-out include does not count."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Tree:
    def __init__(self, src):
        self.src = os.path.realpath(src)
        self.top = os.path.dirname(self.src)
        self.includes = {}

    def name(self, path):
        """A file's name relative to src/, as includes spell it."""
        return os.path.relpath(path, self.src)

    def resolve(self, including, kind, written):
        if kind == '"':
            bases = [os.path.dirname(including), self.top, self.src]
        else:
            bases = [self.src]
        for base in bases:
            path = os.path.realpath(os.path.join(base, written))
            if os.path.isfile(path):
                inside = path.startswith(self.src + os.sep)
                return path if inside else None
        return None

    def includes_of(self, path):
        """What @path includes, in order: (the project file or None, the
        name as written, '"' or '<') for each include."""
        if path not in self.includes:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = strip_comments(f.read())
            found = []
            for m in INCLUDE.finditer(text):
                kind, written = m.group(1), m.group(2).strip()
                found.append((self.resolve(path, kind, written), written, kind))
            self.includes[path] = found
        return self.includes[path]

    def sources(self):
        for dirpath, dirnames, filenames in os.walk(self.src):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith((".c", ".h")):
                    yield os.path.join(dirpath, f)


def forbidden_by(name, written, kind, layers):
    """How to show what an include reaches, if @layers forbid it; else
    None. @name is the project file's src-relative name, or None for a
    header from outside, which is known by how it is @written."""
    if name is not None:
        for layer in layers - {SYSTEMD}:
            if name.startswith(layer):
                return name
        return None
    if SYSTEMD in layers and SYSTEMD_HEADER.match(written):
        return f"<{written}>" if kind == "<" else f'"{written}"'
    return None


def check_file(tree, path, layers):
    """Walks the includes of @path breadth first, so each violation is
    shown with its shortest chain. A forbidden file is reported and not
    followed: what it includes in turn goes with it."""
    violations = {}
    seen = {path}
    queue = deque([(path, [])])
    while queue:
        current, chain = queue.popleft()
        for resolved, written, kind in tree.includes_of(current):
            name = tree.name(resolved) if resolved else None
            what = forbidden_by(name, written, kind, layers)
            step = chain + [what or name or written]
            if what:
                violations.setdefault(what, step)
            elif resolved and resolved not in seen:
                seen.add(resolved)
                queue.append((resolved, step))
    return list(violations.items())


def layers_for(name):
    forbidden = set()
    for prefixes, layers in RULES:
        if name.startswith(prefixes):
            forbidden |= layers
    return forbidden


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print("usage: check-layering.py SRC_DIR", file=sys.stderr)
        return 2
    tree = Tree(argv[1])
    checked = count = 0
    for path in tree.sources():
        name = tree.name(path)
        layers = layers_for(name)
        if not layers:
            continue
        checked += 1
        for what, chain in check_file(tree, path, layers):
            via = "directly" if len(chain) == 1 else "via " + " -> ".join(chain)
            print(f"src/{name}: includes {what} ({via})")
            count += 1
    if not checked:
        print(f"check-layering: no file of a layer under {argv[1]}", file=sys.stderr)
        return 2
    if count:
        print(f"{count} layering violation{'s' if count != 1 else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
