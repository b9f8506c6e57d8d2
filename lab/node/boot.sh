#!/bin/bash
# Boot a lab node. Runs as PID 1 of the node's new PID, mount and UTS namespaces, inside
# the node's network namespace (started by `fleetlab _supervise`). Like a real boot: it
# picks the default bootloader entry, makes that ostree deployment the root
# filesystem, mounts /sysroot, /boot, /var, a /dev of its own, /run, /tmp, /proc, then
# becomes sshd. libostree then sees the system as booted: /run/ostree-booted exists and
# / is the deployment directory (same device and inode).
#
# A soft reboot (systemd-soft-reboot.service: the kernel keeps running, userspace starts again)
# is this script run again with the environment the supervisor gives it: FLEETLAB_BOOT_ID, the
# boot id that stays (the kernel's); FLEETLAB_SOFT_REBOOTS, systemd's SoftRebootsCount; and
# FLEETLAB_NEXTROOT, the checksum of the deployment /run/nextroot held (none: the one booted
# before, as systemd re-executes into the same root without /run/nextroot).
set -euo pipefail
SYSROOT=$1 LABUSR=$2 NODE_STATE=$3 NAME=$4 JOURNAL=$5 BOOT_COUNT=$6
SOFT_REBOOTS=${FLEETLAB_SOFT_REBOOTS:-0} NEXTROOT=${FLEETLAB_NEXTROOT:-}

mount --make-rprivate /
hostname "$NAME"

# The default entry is the one with the highest version (as ostree writes them); a soft reboot
# goes into the deployment of /run/nextroot instead, whatever the boot loader would pick.
best="" bestv=-1
for entry in "$SYSROOT"/boot/loader/entries/*.conf; do
    v=$(sed -n 's/^version //p' "$entry")
    if [ -n "$NEXTROOT" ]; then
        link=$(sed -n 's/^options .*ostree=\([^ ]*\).*/\1/p' "$entry")
        case "$(basename "$(readlink -f "$SYSROOT$link")")" in "$NEXTROOT".*) best=$entry; break ;; esac
    fi
    if [ "${v:-0}" -gt "$bestv" ]; then bestv=$v best=$entry; fi
done
[ -n "$best" ] || { echo "fleetlab boot: no bootloader entry in $SYSROOT/boot/loader/entries" >&2; exit 1; }
bootlink=$(sed -n 's/^options .*ostree=\([^ ]*\).*/\1/p' "$best")
dep=$(readlink -f "$SYSROOT$bootlink")
[ -d "$dep" ] || { echo "fleetlab boot: $best points at a missing deployment" >&2; exit 1; }
osname=$(basename "$(dirname "$(dirname "$dep")")")
checksum=$(basename "$dep"); checksum=${checksum%.*}

mount --bind "$dep" "$dep"
mount --bind "$SYSROOT" "$dep/sysroot"
mount --bind "$SYSROOT/boot" "$dep/boot"
mount --bind "$SYSROOT/ostree/deploy/$osname/var" "$dep/var"
# The lab's own tools (rpm-ostree stand-in, reboot) over the image's /usr over the
# machine's /usr (sshd, python3, ostree, skopeo).
mount -t overlay overlay -o "lowerdir=$LABUSR:$dep/usr:/usr" "$dep/usr"
# The node's own /dev, as container runtimes make one: a small tmpfs (never the machine's
# devtmpfs, so a node that removes or replaces /dev/null changes only its own tmpfs) with
# the device nodes a booted host needs, made with mknod; a devpts instance of its own (so
# sshd allocates ptys there); tmpfs /dev/shm; the /proc/self/fd links.
mount -t tmpfs -o mode=0755,size=1m,nosuid,noexec tmpfs "$dep/dev"
for node in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    read -r dname dmajor dminor <<< "$node"
    mknod -m 0666 "$dep/dev/$dname" c "$dmajor" "$dminor"
done
mkdir -m 0755 "$dep/dev/pts"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5,nosuid,noexec devpts "$dep/dev/pts"
ln -s pts/ptmx "$dep/dev/ptmx"
mkdir -m 1777 "$dep/dev/shm"
mount -t tmpfs -o mode=1777,size=64m,nosuid,nodev tmpfs "$dep/dev/shm"
ln -s /proc/self/fd "$dep/dev/fd"
ln -s /proc/self/fd/0 "$dep/dev/stdin"
ln -s /proc/self/fd/1 "$dep/dev/stdout"
ln -s /proc/self/fd/2 "$dep/dev/stderr"
mount -t tmpfs -o mode=0755 tmpfs "$dep/run"
mkdir -p "$dep/run/lab/faults" "$dep/run/lab/control" "$dep/run/sshd" "$dep/run/ostree"
touch "$dep/run/ostree-booted" "$dep/run/lab/journal.jsonl"
mount --bind "$JOURNAL" "$dep/run/lab/journal.jsonl"
mount --bind "$NODE_STATE/faults" "$dep/run/lab/faults"
rm -f "$NODE_STATE/control/reboot-request" "$NODE_STATE/control/soft-reboot"
mount --bind "$NODE_STATE/control" "$dep/run/lab/control"
boot_id=${FLEETLAB_BOOT_ID:-$(cat /proc/sys/kernel/random/uuid)}
echo "$boot_id" > "$dep/run/lab-boot-id"
echo "$boot_id" > "$NODE_STATE/boot-id"
echo "$SOFT_REBOOTS" > "$dep/run/lab/soft-reboots-count"
echo "$checksum" > "$dep/run/lab/booted-checksum"
echo "$NAME" > "$dep/run/lab/node-name"
cp "$NODE_STATE"/ssh/host_key "$NODE_STATE"/ssh/authorized_keys "$NODE_STATE"/ssh/sshd_config "$dep/run/lab/"
chmod 600 "$dep/run/lab/host_key"
# sshd reads a user's authorized keys as that user: the admin user `core` logs in, root may not.
chmod 644 "$dep/run/lab/authorized_keys"

cd "$dep"
pivot_root . tmp
mount -t proc proc /proc
umount -l /tmp
mount -t tmpfs -o mode=1777 tmpfs /tmp
mount -t sysfs sysfs /sys 2>/dev/null || true
mkdir -p /var/roothome /var/tmp /var/mnt /var/lib
chmod 0700 /var/roothome
printf '{"boot_count": %s, "boot_id": "%s", "checksum": "%s", "event": "boot", "node": "%s", "soft_reboots": %s, "ts": %s}\n' \
    "$BOOT_COUNT" "$boot_id" "$checksum" "$NAME" "$SOFT_REBOOTS" "$(date +%s.%3N)" >> /run/lab/journal.jsonl
# The units enabled on the node (`fleetlab agent`: the Zincati stand-in, bootc's timer), as systemd
# starts them at boot.
/usr/bin/systemctl --lab-boot || true
exec /usr/sbin/sshd -D -e -f /run/lab/sshd_config
