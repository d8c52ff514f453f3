#!/bin/bash
# Build the microvmd test guest: a Debian cloud kernel plus a busybox
# initramfs whose /init is tests/guest/init.
#
#   build.sh OUTDIR [STAMPFILE]
#
# Leaves OUTDIR/vmlinuz and OUTDIR/initrd.img.  If they are already there
# and OUTDIR/guest.stamp matches this script, guest/lib-kernel.sh (which
# fetches the kernel and picks its modules), the init, the kernel package
# and the busybox package, nothing is rebuilt.  STAMPFILE, if given, is
# touched at the end (for build systems).  Downloaded packages are kept in
# OUTDIR/cache.
#
# Everything comes from the Debian archive through apt-get.  Only the host
# tools are installed (cpio, if missing); the kernel and busybox-static are
# downloaded and unpacked, never installed.
#
# Environment:
#   MICROVMD_GUEST_KERNEL_PKG  kernel package to use instead of the current
#                              dependency of linux-image-cloud-amd64
set -euo pipefail
shopt -s inherit_errexit

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [STAMPFILE]" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
outdir=$1
stampfile=${2:-}
init_src=$here/init

lib=$here/../../guest/lib-kernel.sh
# shellcheck source=guest/lib-kernel.sh
. "$lib"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cache=$outdir/cache

# One build at a time per OUTDIR.
exec 9>"$outdir/.lock"
flock 9

kernel_select
package_version bver busybox-static

self_hash=$(cat "${BASH_SOURCE[0]}" "$init_src" "$lib" | sha256sum | cut -d' ' -f1)
stamp_text="$self_hash $kpkg=$kver busybox-static=$bver"

if [ -f "$outdir/vmlinuz" ] && [ -f "$outdir/initrd.img" ] &&
   [ "$(cat "$outdir/guest.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    log "up to date ($kpkg $kver)"
    # Newer than the scripts, for make-like callers that compare times.
    touch -c "$outdir/vmlinuz" "$outdir/initrd.img"
    finish_stamp "$stampfile"
    exit 0
fi

need_tool cpio cpio
need_tool gzip gzip

work=$(mktemp -d "$outdir/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

kdeb=$(fetch_deb "$kpkg" "$kver")
bdeb=$(fetch_deb busybox-static "$bver")
mkdir "$work/busybox" "$work/root"
kernel_unpack "$kdeb" "$work/kernel"
dpkg-deb -x "$bdeb" "$work/busybox"
log "kernel $krel ($kpkg $kver), busybox-static $bver"

# fuse and virtiofs: directory mounts.
kernel_install_modules "$work/root" "${guest_virtio_modules[@]}" fuse virtiofs

# --- root file system -----------------------------------------------------
r=$work/root
mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/run" "$r/etc" "$r/root"
ln -s bin "$r/sbin"
mkdir -p "$r/usr"
ln -s ../bin "$r/usr/bin"
ln -s ../bin "$r/usr/sbin"
bb=$work/busybox/bin/busybox
[ -x "$bb" ] || die "busybox-static has no /bin/busybox"
cp "$bb" "$r/bin/busybox"
for a in $("$bb" --list); do
    [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
done
install -m 0755 "$init_src" "$r/init"
echo "root:x:0:0:root:/root:/bin/sh" > "$r/etc/passwd"
echo "root:x:0:" > "$r/etc/group"
printf '%s\n' "$stamp_text" > "$r/etc/microvmd-guest"
# /dev/console, so that the kernel can give /init a console before devtmpfs.
mknod -m 600 "$r/dev/console" c 5 1 2>/dev/null || log "warning: cannot create /dev/console node"
mknod -m 666 "$r/dev/null" c 1 3 2>/dev/null || true

cpio_pack "$r" "$work/initrd.img"
cp "$kimage" "$work/vmlinuz"

# --- install --------------------------------------------------------------
rm -f "$outdir/guest.stamp"
mv -f "$work/vmlinuz" "$outdir/vmlinuz"
mv -f "$work/initrd.img" "$outdir/initrd.img"
printf '%s\n' "$krel" > "$outdir/kernel-release"
printf '%s\n' "$stamp_text" > "$outdir/guest.stamp"
log "wrote $outdir/vmlinuz and $outdir/initrd.img ($(du -k "$outdir/initrd.img" | cut -f1) KiB)"
finish_stamp "$stampfile"
