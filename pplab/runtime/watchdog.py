"""A thread that watches what the main thread waits for, so a hung rank names its wait and a
deadlocked schedule ends within the communication timeout instead of hanging the job."""
from __future__ import annotations

import contextlib
import json
import os
import threading
import time


def write_json(path: str, obj) -> None:
    """Write atomically: the launcher may read the file while a rank is still writing it."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


class Watchdog(threading.Thread):
    """After ``report_after`` s of one wait it writes ``rank{r}.wait`` (what the rank waits
    for); after ``timeout`` s it writes the rank's error file and ends the process."""

    def __init__(self, rank: int, err_dir: str, timeout: float, report_after: float = 1.0):
        super().__init__(daemon=True)
        self.rank, self.err_dir, self.timeout = rank, err_dir, timeout
        self.report_after = report_after
        self.what: str | None = None
        self.since = 0.0
        self.reported = False
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def watching(self, what: str):
        """The main thread waits for ``what`` inside this block. If the wait ends in an
        exception (a peer died), the ``.wait`` report stays: it names what this rank was
        stuck on, which the launcher's diagnosis needs."""
        with self.lock:
            self.what, self.since, self.reported = what, time.monotonic(), False
        yield
        with self.lock:
            reported, self.what = self.reported, None
        if reported:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(self.err_dir, f"rank{self.rank}.wait"))

    def run(self) -> None:
        while True:
            time.sleep(0.1)
            with self.lock:
                what, since, reported = self.what, self.since, self.reported
            if what is not None:
                self._check(what, time.monotonic() - since, reported)

    def _check(self, what: str, waited: float, reported: bool) -> None:
        if waited > self.report_after and not reported:
            write_json(os.path.join(self.err_dir, f"rank{self.rank}.wait"),
                       {"rank": self.rank, "waiting_for": what, "since": time.time() - waited})
            with self.lock:
                self.reported = True
        if waited > self.timeout:
            write_json(os.path.join(self.err_dir, f"rank{self.rank}.json"),
                       {"rank": self.rank, "kind": "stuck",
                        "message": f"rank {self.rank} stuck for {waited:.1f} s (communication "
                                   f"timeout) {what}"})
            os._exit(3)
