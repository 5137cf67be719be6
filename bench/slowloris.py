#!/usr/bin/env python3
"""Slowloris against `steno serve`: what unfinished request heads cost, with and without limits.

Opens CONNECTIONS TCP connections from ADDRESSES loopback source addresses (127.0.1.1, …),
each sending a request head that never ends (PARTIAL bytes of one long header), so that
libwebsockets holds a request-head buffer for each, and reads the server's resident memory a
few seconds later (before lws's 10 s header timeout drops them). Side by side in one run:
the defaults (`--max-handshaking-per-address 64`, `--handshake-memory 128`) and no limits (0,
0: as before the budget). Prints a table; asserts nothing.

    python3 bench/slowloris.py [--steno .build/release/steno] [--connections 12000]
"""

import argparse
import os
import resource
import socket
import time

import steno_serve

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def serve(steno, extra):
    return steno_serve.serve(steno, ["--engine", "pocketsphinx", *extra])


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def settled_rss_mb(pid, port):
    """Resident memory once the server is ready and has stopped growing (it loads its
    recognizers after it listens)."""
    import urllib.request
    for _ in range(300):
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200:
                break
        except Exception:
            pass
        time.sleep(0.2)
    last = rss_mb(pid)
    for _ in range(120):
        time.sleep(1)
        now = rss_mb(pid)
        if abs(now - last) < 1:
            return now
        last = now
    return last


def attack(port, connections, addresses, partial):
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * max(0, partial - 40)
    sockets = []
    for i in range(connections):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((f"127.0.1.{1 + i % addresses}", 0))
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        sockets.append(s)
    time.sleep(0.5)
    for s in sockets:
        try:
            s.send(head)
        except OSError:
            pass
    return sockets


def refused(port):
    """Connections the server refused (429, 503), by its metrics."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    total = 0
    for line in text.splitlines():
        if line.startswith('steno_handshakes_refused_total{reason="address_limit"}') or \
           line.startswith('steno_handshakes_refused_total{reason="handshake_budget"}'):
            total += int(float(line.split()[-1]))
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steno", default=os.path.join(ROOT, ".build/release/steno"))
    parser.add_argument("--connections", type=int, default=12000)
    parser.add_argument("--addresses", type=int, default=200)
    parser.add_argument("--partial", type=int, default=20000, help="bytes of the unfinished head")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    print(f"{args.connections} connections from {args.addresses} addresses, {args.partial} bytes of head each")
    print(f"{'limits':<44} {'RSS before':>10} {'RSS after':>10} {'growth':>8} {'refused':>8} {'per head held':>13}")
    for name, extra in [("defaults (64 per address, 128 MB)", []),
                        ("none (0, 0: before the budget)", ["--max-handshaking-per-address", "0", "--handshake-memory", "0"])]:
        process, port = serve(args.steno, extra)
        try:
            before = settled_rss_mb(process.pid, port)
            sockets = attack(port, args.connections, args.addresses, args.partial)
            time.sleep(3)
            after = rss_mb(process.pid)
            count = refused(port)
            held = args.connections - count
            print(f"{name:<44} {before:>8.1f} MB {after:>8.1f} MB {after - before:>5.0f} MB {count:>8} "
                  f"{(after - before) * 1024 / max(1, held):>10.1f} KB")
            for s in sockets:
                s.close()
        finally:
            process.terminate()
            process.wait(timeout=30)


if __name__ == "__main__":
    main()
