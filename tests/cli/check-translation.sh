#!/bin/sh
# microvmctl speaks German when asked to, with the catalogue found where the
# program looks for it: installed into a scratch DESTDIR, then seen at the
# compiled-in LOCALEDIR through a private mount namespace. No variable of
# the program's points it elsewhere, so this is bindtextdomain() with
# LOCALEDIR and textdomain() at work, as on an installed system; the host's
# own /usr is left alone.
#
# check-translation.sh BUILD_DIR BINDIR LOCALEDIR (absolute, as configured)
set -eu

build=$1 bindir=$2 localedir=$3

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dest=$scratch/root
if ! meson install -C "$build" --no-rebuild --destdir "$dest" >"$scratch/install.log" 2>&1; then
  cat "$scratch/install.log" >&2
  echo "meson install failed" >&2
  exit 1
fi
if [ ! -f "$dest$localedir/de/LC_MESSAGES/microvmd.mo" ]; then
  echo "FAIL: the German catalogue is not installed at $localedir" >&2
  exit 1
fi

if ! unshare --mount --propagation private true 2>/dev/null; then
  echo "SKIP: no private mount namespace (needs root)" >&2
  exit 77
fi

# Inside the namespace: LOCALEDIR is the installed catalogue directory. A
# LOCALEDIR that does not exist on this host is made on an overlay of its
# nearest existing parent, whose upper layer is a tmpfs.
cat >"$scratch/run.sh" <<'INNER'
set -eu
scratch=$1 dest=$2 localedir=$3
shift 3
if [ ! -d "$localedir" ]; then
  parent=$localedir
  while [ ! -d "$parent" ]; do
    parent=$(dirname "$parent")
  done
  if [ "$parent" = / ]; then
    echo "cannot lay an overlay over / for $localedir" >&2
    exit 1
  fi
  mkdir -p "$scratch/layer"
  mount -t tmpfs tmpfs "$scratch/layer"
  mkdir "$scratch/layer/upper" "$scratch/layer/work"
  mount -t overlay overlay \
    -o "lowerdir=$parent,upperdir=$scratch/layer/upper,workdir=$scratch/layer/work" "$parent"
  mkdir -p "$localedir"
fi
mount --bind "$dest$localedir" "$localedir"
exec env -u LC_ALL -u LC_MESSAGES LANG=C.UTF-8 LANGUAGE=de "$@"
INNER

microvmctl=$dest$bindir/microvmctl
failed=0

# $1 what is expected, then the arguments of microvmctl.
expect_german() {
  want=$1
  shift
  out=$(unshare --mount --propagation private sh "$scratch/run.sh" "$scratch" "$dest" \
        "$localedir" "$microvmctl" "$@" 2>&1) || true
  case $out in
    *"$want"*)
      echo "ok: microvmctl $* says \"$want\"" ;;
    *)
      echo "FAIL: microvmctl $* does not say \"$want\"; it says:" >&2
      echo "$out" >&2
      failed=1 ;;
  esac
}

expect_german "unbekannter Befehl »frobnicate«" frobnicate
expect_german "»microvmctl --help« gibt weitere Informationen." frobnicate
expect_german "Aufruf: microvmctl [OPTIONEN...] BEFEHL [ARGUMENTE...]" --help
expect_german "Alle Maschinen auflisten" --help
expect_german "Schnappschüsse anlegen, auflisten, zurückspielen, abzweigen oder löschen" --help
expect_german "fehlendes Argument; Aufruf: microvmctl show NAME|ID" show

exit $failed
