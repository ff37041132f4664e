#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that simulates network loss in the middle of a download.

Usage: cut_proxy.py LISTEN_PORT TARGET_PORT CUT_AFTER_BYTES MAX_CUTS

Bytes pass through unchanged (TLS stays end to end). The first MAX_CUTS connections
that carry more than CUT_AFTER_BYTES from the server are closed abruptly at that
point. Each cut is logged as "cut connection N after B bytes". It serves at most
200 connections and exits after 120 s, so a test can never leave it looping.
"""
import socket
import sys
import threading
import time

listen_port, target_port, cut_after, max_cuts = (int(a) for a in sys.argv[1:5])
cuts = 0
lock = threading.Lock()


def pump(src, dst, count_cut, n):
    global cuts
    sent = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if count_cut:
                with lock:
                    may_cut = cuts < max_cuts
                if may_cut and sent + len(data) > cut_after:
                    keep = cut_after - sent
                    dst.sendall(data[:keep])
                    with lock:
                        cuts += 1
                    print(f"cut connection {n} after {cut_after} bytes", flush=True)
                    break
            dst.sendall(data)
            sent += len(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen_port))
srv.listen(16)
srv.settimeout(1.0)
deadline = time.time() + 120
n = 0
while time.time() < deadline and n < 200:
    try:
        client, _ = srv.accept()
    except socket.timeout:
        continue
    n += 1
    upstream = socket.create_connection(("127.0.0.1", target_port))
    threading.Thread(target=pump, args=(client, upstream, False, n), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client, True, n), daemon=True).start()
