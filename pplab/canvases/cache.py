"""What the canvases keep between slider moves, in one object: :data:`KEPT`.

A slider moved back and forth, a cost slider, or a neighbour rendered ahead asks for
something built a moment ago. Three shelves hold it, each a most-recently-used list of a
fixed length, each entry keyed by exactly what made it (so a kept value is the one a fresh
call would make):

* ``schedules``: ``(what, name, P, M, V)`` → a built schedule, and anything compiled from
  one schedule for the simulator, under its own ``what`` (at P=64, M=256 the build alone is
  ~100 000 actions; ``sim.compile_schedule``'s value, "compiled", sits beside its schedule,
  so a configuration takes two places and the shelf holds 12);
* ``values``: ``(what, *arguments)`` → a number a canvas derives from several simulations
  (lesson 05's makespan-vs-V curve);
* ``pictures``: ``(render function, its arguments)`` → the ``(scene, message)`` it returned.

``ahead`` holds a few pictures rendered before they were asked for (:class:`Prefetcher` in
``base``); the first request takes one from there onto ``pictures``.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable


class Shelf:
    """The last ``size`` values by key, the least recently used dropped first; ``size=0``
    keeps nothing."""

    def __init__(self, size: int):
        self.size = size
        self.entries: dict = {}                 # insertion order: least recently used first

    def __contains__(self, key) -> bool:
        return key in self.entries

    def take(self, key, default=None):
        """The value under ``key`` (removed), or ``default``."""
        return self.entries.pop(key, default)

    def put(self, key, value) -> None:
        """Keep ``value`` as the most recent; drop the oldest past ``size``."""
        self.entries.pop(key, None)
        if self.size <= 0:
            return
        self.entries[key] = value
        while len(self.entries) > self.size:
            self.entries.pop(next(iter(self.entries)))

    def get(self, key, make: Callable[[], Any]):
        """The kept value under ``key``, else ``make()`` kept under it."""
        if key in self.entries:
            value = self.entries.pop(key)
        else:
            value = make()
        self.put(key, value)
        return value

    def clear(self) -> None:
        self.entries.clear()


def picture_key(render_fn, kw: dict) -> Hashable | None:
    """``(render_fn, sorted arguments)``, or None when an argument is unhashable (such a
    call is not kept)."""
    key = (render_fn, tuple(sorted(kw.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


class CanvasCache:
    """The schedules, derived values and pictures the canvases keep (module docstring)."""

    def __init__(self, schedules: int = 12, values: int = 512, pictures: int = 64,
                 ahead: int = 4):
        self.schedules, self.values = Shelf(schedules), Shelf(values)
        self.pictures, self.ahead = Shelf(pictures), Shelf(ahead)
        #: how each picture was served: rendered on request, kept, or rendered ahead
        self.served = {"fresh": 0, "cached": 0, "prefetched": 0}

    def for_schedule(self, what: str, name: str, P: int, M: int, V: int | None,
                     make: Callable[[], Any]):
        """``make()``, kept on the schedules shelf under ``(what, name, P, M, V)``: the
        schedule itself (``what="schedule"``), or a value compiled from it for the
        simulator under a name of its own. (Each kind of value takes a place on the shelf:
        give it one place per kind when a second kind joins.)"""
        key = (what, name, int(P), int(M), None if V is None else int(V))
        return self.schedules.get(key, make)

    def schedule(self, name: str, P: int, M: int, V: int | None = None):
        """The named schedule at P, M, V, built once while it stays among the recent few;
        ValueError (the generator's own words) when it cannot be built."""
        from ..registry import make_schedule
        P, M, V = int(P), int(M), None if V is None else int(V)
        return self.for_schedule("schedule", name, P, M, V,
                                 lambda: make_schedule(name, P, M, V))

    def value(self, key: tuple, make: Callable[[], Any]):
        """A derived value under ``key`` (its first item names what it is)."""
        return self.values.get(key, make)

    def picture(self, render_fn, kw: dict):
        """``render_fn(**kw)``, kept: from ``ahead``, from ``pictures``, or rendered now."""
        key = picture_key(render_fn, kw)
        if key is None:
            return render_fn(**kw)
        if key in self.ahead:
            result, how = self.ahead.take(key), "prefetched"
        elif key in self.pictures:
            result, how = self.pictures.take(key), "cached"
        else:
            result, how = render_fn(**kw), "fresh"
        self.served[how] += 1
        self.pictures.put(key, result)
        return result

    def prefetch(self, render_fn, kw: dict) -> None:
        """Render ``kw`` into ``ahead`` unless it is at hand; a failure is left for the real
        call to report."""
        key = picture_key(render_fn, kw)
        if key is None or key in self.pictures or key in self.ahead:
            return
        try:
            result = render_fn(**kw)
        except Exception:
            return
        self.ahead.put(key, result)

    def clear(self) -> None:
        """Forget everything (a benchmark's first visit; a test that counts builds)."""
        for shelf in (self.schedules, self.values, self.pictures, self.ahead):
            shelf.clear()


#: the one cache every canvas in this kernel shares
KEPT = CanvasCache()

__all__ = ["KEPT", "CanvasCache", "Shelf", "picture_key"]
