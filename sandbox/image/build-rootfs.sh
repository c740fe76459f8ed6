#!/bin/sh
# Build the member sandbox image without a registry: debootstrap a minimal bookworm
# root filesystem with the packages in packages.txt, then `docker import` it with the
# same entrypoint, environment and working directory the Dockerfile sets.
#
#   sandbox/image/build-rootfs.sh [TAG]     (default skald-sandbox:2; needs root)
set -eu
TAG="${1:-skald-sandbox:2}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PACKAGES="$(grep -v '^#' "$HERE/packages.txt" | tr '\n' ',' | sed 's/,$//')"
WORK="$(mktemp -d /tmp/skald-rootfs.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

debootstrap --variant=minbase --include="$PACKAGES" bookworm "$WORK/root" "$MIRROR"
rm -rf "$WORK/root/var/lib/apt/lists/"* "$WORK/root/var/cache/apt/"*.bin \
       "$WORK/root/var/cache/apt/archives/"*.deb "$WORK/root/usr/share/doc/"* "$WORK/root/usr/share/man/"*
mkdir -p "$WORK/root/home/member"

tar --numeric-owner -C "$WORK/root" -c . | docker import \
    --change 'ENV HOME=/home/member' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'WORKDIR /home/member' \
    --change 'ENTRYPOINT ["/usr/bin/tini", "--"]' \
    --change 'CMD ["sleep", "infinity"]' \
    - "$TAG"
echo "built $TAG"
