#!/bin/bash
# Build the kernel and initramfs that microvmd boots its guests with.
#
#   build-initramfs.sh OUTDIR AGENT_BINARY [STAMPFILE]
#
# Writes OUTDIR/vmlinuz, the kernel of Debian's linux-image-cloud-amd64,
# and OUTDIR/initramfs.img, a gzip'd newc cpio holding:
#
#   /init                         AGENT_BINARY (a static microvmd-agent)
#   /lib/modules/KREL/*.ko        the virtio, vsock, power-button,
#                                 root-file-system and virtio-fs modules,
#                                 uncompressed
#   /lib/modules/KREL/microvmd.load  those modules, one a line, in the
#                                 order the agent loads them
#   /dev/console, /dev/null       so /init has a console before devtmpfs
#   /proc /sys /dev /run /mnt /tmp /newroot  empty mount points
#
# Nothing is rebuilt while OUTDIR/initramfs.stamp matches this script,
# guest/lib-kernel.sh, the agent binary and the kernel package's version.
# STAMPFILE, if given, is touched at the end (for build systems).
# Downloaded packages are kept in OUTDIR/cache.  The kernel package is
# fetched with apt-get download and unpacked, never installed; the first
# run may need root to install cpio.
#
# Environment: MICROVMD_GUEST_KERNEL_PKG, see guest/lib-kernel.sh.
set -euo pipefail
shopt -s inherit_errexit

if [ $# -lt 2 ] || [ $# -gt 3 ]; then
    echo "usage: $0 OUTDIR AGENT_BINARY [STAMPFILE]" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
outdir=$1
agent=$2
stampfile=${3:-}

lib=$here/lib-kernel.sh
# shellcheck source=guest/lib-kernel.sh
. "$lib"

# Besides the virtio devices, what mounting an ext4 root from virtio-blk
# and an overlay above it needs (crc32c is named because ext4 asks for it
# through the crypto API, not in its "depends=").  Those built into the
# kernel are skipped.
root_modules=(
    crc16 crc32c_generic mbcache jbd2 ext4
    overlay
)
# What a directory mount needs: virtio-fs, over FUSE.
share_modules=(
    fuse virtiofs
)

[ -f "$agent" ] || die "no agent binary at $agent"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cache=$outdir/cache

# One build at a time per OUTDIR.
exec 9>"$outdir/.initramfs.lock"
flock 9

kernel_select

self_hash=$(cat "${BASH_SOURCE[0]}" "$lib" | sha256sum | cut -d' ' -f1)
agent_hash=$(sha256sum < "$agent" | cut -d' ' -f1)
stamp_text="$self_hash agent=$agent_hash $kpkg=$kver"

if [ -f "$outdir/vmlinuz" ] && [ -f "$outdir/initramfs.img" ] &&
   [ "$(cat "$outdir/initramfs.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    log "up to date ($kpkg $kver)"
    # Newer than their inputs, for make-like callers that compare times.
    touch -c "$outdir/vmlinuz" "$outdir/initramfs.img"
    finish_stamp "$stampfile"
    exit 0
fi

need_tool cpio cpio
need_tool gzip gzip

work=$(mktemp -d "$outdir/.initramfs.XXXXXX")
trap 'rm -rf "$work"' EXIT

kdeb=$(fetch_deb "$kpkg" "$kver")
kernel_unpack "$kdeb" "$work/kernel"
log "kernel $krel ($kpkg $kver)"

r=$work/root
mkdir -p "$r"
kernel_install_modules "$r" "${guest_virtio_modules[@]}" "${root_modules[@]}" "${share_modules[@]}"
mkdir -p "$r/proc" "$r/sys" "$r/dev" "$r/run" "$r/mnt" "$r/tmp" "$r/newroot"
chmod 1777 "$r/tmp"
install -m 0755 "$agent" "$r/init"
mknod -m 600 "$r/dev/console" c 5 1 || die "cannot create /dev/console (run as root)"
mknod -m 666 "$r/dev/null" c 1 3 || die "cannot create /dev/null (run as root)"

cpio_pack "$r" "$work/initramfs.img"
cp "$kimage" "$work/vmlinuz"

rm -f "$outdir/initramfs.stamp"
mv -f "$work/vmlinuz" "$outdir/vmlinuz"
mv -f "$work/initramfs.img" "$outdir/initramfs.img"
printf '%s\n' "$krel" > "$outdir/kernel-release"
printf '%s\n' "$stamp_text" > "$outdir/initramfs.stamp"
log "wrote $outdir/vmlinuz and $outdir/initramfs.img ($(du -k "$outdir/initramfs.img" | cut -f1) KiB)"
finish_stamp "$stampfile"
