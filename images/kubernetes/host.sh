#!/bin/bash
# Prints the folder that holds the host binaries of Debian's Kubernetes source package
# (kubelet, kube-proxy), compiled once by compile.sh and cached under CACHE.
# Usage: host.sh CACHE   (sprout runs it for a profile's `kubelet: {recipe: DIR}`)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/compile.sh" "${1:?usage: host.sh CACHE}"
