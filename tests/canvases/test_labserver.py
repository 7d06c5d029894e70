"""``make lab``'s server option: kernel websockets with TCP_NODELAY
(pplab/canvases/labserver.py)."""
from __future__ import annotations

import re
from pathlib import Path

from pplab.canvases.labserver import SERVER_FLAG, NoDelayConnection

ROOT = Path(__file__).resolve().parents[2]


class FakeHandler:
    def __init__(self):
        self.nodelay = None

    def set_nodelay(self, value):
        self.nodelay = value


def test_connection_sets_nodelay_before_connecting(monkeypatch):
    calls = []
    base = NoDelayConnection.__mro__[1]
    monkeypatch.setattr(base, "connect", lambda self: calls.append(self.websocket_handler.nodelay))
    # a stand-in handler in place of the traitlet (which insists on a real tornado handler)
    monkeypatch.setattr(NoDelayConnection, "websocket_handler", FakeHandler(), raising=False)
    NoDelayConnection.__new__(NoDelayConnection).connect()
    assert calls == [True]


def test_make_lab_and_browser_tests_use_the_flag():
    makefile = (ROOT / "Makefile").read_text()
    lab = re.search(r"^lab:.*\n((?:\t.*\n)+)", makefile, re.M).group(1)
    flags = re.search(r"^LABFLAGS\s*=\s*(.*)$", makefile, re.M).group(1).strip()
    assert "$(LABFLAGS)" in lab and flags == SERVER_FLAG
    assert "SERVER_FLAG" in (ROOT / "tests" / "helpers" / "browser_util.py").read_text()


def test_flag_names_an_importable_class():
    from jupyter_server.services.kernels.connection.base import BaseKernelWebsocketConnection
    module, _, name = SERVER_FLAG.split("=", 1)[1].rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    assert issubclass(cls, BaseKernelWebsocketConnection)
