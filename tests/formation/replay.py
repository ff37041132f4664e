#!/usr/bin/env python3
"""Capture and replay formation frames, for tests/formation_replay_test.sh.

capture FILE SECONDS ADDRESS: join the formation multicast group on the interface
  holding ADDRESS and write every datagram that arrives on UDP port 7777 as one hex line.
replay FILE SECONDS TARGETS ADDRESS: from ADDRESS, send every captured datagram to each
  TARGET (comma list of IPv4 addresses, port 7777) and to the group, again and again
  for SECONDS.
Only the addresses given are used; the tests run it inside a network namespace.
"""
import socket
import struct
import sys
import time

GROUP, PORT = "239.255.77.77", 7777


def capture(path, seconds, address):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", PORT))
    mreq = struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton(address))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    s.settimeout(0.2)
    end = time.time() + seconds
    with open(path, "w") as out:
        while time.time() < end:
            try:
                data, _ = s.recvfrom(65536)
            except socket.timeout:
                continue
            out.write(data.hex() + "\n")
            out.flush()


def replay(path, seconds, targets, address):
    frames = [bytes.fromhex(line.strip()) for line in open(path) if line.strip()]
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(address))
    s.bind((address, PORT))
    end = time.time() + seconds
    rounds = 0
    while time.time() < end:
        for f in frames:
            for t in targets + [GROUP]:
                s.sendto(f, (t, PORT))
        rounds += 1
        time.sleep(0.2)
    print(f"replayed {len(frames)} frames {rounds} times to {','.join(targets)} and {GROUP}")


if __name__ == "__main__":
    cmd, path, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    if cmd == "capture":
        capture(path, seconds, sys.argv[4])
    else:
        replay(path, seconds, sys.argv[4].split(","), sys.argv[5])
