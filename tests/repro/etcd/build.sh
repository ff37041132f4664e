#!/bin/bash
# A fake image recipe for tests/repro_test.sh: one small layer named like the etcd image
# the control plane's static pod runs. Usage: build.sh LAYOUT-DIR
set -euo pipefail
out=${1:?usage: build.sh LAYOUT-DIR}
ref=${SPROUT_IMAGE_REF:-localhost/sprout/etcd:3.4}
here=$(cd "$(dirname "$0")" && pwd)
layer=$(mktemp -d)
trap 'rm -rf "$layer"' EXIT
umask 022
mkdir -p "$layer/usr/local/bin"
printf '#!/bin/sh\necho "not really etcd"\n' > "$layer/usr/local/bin/etcd"
chmod 0755 "$layer/usr/local/bin/etcd"
python3 "$here/../../../images/lib/mkimage.py" "$out" "$ref" '["/usr/local/bin/etcd"]' "$layer"
