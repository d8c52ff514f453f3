#!/usr/bin/env python3
# The layering check itself: on a small tree with violations planted in
# every way one can hide (through a header, relative to the including
# file, up a directory, after a string that looks like a comment) it must
# report each of them and fail; on a tree that keeps the rules it must
# pass. Comments, unknown headers and include cycles must not confuse it.
#
#   test-check-layering.py CHECK_LAYERING_PY

import os
import subprocess
import sys
import tempfile

# Allowed everywhere: what a clean tree holds, and the planted tree too.
CLEAN = {
    "names.h": "",
    "core/spec.h": '#include "state.h"\n#include <glib.h>\n',
    "core/state.h": '#include "core/errors.h"\n',
    "core/errors.h": ("/* #include \"bus/bus-util.h\" */\n// #include <systemd/sd-bus.h>\n"
                      "/*\n#include \"daemon/daemon.h\"\n */\n"),
    "core/host/runtime.h": '#include "core/spec.h"\n#include "../state.h"\n',
    "util/a.h": '#include "b.h"\n',
    "util/b.h": '#include "a.h"\n#include "core/errors.h"\n',
    "store/store.c": '#include "store.h"\n#include "util/a.h"\n#include "config.h"\n',
    "store/store.h": '#include "core/spec.h"\n',
    "hypervisor/hv.c": '#include "core/host/runtime.h"\n#include "names.h"\n',
    "reconcile/reconciler.h": '#include "core/host/runtime.h"\n',
    "reconcile/reconciler.c": '#include "reconciler.h"\n#include "util/a.h"\n#include "names.h"\n',
    "bus/bus-util.h": "#include <systemd/sd-bus.h>\n",
    "bus/object.c": '#include "daemon/daemon.h"\n#include "reconcile/reconciler.h"\n',
    "daemon/daemon.h": '#include "bus/bus-util.h"\n#include "store/store.h"\n',
    "daemon/daemon.c": '#include "daemon.h"\n#include <systemd/sd-daemon.h>\n',
}

PLANTED = dict(CLEAN)
PLANTED.update({
    # Through a header found beside the including file, which the headers
    # above it then reach too.
    "core/state.h": '#include "core/errors.h"\n#include "helper.h"\n',
    "core/helper.h": '#include "util/a.h"\n',
    # sd-bus behind a string that holds "/*", and a bare sd- header.
    "core/host/bus-user.h": ('static const char *glob = "machines/*";\n'
                             "#include <systemd/sd-bus.h> /* the bus */\n"),
    "core/bare.c": '#include "sd-event.h"\n',
    # A header of a layer above; what it includes is not reported again.
    "reconcile/reconciler.h": '#include "core/host/runtime.h"\n#include "daemon/daemon.h"\n',
    "reconcile/store-user.c": '#include "../store/store.h"\n',
    "util/c.h": '#  include  "../daemon/daemon.h"\n',
})

EXPECTED = {
    "src/core/helper.h: includes util/a.h (directly)",
    "src/core/state.h: includes util/a.h (via core/helper.h -> util/a.h)",
    "src/core/spec.h: includes util/a.h (via core/state.h -> core/helper.h -> util/a.h)",
    "src/core/host/runtime.h: includes util/a.h (via core/state.h -> core/helper.h -> util/a.h)",
    "src/core/host/bus-user.h: includes <systemd/sd-bus.h> (directly)",
    'src/core/bare.c: includes "sd-event.h" (directly)',
    "src/reconcile/reconciler.h: includes daemon/daemon.h (directly)",
    "src/reconcile/reconciler.c: includes daemon/daemon.h"
    " (via reconcile/reconciler.h -> daemon/daemon.h)",
    "src/reconcile/store-user.c: includes store/store.h (directly)",
    "src/util/c.h: includes daemon/daemon.h (directly)",
}


def write_tree(root, files):
    for name, text in files.items():
        path = os.path.join(root, "src", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return os.path.join(root, "src")


def run(checker, files):
    with tempfile.TemporaryDirectory() as root:
        src = write_tree(root, files)
        p = subprocess.run([sys.executable, checker, src], capture_output=True, text=True)
    return p.returncode, set(p.stdout.splitlines())


def main():
    checker = sys.argv[1]
    failures = []

    rc, lines = run(checker, CLEAN)
    if rc != 0 or lines:
        failures.append(f"the clean tree failed (exit {rc}):\n  " + "\n  ".join(sorted(lines)))

    rc, lines = run(checker, PLANTED)
    if rc != 1:
        failures.append(f"the planted tree exited {rc}, not 1")
    for line in sorted(EXPECTED - lines):
        failures.append(f"not reported: {line}")
    for line in sorted(lines - EXPECTED):
        failures.append(f"reported wrongly: {line}")

    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
