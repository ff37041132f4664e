#!/usr/bin/env python3
"""Forwards a port on the host's loopback into a network namespace, to the first live one
of several TCP servers there: the cluster harness's way to put the nodes' apiservers on
127.0.0.1, so `kubectl --kubeconfig out/admin.conf` works from the host.

  api-forward.py NAMESPACE PORT-FILE BACKEND... [--port PORT]

It listens on 127.0.0.1 only, on --port (default 6443) when that is free, else on a free
port the kernel picks, and writes the port it got to PORT-FILE. Then it enters the
network namespace (/run/netns/NAMESPACE; the listening socket stays on the host's
loopback), so every connection it makes goes to a BACKEND (ADDRESS:PORT) inside it and
nowhere else. Each client connection goes to the backend that last accepted one, else
to the next that accepts a connection within 2 s, in order; a backend that dies is left
for the next live one. At most 64 connections at a time; more wait. Needs root (setns).
"""

import ctypes
import os
import socket
import sys
import threading

CLONE_NEWNET = 0x40000000
MAX_CONNECTIONS = 64
CONNECT_TIMEOUT = 2.0


def enter_namespace(name):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/run/netns/" + name, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, "setns into network namespace %s: %s" % (name, os.strerror(err)))
    finally:
        os.close(fd)


def listen(port):
    for p in (port, 0):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            s.close()
            continue
        s.listen(64)
        return s
    raise OSError("cannot listen on 127.0.0.1")


class Backends:
    """The backends in order, and the one that last accepted a connection."""

    def __init__(self, addresses):
        self.addresses = addresses
        self.current = 0
        self.lock = threading.Lock()

    def connect(self):
        with self.lock:
            start = self.current
        n = len(self.addresses)
        for k in range(n):
            i = (start + k) % n
            host, port = self.addresses[i]
            try:
                conn = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT)
            except OSError:
                continue
            conn.settimeout(None)
            with self.lock:
                if self.current != i:
                    print("api-forward: now forwarding to %s:%d" % (host, port), flush=True)
                self.current = i
            return conn
        return None


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
        try:
            s.shutdown(how)
        except OSError:
            pass


def serve(client, backends, slots):
    try:
        upstream = backends.connect()
        if upstream is None:
            print("api-forward: no backend accepts a connection; closing the client's", flush=True)
            return
        other = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        other.start()
        pump(client, upstream)
        other.join()
        upstream.close()
    finally:
        client.close()
        slots.release()


def main(argv):
    port = 6443
    if "--port" in argv:
        i = argv.index("--port")
        port = int(argv[i + 1])
        del argv[i : i + 2]
    if len(argv) < 3:
        sys.exit("usage: api-forward.py NAMESPACE PORT-FILE BACKEND... [--port PORT]")
    namespace, port_file = argv[0], argv[1]
    addresses = []
    for b in argv[2:]:
        host, _, p = b.rpartition(":")
        addresses.append((host, int(p)))
    server = listen(port)
    enter_namespace(namespace)
    got = server.getsockname()[1]
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % got)
    os.rename(tmp, port_file)
    print("api-forward: 127.0.0.1:%d -> %s in %s" % (got, ", ".join("%s:%d" % a for a in addresses), namespace),
          flush=True)
    backends = Backends(addresses)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
    while True:
        slots.acquire()
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client, backends, slots), daemon=True).start()


if __name__ == "__main__":
    main(sys.argv[1:])
