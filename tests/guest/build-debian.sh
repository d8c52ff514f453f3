#!/bin/bash
# Build a Debian 12 guest that boots systemd: OUTDIR/debian-systemd.ext4.
#
#   build-debian.sh OUTDIR [STAMPFILE]
#
# The tree is made by mmdebstrap (variant minbase plus systemd,
# systemd-sysv, udev and dbus; no kernel: the kernel and the modules come
# from outside, from microvmd's initramfs) from the Debian archive named in the host's
# apt sources, and turned into an ext4 image with mkfs.ext4 -d.  Nothing is
# rebuilt while OUTDIR/debian.stamp matches this script and
# guest/lib-kernel.sh.  STAMPFILE, if given, is touched at the end.
#
# Runs as root (mmdebstrap --mode=root); installs mmdebstrap and e2fsprogs
# if they are missing.  Needs no network other than the Debian archive.
#
# What is changed in the tree so that systemd boots in a microVM without
# hardware: /etc/fstab is empty (the root is mounted by the initramfs), root's
# password is locked, /etc/hostname and /etc/resolv.conf (copied from the
# build host by mmdebstrap) are removed, no getty on tty1 (there is no
# screen; the serial getty on the console stays), and the units that wait
# for a network, a prompt or hardware are masked.
set -euo pipefail
shopt -s inherit_errexit

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [STAMPFILE]" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
outdir=$1
stampfile=${2:-}
suite=bookworm
image=debian-systemd.ext4

lib=$here/../../guest/lib-kernel.sh
# shellcheck source=guest/lib-kernel.sh
. "$lib"

# Units that would wait for something a microVM does not have.
masked_units=(
    systemd-networkd-wait-online.service
    systemd-firstboot.service
    systemd-udev-settle.service
)

# apt_sources: "URI SUITE" for each deb entry of the host's apt sources,
# one-line (sources.list, *.list) and deb822 (*.sources) alike.
apt_sources() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3 }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk 'function flush(   i, j, nu, ns, u, s) {
                 if (types ~ /(^| )deb( |$)/ && enabled != "no") {
                     nu = split(uris, u, " "); ns = split(suites, s, " ")
                     for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j]
                 }
                 types = uris = suites = ""; enabled = "yes"
             }
             BEGIN { enabled = "yes" }
             /^[ \t]*#/ { next }
             /^[ \t]*$/ { flush(); next }
             { key = tolower($1); sub(/^[^:]*:[ \t]*/, "") }
             key == "types:" { types = $0 }
             key == "uris:" { uris = $0 }
             key == "suites:" { suites = $0 }
             key == "enabled:" { enabled = tolower($0) }
             END { flush() }' "$f"
    done
}

mirror_for() { # mirror_for SUITE -> the first URI that serves it
    apt_sources | awk -v s="$1" '$2 == s { print $1; exit }'
}

[ "$(id -u)" = 0 ] || die "must run as root (mmdebstrap --mode=root)"

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

# One build at a time per OUTDIR.
exec 9>"$outdir/.debian.lock"
flock 9

stamp_text=$(cat "${BASH_SOURCE[0]}" "$lib" | sha256sum | cut -d' ' -f1)
if [ -f "$outdir/$image" ] &&
   [ "$(cat "$outdir/debian.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    log "up to date"
    touch -c "$outdir/$image"
    finish_stamp "$stampfile"
    exit 0
fi

need_tool mmdebstrap mmdebstrap
need_tool mkfs.ext4 e2fsprogs

mirror=$(mirror_for "$suite")
[ -n "$mirror" ] || die "no apt source serves $suite (see /etc/apt/sources.list*)"
sources=("deb $mirror $suite main")
for s in "$suite-updates" "$suite-security"; do
    uri=$(mirror_for "$s")
    [ -z "$uri" ] || sources+=("deb $uri $s main")
done
log "from ${sources[*]}"

work=$(mktemp -d "$outdir/.debian.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

# The customize hook runs with the tree as $1.
customize=$(cat <<EOF
set -e
: > "\$1/etc/fstab"
chroot "\$1" passwd --lock root >/dev/null
rm -f "\$1/etc/hostname"
rm -f "\$1/etc/resolv.conf"
rm -f "\$1/etc/systemd/system/getty.target.wants/getty@tty1.service"
for u in ${masked_units[*]}; do ln -sfn /dev/null "\$1/etc/systemd/system/\$u"; done
EOF
)

# udev, or no device unit ever appears and the serial getty waits 90 s for
# its tty; dbus, for logind and systemctl's bus.
start=$SECONDS
# mmdebstrap hands apt a hook that writes to a descriptor of its own
# through sh, and dash cannot name descriptors above 9: with those below
# kept free (whatever the caller left open is closed), its number stays low.
for fd in /proc/$$/fd/*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] && [ "$fd" -lt 255 ]; then eval "exec $fd>&-"; fi
done
mmdebstrap --mode=root --variant=minbase --format=directory \
    --include=systemd,systemd-sysv,udev,dbus \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook="$customize" \
    "$suite" "$root" "${sources[@]}" >&2

# The guest boots /sbin/init, which must be systemd.
init=$(chroot "$root" readlink -f /sbin/init)
case "$init" in
    */systemd/systemd) ;;
    *) die "/sbin/init is $init, not systemd" ;;
esac
if compgen -G "$root/boot/vmlinuz*" >/dev/null || [ -n "$(ls -A "$root/lib/modules" 2>/dev/null)" ]; then
    die "the tree holds a kernel; it must come from outside"
fi
grep -q '^root:!' "$root/etc/shadow" || die "root's password is not locked"

# Room to spare: 1.3 times the tree plus 64 MiB, and inodes likewise.
tree_mib=$(du -sm --apparent-size "$root" | cut -f1)
files=$(find "$root" | wc -l)
size_mib=$((tree_mib * 13 / 10 + 64))
inodes=$((files * 13 / 10 + 4096))
mkfs.ext4 -q -F -L debian -N "$inodes" -d "$root" "$work/$image" "${size_mib}M" >&2

rm -f "$outdir/debian.stamp"
mv -f "$work/$image" "$outdir/$image"
printf '%s\n' "$stamp_text" > "$outdir/debian.stamp"
log "wrote $outdir/$image: $size_mib MiB for a $tree_mib MiB tree of $files files, in $((SECONDS - start)) s"
finish_stamp "$stampfile"
