"""``make lab``'s server: kernel websockets with TCP_NODELAY (pplab/canvases/labserver.py), and
no news prompt on every start (tools/jupyter-config)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

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


@pytest.mark.slow
def test_make_lab_asks_no_news_question(tmp_path):
    """The lab ``make lab`` starts (its own command line, from ``make -n lab``) serves
    JupyterLab's news setting with the default "false" instead of the shipped "none" (Ask),
    so the "official Jupyter news?" prompt never appears; a student's own settings (here a
    fresh, empty folder) would still win over that default."""
    import json
    import os
    import shlex
    import subprocess
    import sys
    import urllib.request
    sys.path.insert(0, str(ROOT / "tests" / "helpers"))
    from browser_util import free_port, stop, wait_http
    # MAKEFLAGS/MAKELEVEL cleared: run under `make test`, the child make would otherwise
    # print "Entering/Leaving directory" lines around the recipe
    make_env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    recipe = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT, env=make_env,
                            capture_output=True, text=True, timeout=60, check=True).stdout
    command = [line for line in recipe.splitlines() if "jupyter lab" in line][-1]
    port, token = free_port(), "pplab-news-test"
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(tmp_path / "config"),
               JUPYTERLAB_SETTINGS_DIR=str(tmp_path / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp_path / "ws"),
               JUPYTER_RUNTIME_DIR=str(tmp_path / "rt"))
    env.pop("JUPYTER_CONFIG_PATH", None)
    words = shlex.split(command)
    while "=" in words[0]:                      # the recipe's environment, then the command
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    log = tmp_path / "lab.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(words + ["--no-browser", f"--port={port}",
                                         "--ServerApp.port_retries=0",
                                         f"--IdentityProvider.token={token}"],
                                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{url}/lab?token={token}", proc, log)
        plugin = "@jupyterlab/apputils-extension:notification"
        with urllib.request.urlopen(f"{url}/lab/api/settings/{plugin}?token={token}",
                                    timeout=30) as r:
            settings = json.load(r)
        news = settings["schema"]["properties"]["fetchNews"]
        assert news["default"] == "false" and settings["settings"] == {}, news
        shipped = Path(sys.prefix, "share", "jupyter", "lab", "schemas", "@jupyterlab",
                       "apputils-extension", "notification.json")
        assert json.loads(shipped.read_text())["properties"]["fetchNews"]["default"] == "none"
    finally:
        stop(proc)
