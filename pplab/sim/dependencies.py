"""The one dependency rule: what must have finished before an action can start.

The reference executor, the shared-core and stream models and the deadlock message read it
from here; the fast executor applies the same rule per duration class (from
``Schedule.input_key``) and the property test holds it to the reference.
"""
from __future__ import annotations

from ..ir import Action, Schedule


#: the earlier part of its own stage that each kind waits for (a backward needs its forward)
OWN_PART = {"F": None, "B": "F", "I": "F", "W": "I"}


def dependency_keys(schedule: Schedule, stage: int, kind: str, microbatch: int) -> list[tuple]:
    """What must have finished before an action can start, as ``(stage, kind, microbatch)``:
    its own stage's earlier part (a backward needs its forward) and its input from a
    neighbouring stage (``Schedule.input_key``)."""
    own = OWN_PART[kind]
    deps = [(stage, own, microbatch)] if own else []
    src = schedule.input_key(stage, kind, microbatch)
    return deps + ([src] if src is not None else [])


def dependencies(schedule: Schedule, action: Action) -> list[Action]:
    """``dependency_keys`` as actions."""
    return [Action(*k) for k in dependency_keys(schedule, action.stage, action.kind,
                                                 action.microbatch)]


def compile_graph(schedule: Schedule):
    """The dependency graph with integers for actions (the reference, shared-core and stream
    models walk it; integer look-ups instead of hashing actions make them several times
    faster).

    Returns ``(steps, owned, missing)``: ``steps[rank][step] = (part ids, dependency ids)``
    (a dependency inside the same overlapped pair is left out); ids below ``owned`` are
    actions some rank runs, ids from ``owned`` on are dependencies nobody runs (``missing``
    lists those actions, for the error message).
    """
    keys = [[[(a.stage, a.kind, a.microbatch) for a in op.parts] for op in ops]
            for ops in schedule.ranks]
    ids: dict[tuple, int] = {}
    for row in keys:
        for mine in row:
            for k in mine:
                ids.setdefault(k, len(ids))
    owned, missing, steps = len(ids), [], []
    for row in keys:
        out = []
        for mine in row:
            deps = []
            for k in mine:
                for dep in dependency_keys(schedule, *k):
                    i = ids.get(dep)
                    if i is None:
                        i = ids[dep] = len(ids)
                        missing.append(Action(*dep))
                    if dep not in mine:           # not the other half of an overlapped pair
                        deps.append(i)
            out.append((tuple(ids[k] for k in mine), tuple(deps)))
        steps.append(out)
    return steps, owned, missing

