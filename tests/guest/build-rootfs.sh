#!/bin/bash
# Build a small test root disk: OUTDIR/rootfs.ext4, a busybox system, and
# the same system as an OCI image: the layout OUTDIR/oci, tag "1".
#
#   build-rootfs.sh OUTDIR [STAMPFILE]
#
# The image (16 MiB, ext4, made with mkfs.ext4 -d) holds:
#   /bin/busybox and its applets as links in /bin, /sbin and /usr/bin
#   /etc/passwd   root (0, /root, /bin/sh) and tester (1000:1000,
#                 /home/tester, owned by 1000:1000)
#   /etc/group    root, tester (1000) and extra (2000) with tester in it
#   /tmp (1777), /root, /proc, /sys, /dev, /run, /mnt; no /etc/hostname
# The image's config: entrypoint /bin/sh -c, a command that prints
# "image-says $GREETING uid=$(id -u) cwd=$(pwd)" and sleeps, env
# GREETING=hello, user tester, working directory /home/tester.
# busybox comes from the busybox-static package (apt-get download, not
# installed; kept in OUTDIR/cache).  Nothing is rebuilt while
# OUTDIR/rootfs.stamp matches this script, guest/lib-kernel.sh and the
# package's version.  STAMPFILE, if given, is touched at the end.
#
# Runs as root: the files must belong to root and to uid 1000.
set -euo pipefail
shopt -s inherit_errexit

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [STAMPFILE]" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
outdir=$1
stampfile=${2:-}
image=rootfs.ext4

lib=$here/../../guest/lib-kernel.sh
# shellcheck source=guest/lib-kernel.sh
. "$lib"

[ "$(id -u)" = 0 ] || die "must run as root (the image holds files of root and uid 1000)"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cache=$outdir/cache

exec 9>"$outdir/.rootfs.lock"
flock 9

package_version bver busybox-static
self_hash=$(cat "${BASH_SOURCE[0]}" "$lib" | sha256sum | cut -d' ' -f1)
stamp_text="$self_hash busybox-static=$bver"

if [ -f "$outdir/$image" ] && [ -f "$outdir/oci/index.json" ] &&
   [ "$(cat "$outdir/rootfs.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    log "up to date (busybox-static $bver)"
    touch -c "$outdir/$image"
    finish_stamp "$stampfile"
    exit 0
fi

need_tool mkfs.ext4 e2fsprogs
need_tool umoci umoci

work=$(mktemp -d "$outdir/.rootfs.XXXXXX")
trap 'rm -rf "$work"' EXIT

bdeb=$(fetch_deb busybox-static "$bver")
dpkg-deb -x "$bdeb" "$work/busybox"
bb=$work/busybox/bin/busybox
[ -x "$bb" ] || die "busybox-static has no /bin/busybox"

r=$work/root
mkdir -p "$r/bin" "$r/sbin" "$r/usr/bin" "$r/etc" "$r/root" "$r/home/tester" \
    "$r/proc" "$r/sys" "$r/dev" "$r/run" "$r/mnt" "$r/tmp"
chmod 1777 "$r/tmp"
chmod 0700 "$r/root"
install -m 0755 "$bb" "$r/bin/busybox"
# Each applet where busybox itself would install it, all as links to it.
"$bb" --list-full | while IFS= read -r a; do
    case "$a" in
        bin/*|sbin/*|usr/bin/*) ;;
        *) a=usr/bin/${a##*/} ;;
    esac
    [ "$a" = bin/busybox ] || [ -e "$r/$a" ] || ln -s /bin/busybox "$r/$a"
done

cat > "$r/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
tester:x:1000:1000:tester:/home/tester:/bin/sh
EOF
cat > "$r/etc/group" <<'EOF'
root:x:0:
tester:x:1000:
extra:x:2000:tester
EOF
chown 1000:1000 "$r/home/tester"
chmod 0755 "$r/home/tester"

mkfs.ext4 -q -F -L rootfs -d "$r" "$work/$image" 16M >&2

umoci init --layout "$work/oci"
umoci new --image "$work/oci:1"
umoci insert --image "$work/oci:1" "$r" /
# shellcheck disable=SC2016
umoci config --image "$work/oci:1" --config.entrypoint /bin/sh --config.entrypoint -c \
    --config.cmd 'echo "image-says $GREETING uid=$(id -u) cwd=$(pwd)"; exec sleep 1000000' \
    --config.env GREETING=hello --config.user tester --config.workingdir /home/tester \
    --author microvmd-tests

rm -f "$outdir/rootfs.stamp"
rm -rf "$outdir/oci"
mv "$work/oci" "$outdir/oci"
mv -f "$work/$image" "$outdir/$image"
printf '%s\n' "$stamp_text" > "$outdir/rootfs.stamp"
log "wrote $outdir/$image (busybox-static $bver)"
finish_stamp "$stampfile"
