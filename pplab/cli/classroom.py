"""``pplab classroom init|up``: set a class up on this machine, then start its JupyterHub
(docs/classroom.md). Both run as root; each step is printed as it is done."""
from __future__ import annotations

import os
from pathlib import Path

from . import UsageError


def add_arguments(p) -> None:
    p.add_argument("action", choices=["init", "up"],
                   help="init: settings, kit files, groups, grader account, course, exchange; "
                        "up: start JupyterHub")
    p.add_argument("--settings", default=None,
                   help="the class's settings file (default: $PPLAB_CLASSROOM, else "
                        "/etc/pplab/classroom.ini)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="init: set a value of the settings file, e.g. --set course_id=pp101 "
                        "or --set hub.port=8080; repeatable (default: none)")
    p.add_argument("--ssl-cert", default=None, metavar="PEM",
                   help="up: serve HTTPS with this certificate, with --ssl-key (default: "
                        "none, plain HTTP: for a hub behind a TLS proxy or on a closed network)")
    p.add_argument("--ssl-key", default=None, metavar="PEM",
                   help="up: the certificate's private key (default: none)")


def _values(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--set takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def main(args) -> int:
    from ..probe.policy import SETTINGS_VAR, SYSTEM_PATH
    from ..classroom import setup
    path = Path(args.settings or os.environ.get(SETTINGS_VAR) or SYSTEM_PATH)
    try:
        if args.action == "init":
            if args.ssl_cert or args.ssl_key:
                raise UsageError("--ssl-cert and --ssl-key belong to up")
            setup.init(path, _values(args.set), say=lambda m: print(m, flush=True))
        else:
            if args.set:
                raise UsageError("--set belongs to init: change the settings, then start")
            setup.up(path, say=print, ssl_cert=args.ssl_cert, ssl_key=args.ssl_key)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None
    except (PermissionError, FileNotFoundError, RuntimeError) as e:
        print(f"pplab classroom {args.action}: {e}")
        return 1
    return 0
