#!/bin/bash
# Sourced by tests that give workers their CA pin (tests/worker_pin_test.sh,
# qemu-tests/cluster-lib.sh): the pin of the Kubernetes CA a founder makes from a cluster
# secret, computed apart from sprout, with the openssl command and python3 only
# (docs/formation.md, "Workers pin the cluster CA"):
#   OKM = HKDF-SHA256(key = the secret's bytes, salt "sprout pki v1",
#                     info "sprout kubernetes ca key v1", 48 bytes)
#   d   = OKM mod (n - 1) + 1, n the order of P-256
#   pin = "sha256:" + SHA-256 of the DER SubjectPublicKeyInfo of d*G (openssl ec computes
#         the point from a SEC1 key that holds d alone)
# A change of the derivation in lib/pki that this does not follow fails the tests that
# use it: their pinned workers refuse the real CA.

# ca_cert_hash_of_secret FILE: prints the pin for the secret in FILE (its bytes as they
# are, as `sprout personalize --cluster-secret` and the config area take them).
ca_cert_hash_of_secret() {
  local okm
  okm=$(openssl kdf -keylen 48 -kdfopt digest:SHA256 -kdfopt "hexkey:$(od -An -tx1 -v "$1" | tr -d ' \n')" \
    -kdfopt "salt:sprout pki v1" -kdfopt "info:sprout kubernetes ca key v1" HKDF | tr -d ':') || return 1
  python3 -c '
import sys
n = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
d = int(sys.argv[1], 16) % (n - 1) + 1
# ECPrivateKey { version 1, privateKey d, parameters prime256v1 }
der = bytes.fromhex("30310201010420") + d.to_bytes(32, "big") + bytes.fromhex("a00a06082a8648ce3d030107")
sys.stdout.buffer.write(der)' "$okm" |
    openssl ec -inform DER -pubout -outform DER 2>/dev/null | sha256sum | sed 's/^\([0-9a-f]*\).*/sha256:\1/'
}
