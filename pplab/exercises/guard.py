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

#: the graders' own reference helpers: the answer key
ANSWER_KEYS = (
    "exercises.pipeline.reference_plan", "exercises.pipeline.steady_state_pairs",
    "exercises.memory.expected_1f1b_peak", "exercises.memory.step_bound",
    "exercises.schedules.count_p2p", "exercises.schedules._reference_layers",
    "exercises.derive.reference_*", "exercises.puzzles.builtin_scores",
    "runtime.exercises.reference_*",
)


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


#: every executor that times a schedule: a task that cuts the simulator cuts them all
SIMULATORS = ("sim.entry.*", "sim.reference.*", "sim.fast.*", "sim.plan.*", "sim.costs.*",
              "sim.dependencies.*", "sim.contention.*", "sim.streams.*", "sim.stream_run.*",
              "sim.stream_replay.*")

#: the message plans a counting task asks for (the lowering's public functions)
MESSAGE_PLANS = ("lower.lower", "lower.messages", "lower.p2p_messages", "lower.in_order_plan",
                 "lower.up_front_plan", "lower.check_in_order")


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
        if isinstance(fn, types.FunctionType) and fn.__module__.startswith(package):
            yield f"pplab.{mod_name}.{name}", fn


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


def derive_without(*patterns, whole_library: bool = True):
    """Decorate a grader: while it calls the student's code, :func:`always` and ``patterns``
    are blocked (the grader's own reference computations run unblocked).

    ``run.blocked()`` lists what the grading sandbox cuts out of its copy of pplab for this
    task: everything above, or with ``whole_library=False`` (a task whose honest answer
    uses the library, e.g. the planner's ``estimate`` building schedules) only
    ``patterns`` and the answer key."""
    def wrap(check):
        @functools.wraps(check)
        def run(*args, **kwargs):
            with blocking(patterns):
                return check(*args, **kwargs)
        run.blocked = lambda: (always() if whole_library else ANSWER_KEYS) + tuple(patterns)
        return run
    return wrap
