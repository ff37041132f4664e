#!/usr/bin/env python3
"""Scans a root file system (a tar stream on stdin, e.g. from sqfs2tar) for secrets:
private key material (PEM or OpenSSH blocks with a key body, SSH host keys) and, if
given, the exact bytes of a cluster secret (raw or base64). Prints every finding and
exits 1 if there is any. Binaries that merely contain the words "PRIVATE KEY" (parsers)
are not findings: a finding needs a key body after the header. ELF binaries are not
searched for PEM blocks (Debian's libgnutls embeds public self-test keys), only for the
cluster secret."""
import base64
import re
import sys
import tarfile

PEM = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----\r?\n(?:[A-Za-z0-9-]+: [^\n]*\n)*\r?\n?[A-Za-z0-9+/=]{40,}")
HOST_KEY = re.compile(r"(^|/)ssh_host_[a-z0-9]+_key$")

def main():
    needles = []
    if len(sys.argv) > 1:
        secret = open(sys.argv[1], "rb").read()
        needles = [secret, base64.b64encode(secret)]
    findings = 0
    files = 0
    with tarfile.open(fileobj=sys.stdin.buffer, mode="r|") as tar:
        for member in tar:
            if HOST_KEY.search(member.name):
                print(f"finding: SSH host key file {member.name}")
                findings += 1
            if not member.isfile():
                continue
            files += 1
            data = tar.extractfile(member).read()
            if not data.startswith(b"\x7fELF") and PEM.search(data):
                print(f"finding: private key material in {member.name}")
                findings += 1
            for n in needles:
                if n and n in data:
                    print(f"finding: the cluster secret in {member.name}")
                    findings += 1
    print(f"scanned {files} files: {findings} findings")
    return 1 if findings else 0

if __name__ == "__main__":
    sys.exit(main())
