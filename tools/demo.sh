#!/bin/bash
# Sets up microvmd on this machine and boots a demo microVM:
#   installs the dependencies, builds, brings the service up (on the real
#   system bus if one runs and microvmd's bus policy is installed there;
#   otherwise on a private system bus with its own polkitd), creates and
#   starts a QEMU guest from an OCI image (a local OCI layout of Debian's
#   busybox, built here, so that no registry is needed): microvmd pulls it
#   into its cache, pins its digest, and boots microvmd's own kernel and
#   initramfs (its agent as /init) with the image as the root and an
#   overlay disk of the machine's own; shows `microvmctl list` and
#   `microvmctl image list`, runs `uname -a` in the guest through the
#   agent, and leaves the service running. Then serves the Cockpit page
#   (built here with npm) through Debian's cockpit-ws on loopback, with a
#   local session on the same bus, and prints its address. Runs as root.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$PWD

./tools/install-deps.sh
if [ -d build ]; then
  meson configure build -Dcockpit=enabled
else
  meson setup build -Dcockpit=enabled
fi
ninja -C build
ninja -C build guest/vmlinuz guest/initramfs.img tests/guest/rootfs.ext4

demo=${MICROVMD_DEMO_DIR:-/var/tmp/microvmd-demo}
mkdir -p "$demo"
microvmctl="$top/build/src/cli/microvmctl"

bus_policy_installed() {
  [ -f /usr/share/dbus-1/system.d/org.microvmd1.conf ] || [ -f /etc/dbus-1/system.d/org.microvmd1.conf ]
}

if [ -S /run/dbus/system_bus_socket ] && busctl --system status >/dev/null 2>&1 && bus_policy_installed; then
  address=system
  client_address=unix:path=/run/dbus/system_bus_socket
  echo "Using the system bus."
else
  # A private system bus, configured like the real one, plus polkitd.
  if [ -f "$demo/bus.pid" ] && kill -0 "$(cat "$demo/bus.pid")" 2>/dev/null; then
    kill "$(cat "$demo/bus.pid")" "$(cat "$demo/polkit.pid" 2>/dev/null)" 2>/dev/null || true
    sleep 0.5
  fi
  sed -e "s|<listen>.*</listen>|<listen>unix:path=$demo/system_bus_socket</listen>|" \
      -e 's|<includedir>system.d</includedir>|<includedir>/usr/share/dbus-1/system.d</includedir>|' \
      -e '/<user>/d' -e '/<pidfile>/d' -e '/<fork\/>/d' \
      -e "s|</busconfig>|<include>$top/policy/org.microvmd1.conf</include></busconfig>|" \
      /usr/share/dbus-1/system.conf > "$demo/system.conf"
  dbus-daemon --config-file="$demo/system.conf" --fork --print-pid=3 3>"$demo/bus.pid" --nosyslog
  address="unix:path=$demo/system_bus_socket"
  client_address=$address
  export DBUS_SYSTEM_BUS_ADDRESS=$address
  install -m 0644 build/policy/org.microvmd1.policy /usr/share/polkit-1/actions/org.microvmd1.policy
  setsid /usr/lib/polkit-1/polkitd --no-debug >"$demo/polkitd.log" 2>&1 < /dev/null &
  echo $! > "$demo/polkit.pid"
  echo "Started a private system bus at $address, with polkitd."
fi

# The service itself, detached, logging to a file.
if [ -f "$demo/microvmd.pid" ] && kill -0 "$(cat "$demo/microvmd.pid")" 2>/dev/null; then
  kill "$(cat "$demo/microvmd.pid")"; sleep 1
fi
cat > "$demo/microvmd.conf" <<CONF
[qemu]
accel=tcg

# microvmd's guest kernel and initramfs, as built here.
[guest]
kernel=$top/build/guest/vmlinuz
initramfs=$top/build/guest/initramfs.img

CONF
setsid "$top/build/src/daemon/microvmd" --bus="$address" --state-dir="$demo/state" \
  --runtime-dir="$demo/run" --config="$demo/microvmd.conf" >"$demo/microvmd.log" 2>&1 < /dev/null &
echo $! > "$demo/microvmd.pid"
for _ in $(seq 100); do
  busctl --address="$client_address" status org.microvmd1 >/dev/null 2>&1 && break
  sleep 0.1
done

export DBUS_SYSTEM_BUS_ADDRESS=$client_address
"$microvmctl" delete --force demo >/dev/null 2>&1 || true
cat > "$demo/demo.json" <<SPEC
{
  "name": "demo",
  "hypervisor_type": "qemu",
  "cpu_millicores": 1000,
  "memory_bytes": 268435456,
  "image": "oci:$top/build/tests/guest/oci:1",
  "disk_bytes": 268435456,
  "hostname": "demo",
  "labels": {"purpose": "demo"}
}
SPEC
"$microvmctl" create -f "$demo/demo.json" --start
"$microvmctl" list
echo
"$microvmctl" image list
echo
echo "--- the guest's console ---"
"$microvmctl" logs --tail 8 demo | sed -e '$a\'
echo "---------------------------"
echo
echo "\$ microvmctl exec demo -- uname -a"
"$microvmctl" exec demo -- uname -a
echo
echo "microvmd is running (log: $demo/microvmd.log). Reach it with:"
echo "  export DBUS_SYSTEM_BUS_ADDRESS=$DBUS_SYSTEM_BUS_ADDRESS"
echo "  $microvmctl list"
echo "  $microvmctl console demo      # the serial console; Ctrl+] leaves"

# The Cockpit page, as built in build/cockpit/microvmd: Debian's cockpit-ws
# with a local session (no login, no TLS, so on loopback only), its bridge
# on the bus the service is on, finding the page where Cockpit looks for
# packages being worked on ($XDG_DATA_HOME/cockpit) and the build's
# microvmctl (the console and the logs) first in PATH.
cockpit_port=${MICROVMD_DEMO_COCKPIT_PORT:-9091}
if [ -f "$demo/cockpit-ws.pid" ] && kill -0 "$(cat "$demo/cockpit-ws.pid")" 2>/dev/null; then
  kill "$(cat "$demo/cockpit-ws.pid")"; sleep 0.5
fi
mkdir -p "$demo/data/cockpit" "$demo/cockpit-home"
ln -sfn "$top/build/cockpit/microvmd" "$demo/data/cockpit/microvmd"
DBUS_SYSTEM_BUS_ADDRESS=$client_address XDG_DATA_HOME="$demo/data" HOME="$demo/cockpit-home" \
  PATH="$top/build/src/cli:$PATH" \
  setsid /usr/lib/cockpit/cockpit-ws --local-session=/usr/bin/cockpit-bridge \
    --port "$cockpit_port" --address 127.0.0.1 >"$demo/cockpit-ws.log" 2>&1 < /dev/null &
echo $! > "$demo/cockpit-ws.pid"
for _ in $(seq 100); do
  curl -sf -o /dev/null "http://127.0.0.1:$cockpit_port/cockpit/@localhost/microvmd/manifest.json" && break
  sleep 0.1
done
echo
echo "The Cockpit page (cockpit-ws on loopback, as root; log: $demo/cockpit-ws.log):"
echo "  http://127.0.0.1:$cockpit_port/cockpit/@localhost/microvmd/index.html"
