"""bench/idle_conns.py HEARTH_BIN N: holds N idle keep-alive connections to a
fresh `hearth serve` (each has made one request), checks /health still
answers quickly, and prints hearth's resident memory per idle connection."""
import resource
import socket
import subprocess
import sys
import time

binary, n = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
need = n + 500
if hard < need:
    sys.exit("RLIMIT_NOFILE hard limit %d < %d: raise it (ulimit -Hn) and rerun" % (hard, need))
resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))  # inherited by the server below
port = 18413
proc = subprocess.Popen([binary, "serve", "--port", str(port), "--log-level", "warn", "--no-demo"])


def rss():
    with open("/proc/%d/status" % proc.pid) as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))


def get_health(sock):
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while not data.endswith(b'{"status":"ok"}'):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("closed after %r" % data[:300])
        data += chunk


try:
    for _ in range(200):  # until it answers 200 (503 while it starts)
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=1)
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            ok = c.recv(100).startswith(b"HTTP/1.1 200")
            c.close()
            if ok:
                break
        except OSError:
            pass
        time.sleep(0.05)
    warm = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
    for s in warm:
        get_health(s)
    before = rss()
    socks = []
    t0 = time.time()
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        get_health(s)
        socks.append(s)
    opened = time.time() - t0
    time.sleep(0.5)
    after = rss()
    lat = []
    probe = socket.create_connection(("127.0.0.1", port))
    for _ in range(200):
        t = time.perf_counter()
        get_health(probe)
        lat.append((time.perf_counter() - t) * 1000)
    lat.sort()
    # the idle ones are all still open and served
    for s in socks[:: max(1, n // 100)]:
        get_health(s)
    print("idle connections: %d (opened in %.1fs, each made one request)" % (n, opened))
    print("hearth RSS: %.1f MiB before, %.1f MiB with them open: %.0f bytes per idle connection (goal < 8192)"
          % (before / 2**20, after / 2**20, (after - before) / n))
    print("/health while they are open: p50 %.3f ms, p99 %.3f ms over 200 requests" % (lat[100], lat[197]))
finally:
    proc.terminate()
    proc.wait(20)
