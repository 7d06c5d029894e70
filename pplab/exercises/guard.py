"""Block library paths while a student's function runs.

A task that asks for a derivation is worthless if ``make_schedule(...)`` or the grader's own
reference helper passes it. While a grader calls the student's code, every blocked function
has its code object swapped for a stub, so *every* reference to it (``from pplab.registry
import make_schedule`` made long before, an alias, a method that calls it) hits the stub. The
stub records the call and raises, and the grader reports the call even if the student's code
swallowed the exception.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
import types
from contextlib import contextmanager

from .tasks import ANSWER_KEYS, TASKS

#: the modules every schedule is written in: a pattern ``module.*`` names the functions
#: ``module`` holds, re-exports included, but never these modules' functions it imported
#: (no task asks for them, and cutting them would break every executor in the sandbox)
SHARED = ("ir", "keys")


def _from_registry() -> tuple[str, ...]:
    """Every schedule generator's module and every closed form's module, as the registry
    knows them, plus the table that builds schedules by name and the schedule search."""
    from ..registry import SPECS
    modules = {s.generator.__module__ for s in SPECS}
    for package in {m.rpartition(".")[0] for m in modules if m.count(".") >= 2}:
        path = importlib.import_module(package).__path__
        modules |= {f"{package}.{info.name}" for info in pkgutil.iter_modules(path)}
    modules |= {s.excess.__module__ for s in SPECS if s.excess is not None}
    own = __name__.split(".")[0] + "."
    return tuple(sorted(f"{m[len(own):]}.*" for m in modules)) + (
        "registry.make_schedule", "search.*")


def always() -> tuple[str, ...]:
    """What every derive-it task blocks: the schedule table and generators, closed forms,
    and the answer key."""
    return _from_registry() + ANSWER_KEYS


class LibraryCallBlocked(AssertionError):
    """Raised inside the student's code when it calls a blocked library path."""


def _message(path: str) -> str:
    return f"this task asks you to derive it, not to call {path}"


def _functions(package: str, pattern: str):
    """(public path, function) pairs that ``pattern`` names inside ``package``."""
    mod_name, _, attr = pattern.rpartition(".")
    module = sys.modules.get(f"{package}.{mod_name}")
    if module is None and mod_name.startswith("runtime."):
        return      # torch-backed: blocked in the grading sandbox's files, not in-process
    if module is None:
        try:
            module = importlib.import_module(f"{package}.{mod_name}")
        except ImportError:
            return
    names = ([n for n in vars(module) if n.startswith(attr[:-1])] if attr.endswith("*")
             else [attr])
    for name in names:
        fn = getattr(module, name, None)
        if isinstance(fn, types.FunctionType) and fn.__module__.startswith(package) and (
                attr == name or sweeps(mod_name, fn.__module__[len(package) + 1:])):
            yield f"pplab.{mod_name}.{name}", fn


def sweeps(module: str, defined_in: str) -> bool:
    """Whether a wildcard over ``module`` names a function it holds that ``defined_in``
    defines (both under pplab): its own and its re-exports, not those of :data:`SHARED`
    (a shared package's modules included)."""
    return defined_in == module or defined_in.split(".")[0] not in SHARED


def _stub_code(path: str):
    space: dict = {}
    exec(f"def blocked(*args, **kwargs):\n"
         f"    return __pplab_blocked__({path!r}, args, kwargs)", space)
    return space["blocked"].__code__


def _from_library(frame) -> bool:
    """Whether the frame that called a blocked function is pplab itself (allowed: e.g. the
    planner's estimate builds schedules) rather than the student's code."""
    name = frame.f_globals.get("__name__", "")
    return name.split(".")[0] in _packages()


def _original(fn, code):
    clone = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__,
                               fn.__closure__)
    clone.__kwdefaults__ = fn.__kwdefaults__
    return clone


class Blocker:
    """Swaps code objects in; remembers what the student called."""

    def __init__(self, patterns, packages):
        self.patterns, self.packages = tuple(patterns), tuple(packages)
        self.called: list[str] = []
        self.originals: dict[str, object] = {}

    def _hook(self, path, args, kwargs):
        if _from_library(sys._getframe(2)):
            return self.originals[path](*args, **kwargs)
        self.called.append(path)
        raise LibraryCallBlocked(_message(path))

    @contextmanager
    def active(self):
        swapped = []
        try:
            for package in self.packages:
                for pattern in self.patterns:
                    for path, fn in _functions(package, pattern):
                        if fn.__closure__ or any(f is fn for f, _ in swapped):
                            continue
                        swapped.append((fn, fn.__code__))
                        self.originals.setdefault(path, _original(fn, fn.__code__))
                        fn.__globals__["__pplab_blocked__"] = self._hook
                        fn.__code__ = _stub_code(path)
            yield self
        finally:
            for fn, code in reversed(swapped):
                fn.__code__ = code

    def verdict(self):
        """Raise the derivation message if the student called a blocked path."""
        if self.called:
            raise LibraryCallBlocked(_message(self.called[0]))


#: the block list of the grader now running (set by :func:`blocking`), read by ``call``
_CURRENT: list[tuple[str, ...]] = [()]


@contextmanager
def blocking(patterns):
    """Within a grader: make ``call`` block :func:`always` plus ``patterns``."""
    _CURRENT.append(always() + tuple(patterns))
    try:
        yield
    finally:
        _CURRENT.pop()


def _packages() -> tuple[str, ...]:
    own = __name__.split(".")[0]
    return tuple(dict.fromkeys(("pplab", own)))


def call(fn, *args, **kwargs):
    """Run the student's ``fn`` with the current grader's library paths blocked."""
    blocker = Blocker(_CURRENT[-1], _packages())
    with blocker.active():
        try:
            result = fn(*args, **kwargs)
        except LibraryCallBlocked:
            raise LibraryCallBlocked(_message(blocker.called[0])) from None
        except Exception:
            if blocker.called:
                blocker.verdict()
            raise
    blocker.verdict()
    return result


def sandbox_cut(check: str) -> tuple[str, ...]:
    """What the grading sandbox cuts out of its copy of pplab for task ``check``: what the
    grader blocks in a kernel, or, for a task whose honest answer uses the library, only
    its own list and the answer keys."""
    task = TASKS[check]
    return (ANSWER_KEYS if task.uses_library else always()) + task.blocks


def graded(check):
    """Mark a task's grader: while it calls the student's code, :func:`always` and what its
    row in :data:`~.tasks.TASKS` blocks are blocked (its own reference computations run
    unblocked). A grader the table does not name fails at import."""
    task = TASKS.get(check.__name__)
    if task is None or not check.__module__.endswith(f".{task.module}"):
        raise LookupError(f"{check.__module__}.{check.__name__} is no row of the task table "
                          "(pplab/exercises/tasks.py)")

    @functools.wraps(check)
    def run(*args, **kwargs):
        with blocking(task.blocks):
            return check(*args, **kwargs)
    return run
