#!/bin/sh
# Installs the build into a scratch DESTDIR and checks that every file lands
# where the program that reads it looks: dbus-daemon, polkitd, systemd and
# systemd-tmpfiles read their own directories (named by their .pc files and
# by systemd-analyze), not microvmd's prefix, and the daemon reads its
# configuration from MV_DEFAULT_CONFIG_FILE of src/names.h and runs its
# helpers from MV_LIBEXECDIR of config.h.
#
# check-install.sh BUILD_DIR SOURCE_DIR PREFIX BINDIR SBINDIR MANDIR LOCALEDIR LIBEXECDIR
# (the directories absolute, as configured).
set -eu

build=$1 source=$2 prefix=$3 bindir=$4 sbindir=$5 mandir=$6 localedir=$7 libexecdir=$8

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dest=$scratch/root
if ! meson install -C "$build" --no-rebuild --destdir "$dest" >"$scratch/install.log" 2>&1; then
  cat "$scratch/install.log" >&2
  echo "meson install failed" >&2
  exit 1
fi

failed=0
fail() {
  echo "FAIL: $*" >&2
  failed=1
}

# $1 a file, absolute as on the target system.
expect_file() {
  if [ -f "$dest$1" ]; then
    echo "ok: $1"
  else
    fail "$1 is not installed"
  fi
}

expect_executable() {
  if [ -f "$dest$1" ] && [ -x "$dest$1" ]; then
    echo "ok: $1"
  else
    fail "$1 is not installed as an executable"
  fi
}

# $1 a file name, $2 what reads it, then the directories it reads: the file
# must be installed in one of them.
expect_in_one_of() {
  name=$1 reader=$2
  shift 2
  for dir in "$@"; do
    if [ -f "$dest$dir/$name" ]; then
      echo "ok: $dir/$name"
      return 0
    fi
  done
  where=$(cd "$dest" && find . -name "$name" -type f | sed 's|^\.||' | tr '\n' ' ')
  fail "$name is installed at ${where:-nowhere}, but $reader reads only: $*"
}

pc_variable() {
  pkg-config --variable="$2" "$1" 2>/dev/null || true
}

expect_executable "$bindir/microvmctl"
expect_executable "$sbindir/microvmd"
expect_executable "$prefix/lib/microvmd/microvmd-agent"
expect_executable "$libexecdir/microvmd-vmm-parent"
if ! grep -q "MV_LIBEXECDIR \"$libexecdir\"" "$build/config.h"; then
  fail "the daemon looks for its helpers elsewhere than $libexecdir: $(grep MV_LIBEXECDIR "$build/config.h")"
fi

dbus_datadir=$(pc_variable dbus-1 datadir)
expect_in_one_of org.microvmd1.conf dbus-daemon "${dbus_datadir:-/usr/share}/dbus-1/system.d" \
  /etc/dbus-1/system.d

dbus_services=$(pc_variable dbus-1 system_bus_services_dir)
expect_in_one_of org.microvmd1.service "dbus-daemon's activation" \
  "${dbus_services:-/usr/share/dbus-1/system-services}"

polkit_actions=$(pc_variable polkit-gobject-1 actiondir)
expect_in_one_of org.microvmd1.policy polkitd "${polkit_actions:-/usr/share/polkit-1/actions}"

# systemd reads units from every directory of its search path; those in
# /etc and /run are the administrator's and the runtime's, not a package's.
unit_dirs=$(systemd-analyze --system unit-paths 2>/dev/null | grep -v '^/etc\|^/run' || true)
if [ -z "$unit_dirs" ]; then
  unit_dirs="$(pc_variable systemd systemdsystemunitdir) /usr/lib/systemd/system /lib/systemd/system"
fi
# shellcheck disable=SC2086 # one directory a word
expect_in_one_of microvmd.service systemd $unit_dirs

# tmpfiles.d(5): the directories systemd-tmpfiles reads, besides /etc and /run.
expect_in_one_of microvmd.conf systemd-tmpfiles /usr/local/lib/tmpfiles.d /usr/lib/tmpfiles.d \
  /lib/tmpfiles.d "$(pc_variable systemd tmpfilesdir)"

config=$(sed -n 's/^#define MV_DEFAULT_CONFIG_FILE *"\(.*\)"$/\1/p' "$source/src/names.h")
[ -n "$config" ] || fail "MV_DEFAULT_CONFIG_FILE not found in src/names.h"
expect_file "$config"

expect_file "$mandir/man1/microvmctl.1"
expect_file "$mandir/man8/microvmd.8"

for lang in $(grep -v '^#' "$source/po/LINGUAS"); do
  expect_file "$localedir/$lang/LC_MESSAGES/microvmd.mo"
done

# The Cockpit page (-Dcockpit=enabled): where cockpit-bridge looks for
# packages (XDG_DATA_DIRS: /usr/local/share and /usr/share), offered only
# where the bus policy was installed.
if [ -d "$build/cockpit/microvmd" ]; then
  page=$(cd "$dest" && find . -path '*/cockpit/microvmd/manifest.json' -type f | sed 's|^\.||; s|/manifest.json$||' | head -n 1)
  case "$page" in
    /usr/local/share/cockpit/microvmd|/usr/share/cockpit/microvmd) echo "ok: $page" ;;
    *) fail "the Cockpit page is installed at ${page:-nowhere}, but Cockpit reads /usr/local/share/cockpit and /usr/share/cockpit" ;;
  esac
  for f in index.html index.js index.css po.de.js; do
    [ -z "$page" ] || expect_file "$page/$f"
  done
  policy=$(cd "$dest" && find . -name org.microvmd1.conf -path '*dbus-1/system.d/*' -type f | sed 's|^\.||' | head -n 1)
  if [ -n "$page" ] && ! grep -q "\"path-exists\": \"$policy\"" "$dest$page/manifest.json"; then
    fail "the Cockpit page's manifest does not ask for the bus policy at $policy"
  fi
fi

# The unit starts the daemon that was installed (the activation file hands
# over to the unit).
unit=$(cd "$dest" && find . -name microvmd.service -type f | head -n 1)
if [ -n "$unit" ] && ! grep -q "^ExecStart=$sbindir/microvmd\$" "$dest/$unit"; then
  fail "microvmd.service does not start $sbindir/microvmd"
fi

exit $failed
