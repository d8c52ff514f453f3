#!/usr/bin/env python3
# Writes the API reference, in Markdown, from the introspection XML.
#
#   gen-reference.py INTERFACE.xml OUTPUT.md
#   gen-reference.py --index OUTPUT.md INTERFACE.xml...
#
# The XML is documented with gtk-doc style comments placed right before
# each element:
#
#   <!--
#       Symbol:
#       @arg: What the argument is; continuation lines are indented
#         deeper than the @.
#       @short_description: (interfaces only) One line.
#
#       Body paragraphs, separated by blank lines.
#   -->
#
# Every interface, method, signal and property must be documented, and
# every argument of a method or signal too; a comment whose symbol does not
# name the element after it is an error. The build fails rather than ship
# a reference that says less than the API.

import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

DBUS_NAME = re.compile(r"\b(?:org|com|net)\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_-]+)*[A-Za-z0-9_]")
OBJECT_PATH = re.compile(r"(?<![\w`])(/org/[A-Za-z0-9_/]*[A-Za-z0-9_/])")


class DocError(Exception):
    pass


class Doc:
    def __init__(self, symbol, params, paragraphs):
        self.symbol = symbol
        self.params = params
        self.paragraphs = paragraphs


def indent_of(line):
    return len(line) - len(line.lstrip())


def parse_comment(text):
    """Parses one doc comment; returns None if it is not one."""
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    if not lines:
        return None

    first = lines.pop(0).strip()
    m = re.match(r"^([A-Za-z_][\w.]*):(?:\s+(.*))?$", first)
    if not m:
        return None
    symbol = m.group(1)
    body_lines = [m.group(2)] if m.group(2) else []

    params = {}
    current = None
    current_indent = 0
    in_params = not body_lines
    for line in lines:
        stripped = line.strip()
        if in_params:
            pm = re.match(r"^@(\w+):\s*(.*)$", stripped)
            if pm:
                current = pm.group(1)
                current_indent = indent_of(line)
                params[current] = [pm.group(2)]
                continue
            if stripped and current is not None and indent_of(line) > current_indent:
                params[current].append(stripped)
                continue
            in_params = False
            current = None
        body_lines.append(line)

    paragraphs = []
    para = []
    for line in body_lines:
        if line.strip():
            para.append(line.strip())
        elif para:
            paragraphs.append(" ".join(para))
            para = []
    if para:
        paragraphs.append(" ".join(para))

    return Doc(symbol, {k: " ".join(v).strip() for k, v in params.items()}, paragraphs)


def read_interfaces(path):
    parser = ET.XMLParser(target=ET.TreeBuilder(insert_comments=True))
    root = ET.parse(path, parser).getroot()
    if root.tag != "node":
        raise DocError(f"{path}: the root element is <{root.tag}>, not <node>")
    return [(iface, docs_of(path, root, iface)) for iface in root if iface.tag == "interface"]


def doc_before(path, parent, element, symbol):
    previous = None
    for child in parent:
        if child is element:
            break
        previous = child
    if previous is None or previous.tag is not ET.Comment:
        raise DocError(f"{path}: {symbol} has no doc comment")
    doc = parse_comment(previous.text or "")
    if doc is None:
        raise DocError(f"{path}: the comment before {symbol} does not start with '{symbol}:'")
    if doc.symbol != symbol:
        raise DocError(f"{path}: the comment before {symbol} documents '{doc.symbol}'")
    if not doc.paragraphs and "short_description" not in doc.params:
        raise DocError(f"{path}: {symbol} is documented with no text")
    return doc


def docs_of(path, node, iface):
    name = iface.get("name")
    docs = {"": doc_before(path, node, iface, name)}
    extra = set(docs[""].params) - {"short_description"}
    if extra:
        raise DocError(f"{path}: {name} documents unknown parameters {sorted(extra)}")
    for member in iface:
        if member.tag not in ("method", "signal", "property"):
            continue
        mname = member.get("name")
        doc = doc_before(path, iface, member, mname)
        args = [a.get("name") for a in member if a.tag == "arg"]
        for arg in args:
            if not arg:
                raise DocError(f"{path}: {name}.{mname} has an argument without a name")
            if not doc.params.get(arg):
                raise DocError(f"{path}: argument {arg} of {name}.{mname} is not documented")
        unknown = set(doc.params) - set(args)
        if unknown:
            raise DocError(f"{path}: {name}.{mname} documents arguments it lacks: {sorted(unknown)}")
        docs[(member.tag, mname)] = doc
    return docs


def inline(text):
    """Marks bus names and object paths as code."""
    text = DBUS_NAME.sub(lambda m: f"`{m.group(0)}`", text)
    return OBJECT_PATH.sub(lambda m: f"`{m.group(1)}`", text)


def anchor(kind, name):
    return f"{kind}-{name}".lower()


def signature(member, with_direction):
    args = [a for a in member if a.tag == "arg"]
    if not args:
        return f"{member.get('name')} ()"
    parts = []
    for a in args:
        direction = (a.get("direction") or "in").upper() if with_direction else ""
        prefix = f"{direction:<4}" if with_direction else ""
        parts.append(f"{prefix}{a.get('type')} {a.get('name')}")
    head = f"{member.get('name')} ("
    pad = " " * len(head)
    return head + (",\n" + pad).join(parts) + ")"


def write_arguments(out, member, doc, with_direction):
    args = [a for a in member if a.tag == "arg"]
    if not args:
        return
    out.append("Arguments:\n")
    for a in args:
        what = f"`{a.get('type')}`"
        if with_direction:
            what = f"{a.get('direction') or 'in'}, {what}"
        out.append(f"- `{a.get('name')}` ({what}): {inline(doc.params[a.get('name')])}")
    out.append("")


def property_line(prop):
    access = {"read": "read-only", "write": "write-only", "readwrite": "read-write"}.get(
        prop.get("access"), prop.get("access"))
    notes = [f"`{prop.get('type')}`", access]
    for ann in prop:
        if ann.tag == "annotation" and ann.get("name") == "org.freedesktop.DBus.Property.EmitsChangedSignal":
            value = ann.get("value")
            if value == "const":
                notes.append("constant")
            elif value == "invalidates":
                notes.append("changes announced without the value")
            elif value == "false":
                notes.append("changes not announced")
    return ", ".join(notes)


def render(iface, docs, source):
    name = iface.get("name")
    top = docs[""]
    out = [f"<!-- Generated from {source}; edit the XML, not this file. -->", "", f"# {name}", ""]
    short = top.params.get("short_description")
    if short:
        out += [f"*{inline(short)}*", ""]
    for p in top.paragraphs:
        out += [inline(p), ""]

    sections = [("method", "Methods", "Method"), ("signal", "Signals", "Signal"),
                ("property", "Properties", "Property")]
    members = {kind: [m for m in iface if m.tag == kind] for kind, _, _ in sections}

    for kind, title, _ in sections:
        if not members[kind]:
            continue
        out += [f"## {title}", ""]
        for m in members[kind]:
            out.append(f"- [{m.get('name')}](#{anchor(kind, m.get('name'))})")
        out.append("")

    for kind, _, singular in sections:
        for m in members[kind]:
            mname = m.get("name")
            doc = docs[(kind, mname)]
            out += [f'<a id="{anchor(kind, mname)}"></a>', f"### {singular} {mname}", ""]
            if kind == "property":
                out += [property_line(m), ""]
            else:
                out += ["```", signature(m, kind == "method"), "```", ""]
            for p in doc.paragraphs:
                out += [inline(p), ""]
            if kind != "property":
                write_arguments(out, m, doc, kind == "method")

    return "\n".join(out).rstrip("\n") + "\n"


def render_index(entries):
    out = ["<!-- Generated from the introspection XML; edit the XML, not this file. -->", "",
           "# microvmd D-Bus API", "",
           "microvmd is reached on the system bus under the name `org.microvmd1`.", "",
           "| Interface | What it is |", "|---|---|"]
    for name, short in entries:
        out.append(f"| [{name}]({name}.md) | {inline(short)} |")
    return "\n".join(out) + "\n"


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--index", metavar="OUTPUT", help="write an index of the interfaces")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()

    try:
        if args.index:
            entries = []
            for path in args.files:
                for iface, docs in read_interfaces(path):
                    entries.append((iface.get("name"), docs[""].params.get("short_description", "")))
            write(args.index, render_index(sorted(entries)))
            return 0

        if len(args.files) != 2:
            ap.error("give one XML file and one output file")
        source, output = args.files
        interfaces = read_interfaces(source)
        if len(interfaces) != 1:
            raise DocError(f"{source}: expected one interface, found {len(interfaces)}")
        iface, docs = interfaces[0]
        write(output, render(iface, docs, os.path.basename(source)))
        return 0
    except (DocError, ET.ParseError, OSError) as e:
        print(f"gen-reference: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
