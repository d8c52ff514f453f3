#!/usr/bin/env python3
# The built polkit policy must carry, for every action, a description and a
# message in each language of po/LINGUAS, and each translation must quote
# the same $(detail) placeholders as the original: a translation that
# drops $(machine) would hide from the user which machine is concerned.
#
#   check-policy-translations.py POLICY LINGUAS

import re
import sys
import xml.etree.ElementTree as ET

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
PLACEHOLDER = re.compile(r"\$\(([^)]*)\)")


def read_linguas(path):
    langs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            langs += line.split()
    return langs


def main():
    if len(sys.argv) != 3:
        print("usage: check-policy-translations.py POLICY LINGUAS", file=sys.stderr)
        return 2
    policy, linguas = sys.argv[1:]
    langs = read_linguas(linguas)
    failures = []
    if not langs:
        failures.append(f"{linguas} lists no language")

    actions = ET.parse(policy).getroot().findall("action")
    if not actions:
        failures.append(f"{policy} declares no action")
    for action in actions:
        action_id = action.get("id")
        for tag in ("description", "message"):
            by_lang = {}
            for node in action.findall(tag):
                lang = node.get(XML_LANG, "")
                if lang in by_lang:
                    failures.append(f"{action_id}: two <{tag}> for language '{lang or 'C'}'")
                by_lang[lang] = (node.text or "").strip()
            original = by_lang.get("")
            if not original:
                failures.append(f"{action_id}: no untranslated <{tag}>")
                continue
            wanted = sorted(PLACEHOLDER.findall(original))
            for lang in langs:
                text = by_lang.get(lang)
                if not text:
                    failures.append(f"{action_id}: no <{tag} xml:lang=\"{lang}\">")
                elif sorted(PLACEHOLDER.findall(text)) != wanted:
                    failures.append(f"{action_id}: <{tag} xml:lang=\"{lang}\"> quotes "
                                    f"{sorted(PLACEHOLDER.findall(text))}, the original {wanted}")

    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print(f"{len(actions)} actions translated into {', '.join(langs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
