"""What ``make lab`` adds to JupyterLab's server: kernel websockets without Nagle's algorithm.

A slider move makes the kernel send a few small messages in a row (busy, the echo of the
value, the new picture, idle). The server writes each to the browser's websocket; with
Nagle's algorithm on (tornado's default), a small write waits for the ACK of the one before,
and the browser may hold that ACK back for its delayed-ACK timer. Setting TCP_NODELAY on the
kernel websocket sends each message at once (what it saves: docs/course.md, docs/teaching.md).

Use: ``jupyter lab`` with the option ``SERVER_FLAG`` (``make lab`` and the browser tests
pass it; an instructor's own JupyterHub can set the same in its server config).
"""
from __future__ import annotations

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

SERVER_FLAG = ("--ServerApp.kernel_websocket_connection_class="
               "pplab.canvases.labserver.NoDelayConnection")


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """The stock kernel websocket connection, with TCP_NODELAY set when it opens."""

    def connect(self):
        self.websocket_handler.set_nodelay(True)
        return super().connect()


__all__ = ["NoDelayConnection", "SERVER_FLAG"]
