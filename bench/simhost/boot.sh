#!/bin/bash
# Boot one simulated host (bench/simfleet.py). Runs as PID 1 of a new PID and mount
# namespace (unshare --mount --pid --fork, started by the fleet's supervisor), on
# loopback only: the host's sshd listens on its own 127.77.x.y address.
#
# The host's root is its own directory ROOT (etc, var, sysroot, root, tmp are its own
# files): the machine's /usr is bind-mounted read-only under it, with the sim's tools
# (rpm-ostree, skopeo, systemctl/reboot/shutdown) bound over their paths; /run is a fresh
# tmpfs each boot, /proc the namespace's own, and the host's boot id (a new one each boot,
# given by the supervisor) is bound over /proc/sys/kernel/random/boot_id, so the
# collection's default boot_time_command sees it change. Then chroot and become sshd.
set -euo pipefail
ROOT=$1 TOOLS=$2 FLEET=$3 NAME=$4 BOOT_ID=$5

mount --make-rprivate /
hostname "$NAME"
mount --bind /usr "$ROOT/usr"
mount -o remount,bind,ro "$ROOT/usr"
mount --bind "$TOOLS/systemctl" "$ROOT/usr/bin/systemctl"
mount --bind "$TOOLS/skopeo" "$ROOT/usr/bin/skopeo"
mount --bind "$TOOLS/bin" "$ROOT/usr/local/bin"
mount -t tmpfs -o mode=0755,size=16m tmpfs "$ROOT/run"
mkdir -p "$ROOT/run/sshd" "$ROOT/run/simfleet/registry" "$ROOT/run/simfleet/ctl"
mount --bind "$FLEET/registry" "$ROOT/run/simfleet/registry"
mount -o remount,bind,ro "$ROOT/run/simfleet/registry"
mount --bind "$FLEET/ctl" "$ROOT/run/simfleet/ctl"
printf '%s\n' "$NAME" > "$ROOT/run/simfleet/name"
printf '%s\n' "$BOOT_ID" > "$ROOT/run/simfleet/boot_id"
cp "$ROOT/sysroot/simfleet/host.json" "$ROOT/run/simfleet/host.json"
mount -t proc proc "$ROOT/proc"
mount --bind "$ROOT/run/simfleet/boot_id" "$ROOT/proc/sys/kernel/random/boot_id"
mount -t tmpfs -o mode=0755,size=1m,nosuid,noexec tmpfs "$ROOT/dev"
for node in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    read -r dname dmajor dminor <<< "$node"
    mknod -m 0666 "$ROOT/dev/$dname" c "$dmajor" "$dminor"
done
mkdir -m 0755 "$ROOT/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$ROOT/dev/pts"
ln -s pts/ptmx "$ROOT/dev/ptmx"
ln -s /proc/self/fd "$ROOT/dev/fd"
mount -t tmpfs -o mode=1777,size=64m tmpfs "$ROOT/tmp"
exec chroot "$ROOT" /usr/sbin/sshd -D -e -f /etc/ssh/sshd_config
