"""The run panel's cluster mode: the same run, submitted to Slurm over several nodes.

Where Slurm is installed the panel gets a local/cluster toggle, a node count, a partition and a
cancel button; elsewhere a line that says why there is no cluster mode. In cluster mode the
panel's "Run for real" goes through :meth:`ClusterMode.run` in place of ``run_schedule``: it
submits with submitit (``pplab.runtime.submit``), reports queue state and the ranks' progress
while it waits, and returns the same ``RunResult`` a local run does, so the panel draws it the
same way. A failed or cancelled job raises ``RunError`` with its cause, which the panel shows
inline; a job the panel stops watching is cancelled, so nothing stays in the queue.

Importing this module (and building the widgets) does not import torch.
"""
from __future__ import annotations

from typing import Any, Callable

from ..slurm import unavailable_reason
from .base import message_html

#: how long a job may wait in the queue before the panel cancels it (seconds)
QUEUE_TIMEOUT = 600.0


class ClusterMode:
    """Widgets and state of the cluster mode; ``on`` is True when the toggle says cluster."""

    def __init__(self, nodes: int = 2, partition: str = "", gpus: bool = False,
                 folder: str | None = None, queue_timeout: float = QUEUE_TIMEOUT):
        import ipywidgets as w
        self.reason = unavailable_reason()
        self.folder, self.queue_timeout = folder, queue_timeout
        self.job: Any = None
        self.mode = w.ToggleButtons(options=["local", "cluster"], value="local",
                                    description="run on", style={"button_width": "70px"})
        self.nodes = w.IntSlider(value=nodes, min=1, max=8, description="nodes",
                                 layout=w.Layout(width="220px"))
        self.partition = w.Text(value=partition, description="partition",
                                placeholder="default", layout=w.Layout(width="200px"))
        self.gpus = w.Checkbox(value=gpus, description="a GPU per rank", indent=False,
                               layout=w.Layout(width="130px"))
        self.cancel_button = w.Button(description="Cancel job", icon="stop", disabled=True,
                                      layout=w.Layout(width="120px"))
        self.cancel_button.on_click(lambda _: self.cancel())
        if self.reason:
            self.widget = w.HTML(message_html(f"cluster mode not offered: {self.reason}", False))
        else:
            self.widget = w.HBox([self.mode, self.nodes, self.partition, self.gpus,
                                  self.cancel_button])

    @property
    def on(self) -> bool:
        return self.reason is None and self.mode.value == "cluster"

    def cancel(self) -> None:
        if self.job is not None:
            self.job.cancel()

    def run(self, schedule, *, timeout: float, progress: Callable[[str], None] | None = None,
            **run_kw):
        """Submit, watch, return the RunResult; RunError with the cause when there is none."""
        from ..runtime.submit import submit_run
        nodes = self.nodes.value
        self.job = job = submit_run(schedule, nodes=nodes,
                                    partition=self.partition.value.strip() or None,
                                    gpus_per_node=schedule.P // nodes if self.gpus.value else 0,
                                    folder=self.folder,
                                    time_min=max(1, int(timeout // 60) + 2), timeout=timeout,
                                    **run_kw)
        self.cancel_button.disabled = False
        seen = [""]

        def report(j) -> None:
            lines = j.progress()
            line = j.status() + (f" — {lines[-1]}" if lines else "")
            if progress and line != seen[0]:
                seen[0] = line
                progress(line)
        try:
            result = job.wait(timeout + self.queue_timeout, poll=1.0, on_poll=report)
            job.remove_folder()              # kept after a failure: it holds the logs
            return result
        finally:
            if not job.done():               # the panel stops watching: leave nothing queued
                job.cancel()
            self.cancel_button.disabled = True
