"""The run panel's cluster mode: the same run, submitted to Slurm over several nodes.

Where Slurm is installed the panel gets a local/cluster toggle, a node count, a partition and a
cancel button; elsewhere a line that says why there is no cluster mode. In cluster mode the
panel's "Run for real" goes through :meth:`ClusterMode.run` in place of ``run_schedule``: it
submits with submitit (``pplab.runtime.submit``), reports queue state and the ranks' progress
while it waits, and returns the same ``RunResult`` a local run does, so the panel draws it the
same way. A failed or cancelled job raises ``RunError`` with its cause, which the panel shows
inline; a job the panel stops watching is cancelled, so nothing stays in the queue.

In a class (``pplab.probe.policy``) the panel keeps to the class's limits: the node slider stops at
the class's maximum, the partition defaults to the class's first, and a request past a limit
(nodes, processes per node, partition; locally, more processes than the server has cores)
is refused with one line naming the limit, before anything is submitted or started.

Importing this module (and building the widgets) does not import torch.
"""
from __future__ import annotations

from typing import Any, Callable

from ..probe.policy import PolicyError, limits
from ..probe.slurm import installed, unavailable_reason
from .base import message_html, note_html

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
        self.policy = limits()
        most = min(8, (self.policy and self.policy.nodes) or 8)
        default = self.policy.partitions[0] if self.policy and self.policy.partitions else ""
        self.mode = w.ToggleButtons(options=["local", "cluster"], value="local",
                                    description="run on", style={"button_width": "70px"})
        self.nodes = w.IntSlider(value=min(nodes, most), min=1, max=most, description="nodes",
                                 layout=w.Layout(width="220px"))
        self.partition = w.Text(value=partition or default, description="partition",
                                placeholder="default", layout=w.Layout(width="200px"))
        self.gpus = w.Checkbox(value=gpus, description="a GPU per rank", indent=False,
                               layout=w.Layout(width="130px"))
        self.cancel_button = w.Button(description="Cancel job", icon="stop", disabled=True,
                                      layout=w.Layout(width="120px"))
        self.cancel_button.on_click(lambda _: self.cancel())
        if self.reason and not installed():        # a laptop: no Slurm, none expected
            self.widget = w.HTML(note_html("runs are local here (the cluster mode needs Slurm)"))
        elif self.reason:
            self.widget = w.HTML(message_html(f"cluster mode not offered: {self.reason}", False))
        else:
            self.widget = w.HBox([self.mode, self.nodes, self.partition, self.gpus,
                                  self.cancel_button])

    @property
    def on(self) -> bool:
        return self.reason is None and self.mode.value == "cluster"

    def observe(self, callback) -> None:
        """Call ``callback`` when the mode, node count or partition changes."""
        for control in (self.mode, self.nodes, self.partition):
            control.observe(callback, names="value")

    def minutes(self, timeout: float) -> int:
        """The job's time limit: the run's timeout plus two minutes, within the class's."""
        wanted = max(1, int(timeout // 60) + 2)
        return min(wanted, self.policy.minutes) if self.policy and self.policy.minutes else wanted

    def refusal(self, P: int, timeout: float = 120.0) -> str | None:
        """Why the class does not allow this run as the panel stands, in one line; or None."""
        if self.policy is None:
            return None
        try:
            if self.on:
                self.policy.check_cluster(self.nodes.value, -(-int(P) // self.nodes.value),
                                          self.partition.value.strip() or None,
                                          self.minutes(timeout))
            else:
                self.policy.check_local(int(P))
        except PolicyError as e:
            return str(e)
        return None

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
                                    folder=self.folder, time_min=self.minutes(timeout),
                                    timeout=timeout, **run_kw)
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
