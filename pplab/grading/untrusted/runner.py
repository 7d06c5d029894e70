"""The student's kernel inside the sandbox (``python -m pplab.grading.untrusted.runner``).

It reads one JSON request per line on stdin and answers one JSON line on the pipe it was
started with; nothing it says is trusted. Requests:

* ``{"op": "execute", "code": ...}`` runs a notebook cell in an IPython shell and answers
  its outputs (text and pictures, cut at ``OUTPUT_CAP``);
* ``{"op": "call", "name": ..., "args": [...]}`` calls the student's function ``name`` on
  data and answers the result as data (:mod:`pplab.grading.untrusted.wire`), or the error;
* ``{"op": "value", "name": ...}`` answers a variable's value as data;
* ``{"op": "source", "name": ...}`` answers the source text of the student's function
  ``name`` (capped at ``SOURCE_CAP``): data the trusted side hands to fresh ranks;
* ``{"op": "ranks", "request": {...}, "timeout": s}`` is answered only by a runner that has
  run nothing else: the trusted grader starts a fresh sandbox for it, and its runner
  launches the ranks of a real-code exercise (:mod:`pplab.runtime.rank_launch`) and
  answers their reports, which the trusted side reads strictly.

The student's code can write to file descriptors 1 and 2 freely: they go to a capped file,
not to the pipe, which lives on a descriptor of its own.
"""
from __future__ import annotations

import io
import json
import os
import sys
import traceback

OUTPUT_CAP = 200_000            # characters of text output kept per cell
SOURCE_CAP = 100_000            # characters of a function's source handed out


class CappedText(io.TextIOBase):
    """A stdout/stderr that keeps the first ``OUTPUT_CAP`` characters and counts the rest."""

    def __init__(self):
        self.parts, self.kept, self.dropped = [], 0, 0

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        s = str(s)
        room = OUTPUT_CAP - self.kept
        if room > 0:
            self.parts.append(s[:room])
            self.kept += min(room, len(s))
        self.dropped += max(0, len(s) - max(room, 0))
        return len(s)

    def text(self) -> str:
        tail = f"\n… {self.dropped} more characters of output dropped" if self.dropped else ""
        return "".join(self.parts) + tail


def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    return InteractiveShell.instance(colors="NoColor")   # figures draw with Agg, unshown


def _rich(outputs) -> list[dict]:
    out = []
    for o in outputs:
        data = {k: v for k, v in o.data.items() if k in ("text/plain", "image/png")}
        if data:
            out.append({"output_type": "display_data", "data": data, "metadata": {}})
    return out


def execute(shell, code: str) -> dict:
    from IPython.utils.capture import capture_output
    stdout, stderr = CappedText(), CappedText()
    with capture_output(stdout=False, stderr=False) as cap:
        old = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = stdout, stderr
        try:
            result = shell.run_cell(code, store_history=True)
        finally:
            sys.stdout, sys.stderr = old
    outputs = []
    for name, stream in (("stdout", stdout), ("stderr", stderr)):
        if stream.kept or stream.dropped:
            outputs.append({"output_type": "stream", "name": name, "text": stream.text()})
    outputs += _rich(cap.outputs[:20])
    err = result.error_in_exec or result.error_before_exec
    if err is not None:
        outputs.append({"output_type": "error", "ename": type(err).__name__,
                        "evalue": str(err)[:2000], "traceback": []})
    return {"outputs": outputs}


def _error(e: BaseException) -> dict:
    return {"error": f"{type(e).__name__}: {e}"[:2000]}


def call(shell, name: str, args: list, kwargs: dict) -> dict:
    from .wire import decode, encode
    fn = shell.user_ns.get(name)
    if fn is None:
        return {"error": f"NameError: {name} is not defined"}
    out = CappedText()
    old = sys.stdout
    sys.stdout = out
    try:
        value = fn(*decode(args), **{str(k): decode(v) for k, v in kwargs.items()})
    except BaseException as e:                  # noqa: BLE001 — the student's error is data
        return _error(e)
    finally:
        sys.stdout = old
    return {"value": encode(value)}


def value(shell, name: str) -> dict:
    from .wire import encode
    if name not in shell.user_ns:
        return {"error": f"NameError: {name} is not defined"}
    obj = shell.user_ns[name]
    return {"callable": True} if callable(obj) else {"value": encode(obj)}


def source(shell, name: str) -> dict:
    """The source of the student's function ``name``, as text (what a grader runs in fresh
    ranks: nothing else of this kernel goes with it)."""
    import inspect
    import textwrap
    fn = shell.user_ns.get(name)
    if not callable(fn):
        return {"error": f"{name} is not a function yet: define it with def"}
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        return {"error": f"cannot read the source of {name}: define it with def in a cell"}
    if len(text) > SOURCE_CAP:
        return {"error": f"the source of {name} is over {SOURCE_CAP} characters"}
    return {"value": text}


def ranks(request: dict, timeout: float) -> dict:
    """Launch a real-code exercise's ranks (this runner has run no student code)."""
    from ...runtime import rank_launch
    rank_launch.undumpable()                # it holds every rank's inputs
    try:
        return {"ranks": rank_launch.launch(request, float(timeout))}
    except rank_launch.RankError as e:
        return {"error": str(e)}


def serve(pipe) -> None:
    shell = None
    fresh = True                            # no student code has run in this process
    for line in sys.stdin:
        try:
            req = json.loads(line)
            op = req["op"]
            if op == "ranks":
                reply = (ranks(req["request"], req["timeout"]) if fresh else
                         {"error": "ranks are launched only by a fresh sandbox"})
                fresh = False
            else:
                fresh = False
                shell = shell or _shell()
                reply = _answer(shell, op, req)
        except Exception:                       # noqa: BLE001 — keep serving
            reply = {"error": traceback.format_exc(limit=3)[-2000:]}
        pipe.write(_dumps(reply) + "\n")
        pipe.flush()


def _dumps(reply: dict) -> str:
    """The reply as one JSON line; one that cannot be written (a whole number past Python's
    4,300-digit limit) becomes an error for that request only."""
    try:
        return json.dumps(reply)
    except (ValueError, TypeError) as e:
        return json.dumps({"error": f"the answer cannot be sent as data: {e}"[:2000]})


def _answer(shell, op: str, req: dict) -> dict:
    if op == "execute":
        return execute(shell, req["code"])
    if op == "call":
        return call(shell, req["name"], req.get("args", []), req.get("kwargs", {}))
    if op == "value":
        return value(shell, req["name"])
    if op == "source":
        return source(shell, req["name"])
    return {"error": f"unknown op {op!r}"}


def main() -> None:
    import signal
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)    # a write past the file cap fails, no kill
    # the pipe to the grader moves to a descriptor of its own; 1 and 2 go to a capped file
    pipe = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sink = os.open("runner-output.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    sys.stdout = sys.stderr = io.TextIOWrapper(os.fdopen(1, "wb", buffering=0),
                                               write_through=True)
    serve(pipe)


if __name__ == "__main__":
    main()
