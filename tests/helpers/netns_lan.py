"""Hosts for tests: network namespaces on one machine, joined by a bridge, 10.77.0.0/24.

Host i gets 10.77.0.{i+1}; the switch namespace holding the bridge gets 10.77.0.254 (the
Slurm controller's address). Every address lives only inside namespaces created here, and
``Lan.close`` kills what runs in them and deletes them. Names carry the test's pid, so a run
that was killed leaves names that the next run recognises and removes, and a number per LAN,
so two LANs of one run (the run's Slurm and two bare hosts) can be up at once.
"""
from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import time

SWITCH_ADDR = "10.77.0.254"
_LANS = itertools.count()


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def skip_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if shutil.which("ip") is None:
        return "needs iproute2 (`ip`): apt-get install iproute2"
    probe = f"pplprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode:
        return f"network namespaces not permitted here: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def remove_stale() -> None:
    """Delete namespaces left by earlier test runs whose process is gone."""
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        m = re.match(r"(ppl(\d+)(?:x\d+)?-\S+)", line)
        if m and not os.path.exists(f"/proc/{m.group(2)}"):
            Lan.kill_all(m.group(1))
            _ip("netns", "del", m.group(1), check=False)


class Lan:
    """``Lan(["n0", "n1"])``: host namespaces on a bridge; ``lan.ns["n0"]``, ``lan.addr["n0"]``."""

    def __init__(self, hosts: list[str]):
        tag = f"ppl{os.getpid()}x{next(_LANS)}"
        self.switch = f"{tag}-sw"
        self.ns = {h: f"{tag}-{h}" for h in hosts}
        self.addr = {h: f"10.77.0.{i + 1}" for i, h in enumerate(hosts)}
        self.ifname = {h: f"{tag[-8:]}{h}"[-15:] for h in hosts}   # ≤ 15 characters
        remove_stale()
        try:
            self._up(tag)
        except BaseException:
            self.close()
            raise

    def _up(self, tag: str) -> None:
        sw = self.switch
        _ip("netns", "add", sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "addr", "add", f"{SWITCH_ADDR}/24", "dev", "br0")
        for dev in ("br0", "lo"):
            _ip("-n", sw, "link", "set", dev, "up")
        for h, ns in self.ns.items():
            inner, outer = self.ifname[h], f"{tag[-8:]}s{h}"[-15:]
            _ip("netns", "add", ns)
            _ip("link", "add", inner, "type", "veth", "peer", "name", outer)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "netns", sw)
            _ip("-n", sw, "link", "set", outer, "master", "br0")
            _ip("-n", sw, "link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{self.addr[h]}/24", "dev", inner)
            for dev in (inner, "lo"):
                _ip("-n", ns, "link", "set", dev, "up")

    def exec(self, host: str | None, cmd: list[str]) -> list[str]:
        """The command line that runs ``cmd`` in ``host``'s namespace (None: the switch)."""
        return ["ip", "netns", "exec", self.switch if host is None else self.ns[host], *cmd]

    @staticmethod
    def pids(ns: str) -> list[int]:
        out = _ip("netns", "pids", ns, check=False).stdout
        return [int(p) for p in out.split()]

    @staticmethod
    def kill_all(ns: str) -> None:
        """SIGKILL everything in a namespace: what a node losing power looks like to peers."""
        for pid in Lan.pids(ns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def namespaces(self) -> list[str]:
        return [self.switch, *self.ns.values()]

    def close(self) -> None:
        for ns in self.namespaces():
            self.kill_all(ns)
        deadline = time.monotonic() + 10
        while any(self.pids(ns) for ns in self.namespaces()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for ns in self.namespaces():
            _ip("netns", "del", ns, check=False)

    def left(self) -> list[str]:
        """Namespaces of this Lan that still exist."""
        have = _ip("netns", "list", check=False).stdout
        return [ns for ns in self.namespaces() if re.search(rf"^{ns}\b", have, re.M)]
