"""Bytes of tensors autograd saves for backward, counted with saved-tensor hooks.

The hooks run Python for every saved tensor (~10 % of a tiny model's step), so the worker
tracks only its warm-up step: ``tracker.counting(on)`` is a no-op context when ``on`` is False.
"""
from __future__ import annotations

import contextlib

import torch

from .model import _Tracked


class SavedTensorTracker:
    """Each storage counted once while alive. Parameters are excluded (``exclude``: weights,
    not activations). Checkpointed regions keep their inputs themselves; the model reports
    those through ``track`` so they count too."""

    def __init__(self):
        self.enabled = True
        self.exclude: set[int] = set()
        self.live: dict[int, list] = {}
        self.current = 0
        self.peak = 0

    def reset_peak(self) -> None:
        self.peak = self.current

    def _add(self, ptr: int, nbytes: int) -> None:
        ent = self.live.get(ptr)
        if ent is None:
            self.live[ptr] = [1, nbytes]
            self.current += nbytes
            self.peak = max(self.peak, self.current)
        else:
            ent[0] += 1

    def _remove(self, ptr: int) -> None:
        ent = self.live.get(ptr)
        if ent is None:
            return
        ent[0] -= 1
        if ent[0] == 0:
            del self.live[ptr]
            self.current -= ent[1]

    def holder(self, t: torch.Tensor):
        if not self.enabled:
            return _Holder(None, 0, t)
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr == 0 or ptr in self.exclude:
            return _Holder(None, 0, t)
        self._add(ptr, st.nbytes())
        return _Holder(self, ptr, t)

    def hooks(self):
        if not self.enabled:
            return contextlib.nullcontext()
        return torch.autograd.graph.saved_tensors_hooks(self.holder, lambda h: h.tensor)

    def track(self, tensors, output) -> None:
        if not self.enabled:
            return
        holders = [self.holder(t) for t in tensors]
        if output.grad_fn is not None:
            output.grad_fn.metadata.setdefault("pplab_saved", []).extend(holders)

    @contextlib.contextmanager
    def counting(self, on: bool):
        """Count (``on``) or ignore everything saved inside; the peak starts afresh."""
        self.enabled = on
        self.reset_peak()
        _Tracked.track = self.track if on else None
        try:
            yield self
        finally:
            _Tracked.track = None


class _Holder:
    __slots__ = ("tracker", "ptr", "tensor")

    def __init__(self, tracker, ptr, tensor):
        self.tracker, self.ptr, self.tensor = tracker, ptr, tensor

    def __del__(self):
        if self.tracker is not None:
            self.tracker._remove(self.ptr)
