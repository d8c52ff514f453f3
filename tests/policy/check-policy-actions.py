#!/usr/bin/env python3
# The polkit actions that src/names.h names (MV_ACTION_*) and those the
# policy declares must be the same set, and each action's defaults must be
# the ones its kind calls for: actions that destroy or discard data ask
# for an administrator every time, the others let an administrator of an
# active session keep the authorization for a while. Nothing is granted
# without authentication. Exec asks an administrator every time.
#
#   check-policy-actions.py NAMES_H POLICY

import re
import sys
import xml.etree.ElementTree as ET

DESTRUCTIVE = {
    "org.microvmd1.machine.delete",
    "org.microvmd1.machine.force",
    "org.microvmd1.snapshot.restore",
    "org.microvmd1.snapshot.delete",
    "org.microvmd1.volume.delete",
}
DESTRUCTIVE_DEFAULTS = {"allow_any": "auth_admin", "allow_inactive": "auth_admin",
                        "allow_active": "auth_admin"}
OTHER_DEFAULTS = {"allow_any": "no", "allow_inactive": "no", "allow_active": "auth_admin_keep"}
# Running a command in a guest is as good as a root shell there: an
# administrator of an active session is asked every time.
EVERY_TIME = {"org.microvmd1.machine.exec"}
EVERY_TIME_DEFAULTS = {"allow_any": "no", "allow_inactive": "no", "allow_active": "auth_admin"}

TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*))')


def read_defines(path):
    defines = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)\s+(.*?)\s*(?:/\*.*)?$", line)
            if m:
                defines[m.group(1)] = m.group(2)
    return defines


def expand(defines, name, depth=0):
    """Expands a macro made of string literals and other such macros."""
    if depth > 16:
        raise ValueError(f"{name}: macros nest too deep")
    text = defines[name]
    value = ""
    pos = 0
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m:
            raise ValueError(f"{name}: cannot read '{text[pos:]}'")
        if m.group(1) is not None:
            value += m.group(1)
        else:
            value += expand(defines, m.group(2), depth + 1)
        pos = m.end()
    return value


def main():
    if len(sys.argv) != 3:
        print("usage: check-policy-actions.py NAMES_H POLICY", file=sys.stderr)
        return 2
    names_h, policy = sys.argv[1:]
    failures = []

    defines = read_defines(names_h)
    from_names = {}
    for name in defines:
        if name.startswith("MV_ACTION_") and name != "MV_ACTION_PREFIX":
            from_names[expand(defines, name)] = name
    if not from_names:
        failures.append(f"{names_h} names no MV_ACTION_* action")

    root = ET.parse(policy).getroot()
    from_policy = {}
    for action in root.findall("action"):
        action_id = action.get("id")
        if action_id in from_policy:
            failures.append(f"{policy}: {action_id} is declared twice")
        from_policy[action_id] = action

    for action_id in sorted(set(from_names) - set(from_policy)):
        failures.append(f"{from_names[action_id]} ({action_id}) is not in {policy}")
    for action_id in sorted(set(from_policy) - set(from_names)):
        failures.append(f"{action_id} is in {policy} but not in {names_h}")

    for action_id, action in sorted(from_policy.items()):
        expected = (DESTRUCTIVE_DEFAULTS if action_id in DESTRUCTIVE
                    else EVERY_TIME_DEFAULTS if action_id in EVERY_TIME else OTHER_DEFAULTS)
        defaults = action.find("defaults")
        for key, want in expected.items():
            node = defaults.find(key) if defaults is not None else None
            got = node.text.strip() if node is not None and node.text else None
            if got != want:
                failures.append(f"{action_id}: {key} is {got}, expected {want}")

    for f in failures:
        print(f"FAIL: {f}")
    if failures:
        return 1
    print(f"{len(from_policy)} actions, the same in {names_h} and the policy, "
          "with the expected defaults")
    return 0


if __name__ == "__main__":
    sys.exit(main())
