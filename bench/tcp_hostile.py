#!/usr/bin/env python3
"""nr-tcptest's time with a hostile neighbourhood against a clean run, and the ratio (a script, not a test).

Hostile: 1,000 connections to nr-tcpserver's control port that never say anything, kept open the whole time (a
flood process reconnects each one the server drops at its handshake timeout, so the server keeps accepting,
greeting and expiring them), and one more idle connection to the data port of every test, made from the client's
own address just before the client's data connection (the test tool tests/c/stall_shim.c, NR_SCAN=2, preloaded
into nr-tcptest: the port scanner that got there first). Clean: neither, the same shim preloaded without NR_SCAN.
The server authenticates (--auth-file), as the checks run it. Each round runs both back to back, in alternating
order (the machine is shared); the summary is the ratio of the medians and the median of the per-round ratios of
the client's wall time, and the same for its median throughput. Goal: wall time within 10 % of the clean run.

Where: as root, between two network namespaces this script creates (deleted on exit), over a veth pair shaped like
the vcluster's gige fabric (config/vcluster.env: VC_GIGE_SHAPING), client and flood in one, server in the other: the
link, not the shared CPUs, sets the pace, so a cost the hostile connections add shows instead of drowning in the
machine's load (on loopback a run's time varied 5-fold between rounds here). Otherwise (or --loopback) on 127.0.0.1.

    bench/tcp_hostile.py [--rounds N] [--idle N] [--build DIR] [--client-args "ARGS"] [--loopback]

Needs a build with the test tools (the dev preset: build/dev). Raises the open-file limit to its hard value.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def flood(host: str, port: int, n: int) -> None:
    """Keep n idle connections to host:port open: reconnect each one the server closes; print the count on
    SIGTERM."""
    sel = selectors.DefaultSelector()
    reopened = 0

    def open_one() -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex((host, port))
        sel.register(s, selectors.EVENT_READ)

    def stop(*_: object) -> None:
        print(f"reconnected {reopened}", flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    for _ in range(n):
        open_one()
    print("ready", flush=True)
    while True:
        for key, _ in sel.select(1.0):
            s = key.fileobj
            try:
                data = s.recv(4096)             # HELLO, or the ERROR of the handshake timeout, then the end
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                sel.unregister(s)
                s.close()
                open_one()
                reopened += 1


class Run:
    """One nr-tcptest run: wall time and median throughput."""

    def __init__(self, wall_s: float, mbps: float) -> None:
        self.wall_s, self.mbps = wall_s, mbps


class Place:
    """Where the server listens and the commands run: loopback, or two shaped network namespaces (root)."""

    def __init__(self, loopback: bool) -> None:
        self.addr, self.client_prefix, self.server_prefix, self.namespaces = "127.0.0.1", [], [], []
        if loopback or os.geteuid() != 0 or not shutil.which("tc"):
            self.label = "loopback"
            return
        shaping = re.search(r'^VC_GIGE_SHAPING="([^"]+)"', (ROOT / "config/vcluster.env").read_text(), re.M)
        if not shaping:
            raise SystemExit("tcp_hostile: no VC_GIGE_SHAPING in config/vcluster.env")
        a, b, va, vb = (f"nrh{x}{os.getpid()}" for x in ("A", "B", "a", "b"))
        try:
            for ns in (a, b):
                subprocess.run(["ip", "netns", "add", ns], check=True)
                self.namespaces.append(ns)
            subprocess.run(["ip", "link", "add", va, "type", "veth", "peer", "name", vb], check=True)
            for ns, dev, ip in ((a, va, "10.214.0.1/24"), (b, vb, "10.214.0.2/24")):
                subprocess.run(["ip", "link", "set", dev, "netns", ns], check=True)
                subprocess.run(["ip", "-n", ns, "addr", "add", ip, "dev", dev], check=True)
                subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
                subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
                subprocess.run(["tc", "-n", ns, "qdisc", "add", "dev", dev, "root", *shaping.group(1).split()],
                               check=True)
        except BaseException:
            self.close()
            raise
        self.addr = "10.214.0.2"
        self.client_prefix, self.server_prefix = ["ip", "netns", "exec", a], ["ip", "netns", "exec", b]
        self.label = f"veth {shaping.group(1)} between network namespaces {a} (client) and {b} (server)"

    def close(self) -> None:
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], check=False)
        self.namespaces = []


def client(place: Place, bindir: Path, port: int, secret: str, args: list[str], env: dict[str, str],
           out: Path) -> Run:
    cmd = [*place.client_prefix, str(bindir / "nr-tcptest"), "-h", place.addr, "-p", str(port), "--auth-file",
           secret, *args, "--json", str(out)]
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"tcp_hostile: {shlex.join(cmd)} failed (exit {r.returncode}): {r.stderr.strip()}")
    doc = json.loads(out.read_text())
    return Run(wall, doc["summary"]["throughput_mbps"]["median"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--idle", type=int, default=1000, help="idle connections to the control port")
    ap.add_argument("--build", default="build/dev", help="build tree with nr-tcpserver, nr-tcptest and the shim")
    ap.add_argument("--client-args", default="-r 5 --iterations 2000",
                    help="nr-tcptest options of every run (a fixed count: the same work every run; over the shaped "
                    "link the default lasts about 5.5 s, so the server drops and the flood reopens every idle "
                    "connection during the hostile run)")
    ap.add_argument("--loopback", action="store_true", help="on 127.0.0.1 even as root")
    ap.add_argument("--flood", nargs=2, metavar=("HOST", "PORT"), help=argparse.SUPPRESS)  # internal: be the flood
    a = ap.parse_args()
    if a.flood:
        flood(a.flood[0], int(a.flood[1]), a.idle)
        return 0
    build = (ROOT / a.build).resolve()
    bindir, shim = build / "src/tcp", build / "tests/c/libnr_stall_shim.so"
    for f in (bindir / "nr-tcpserver", bindir / "nr-tcptest", shim):
        if not f.exists():
            print(f"tcp_hostile: {f} is missing (build the dev preset: cmake --preset dev && cmake --build "
                  f"build/dev)", file=sys.stderr)
            return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < a.idle + 128:
        print(f"tcp_hostile: the open-file limit {hard} is below {a.idle} connections", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="nr-hostile-"))
    secret = tmp / "secret"
    secret.write_text(os.urandom(16).hex())
    place = Place(a.loopback)
    server = subprocess.Popen([*place.server_prefix, str(bindir / "nr-tcpserver"), "-B", place.addr, "-p", "0",
                               "--auth-file", str(secret)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    flooder: subprocess.Popen | None = None
    try:
        m = re.search(r"\[(\d+)\]", server.stdout.readline() if server.stdout else "")
        if not m:
            raise SystemExit("tcp_hostile: the server did not print its port")
        port = int(m.group(1))
        base = dict(os.environ, LD_PRELOAD=str(shim))
        args = shlex.split(a.client_args)
        clean: list[Run] = []
        hostile: list[Run] = []
        reconnects = 0
        idle_held: list[int] = []           # connections to the control port the server held before each run
        print(f"{place.label}; load {' '.join(Path('/proc/loadavg').read_text().split()[:3])} on {os.cpu_count()} "
              f"CPUs")
        print(f"nr-tcptest {a.client_args}; hostile: {a.idle} idle control connections, one idle data connection "
              f"per test")
        print(f"{'round':>5} {'clean s':>8} {'hostile s':>9} {'ratio':>6} {'clean Mb/s':>11} {'hostile Mb/s':>12} "
              f"{'idle held':>9}")
        for k in range(a.rounds):
            for hostile_first in ([True, False] if k % 2 else [False, True]):
                if not hostile_first:
                    clean.append(client(place, bindir, port, str(secret), args, base, tmp / "c.json"))
                    continue
                flooder = subprocess.Popen([*place.client_prefix, sys.executable, __file__, "--flood", place.addr,
                                            str(port), "--idle", str(a.idle)], stdout=subprocess.PIPE, text=True)
                if not flooder.stdout or flooder.stdout.readline().strip() != "ready":
                    raise SystemExit("tcp_hostile: the flood process did not start")
                time.sleep(1.0)                 # the server has taken them all in
                held = subprocess.run([*place.server_prefix, "ss", "-Htn", "state", "established",
                                       f"( sport = :{port} )"], capture_output=True, text=True).stdout
                idle_held.append(len(held.splitlines()))
                hostile.append(client(place, bindir, port, str(secret), args, dict(base, NR_SCAN="2"),
                                      tmp / "h.json"))
                flooder.terminate()
                out = flooder.communicate(timeout=30)[0]
                reconnects += int(re.search(r"reconnected (\d+)", out).group(1)) if "reconnected" in out else 0
                flooder = None
                time.sleep(1.0)                 # and has closed them again
            c, h = clean[-1], hostile[-1]
            print(f"{k + 1:>5} {c.wall_s:8.3f} {h.wall_s:9.3f} {h.wall_s / c.wall_s:6.3f} {c.mbps:11.0f} "
                  f"{h.mbps:12.0f} {idle_held[-1]:9d}")
        wall_ratio = statistics.median(h.wall_s for h in hostile) / statistics.median(c.wall_s for c in clean)
        per_round = statistics.median(h.wall_s / c.wall_s for c, h in zip(clean, hostile))
        mbps_ratio = statistics.median(h.mbps for h in hostile) / statistics.median(c.mbps for c in clean)
        print(f"wall time, hostile / clean: ratio of medians {wall_ratio:.3f}, median of per-round ratios "
              f"{per_round:.3f} (goal <= 1.10)")
        print(f"throughput, hostile / clean: ratio of medians {mbps_ratio:.3f}")
        print(f"idle control connections the server dropped and the flood reopened meanwhile: {reconnects}")
        return 0 if wall_ratio <= 1.10 else 1
    finally:
        if flooder:
            flooder.kill()
            flooder.wait()
        server.terminate()
        server.wait(timeout=10)
        place.close()
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()


if __name__ == "__main__":
    sys.exit(main())
