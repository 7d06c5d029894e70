"""The class on a Slurm cluster: the same kit with ``spawner = slurm`` (batchspawner's
SlurmSpawner), on the real Slurm the cluster tests bring up (tests/helpers/slurm_cluster.py:
a controller and two compute nodes, each in a network namespace of its own).

The hub and its proxy run in the controller's namespace, where the nodes reach them; so does
Chromium (a wrapper runs it there with ``ip netns exec``). A student logs in: their
JupyterLab starts as a Slurm job on a compute node. They open lesson 02 and move a slider
(the kernel runs in that job), then open the run panel, switch it to cluster mode, ask for
a partition the class does not allow (refused in one line, nothing submitted), then run
P=2 over both nodes for real: the panel shows the queue and draws the measured timeline.

Each stage's time is printed (``-s``). Skipped, with the reason, without root, Slurm,
namespaces, Chromium or the hub's parts; every job, account, namespace and file is removed.
"""
from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

import browser_util as B
import classroom_browser as W
import classroom_hub as C
from netns_lan import SWITCH_ADDR
from slurm_cluster import NODES

pytestmark = pytest.mark.slow

COURSE, STUDENT, TEACHER, GRADER = "pplabslurm", "pplt-dave", "pplt-erin", "pplt-slgrader"
PORT = 18100
HUB = f"http://{SWITCH_ADDR}:{PORT}"
LIMITS = {"nodes": "2", "procs_per_node": "2", "partitions": "class", "minutes": "5"}


def chromium_in(netns: str, folder: Path) -> str:
    """A Chromium that runs in ``netns`` (Playwright talks to it over inherited pipes)."""
    wrapper = folder / "chromium-in-netns"
    wrapper.write_text(f"#!/bin/sh\nexec ip netns exec {netns} {B.CHROMIUM} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def node_hosts(netns: str, lan) -> Path:
    """Name resolution for the controller's namespace (``ip netns exec`` mounts
    /etc/netns/NAME/hosts over /etc/hosts there): the hub reaches a job's JupyterLab by the
    node name squeue reports, as a cluster's DNS would resolve it. Returns what to remove:
    /etc/netns itself where it did not exist before."""
    top = Path("/etc/netns")
    made = top if not top.exists() else top / netns
    (top / netns).mkdir(parents=True, exist_ok=True)
    (top / netns / "hosts").write_text(Path("/etc/hosts").read_text() + "".join(
        f"{lan.addr[n]} {n}\n" for n in NODES))
    return made


def class_values(folder: Path) -> dict[str, str]:
    return {"course_id": COURSE, "students": C.GROUPS[0], "instructors": C.GROUPS[1],
            "grader": GRADER, "course_dir": f"/home/{GRADER}/{COURSE}",
            "exchange": str(folder / "exchange"), "home": str(folder / "hub"),
            "spawner": "slurm", "ip": SWITCH_ADDR, "port": str(PORT), "hub_ip": SWITCH_ADDR,
            "formgrader_port": "18199", "partition": "class", "cpus": "1", "memory": "",
            "time": "00:09:00",
            "singleuser_args": "--LabApp.expose_app_in_browser=True",
            **{f"limits.{k}": v for k, v in LIMITS.items()}}


@pytest.fixture(scope="module")
def slurm_class(slurm):
    """The run's one Slurm (tests/conftest.py), a class and its hub on the cluster's switch;
    the queue is left empty, as the other Slurm tests expect to find it."""
    reason = W.skip_reason() or C.skip_reason()
    if reason:
        pytest.skip(reason)
    cluster, hosts = slurm, None
    try:
        hosts = node_hosts(cluster.lan.switch, cluster.lan)
        with C.class_set_up([STUDENT], [TEACHER], GRADER) as (_, folder):
            hub = None
            try:
                hub = C.Hub(folder, class_values(folder), netns=cluster.lan.switch,
                            env=cluster.env)
                print(f"  pplab classroom init: {hub.init_seconds:.1f} s")
                print(f"  pplab classroom up (hub answering): {hub.start(SWITCH_ADDR):.1f} s")
                yield hub, cluster, folder
            finally:
                if hub:
                    hub.stop()
                assert cluster.wait_queue_empty(60) == [], cluster.queue()
    finally:
        if hosts:
            shutil.rmtree(hosts, ignore_errors=True)
        slurm.restore()


PANEL = ("from pplab.canvases.runs import run_panel\n"
         "panel = run_panel('1f1b', P=2, M=4, timeout=240)\npanel.widget")


async def run_panel_in_cluster_mode(page, panel) -> dict:
    """Switch the panel to cluster mode; a partition the class does not allow is refused in
    one line; with the class's partition, Run for real over both nodes."""
    cell = await W.append_and_run(page, panel, PANEL)
    box = cell.locator(".widget-vbox").first
    await box.locator("button", has_text="Run for real").wait_for(timeout=W.PATIENCE_MS)
    await box.locator(".widget-toggle-buttons button", has_text="cluster").click()
    partition = box.locator(".widget-text", has_text="partition").locator("input")
    out = {"default_partition": await partition.input_value()}
    await partition.fill("gpu")
    await partition.press("Enter")
    refusal = box.locator(".widget-html-content", has_text="asked; this class allows")
    await refusal.wait_for(timeout=W.PATIENCE_MS)
    out["refusal"] = await refusal.inner_text()
    out["button_disabled"] = await box.locator("button", has_text="Run for real").is_disabled()
    await partition.fill("class")
    await partition.press("Enter")
    await box.locator(".widget-html-content", has_text="ready:").wait_for(timeout=W.PATIENCE_MS)
    t = time.monotonic()
    await box.locator("button", has_text="Run for real").click()
    result = box.locator(".widget-html-content", has_text="gradients:")
    failed = box.locator(".widget-html-content", has_text="failed")
    await result.or_(failed).first.wait_for(timeout=W.PATIENCE_MS)
    out["run_s"] = time.monotonic() - t
    out["result"] = await box.inner_text()
    out["image"] = await box.locator("img").count()
    return out


async def journey(hub: C.Hub, chromium: str, watch: W.Stopwatch) -> dict:
    from playwright.async_api import async_playwright
    out = {}
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=B.ARGS)
        try:
            t = time.monotonic()
            page = await W.login(browser, HUB, STUDENT, C.Accounts.password(STUDENT))
            await W.wait_lab(page)
            out["url"] = page.url
            watch.stage("student logs in; JupyterLab starts as a Slurm job", t)

            t = time.monotonic()
            panel = await W.open_notebook(page, f"{HUB}/user/{STUDENT}",
                                          "pplab/02_bubble.ipynb")
            await W.run_all(page)
            before, after = await W.move_slider_and_see_redraw(page, panel)
            out["frames"] = (before.split("#")[0], after.split("#")[0])
            out["where"] = (await W.kernel_exec(page, "import os; print(os.environ.get("
                                                "'SLURMD_NODENAME'), os.environ.get("
                                                "'PPLAB_CLASSROOM'))")).split()
            watch.stage("lesson 02 run in the job, slider moved, picture redrawn", t)

            t = time.monotonic()
            out["panel"] = await run_panel_in_cluster_mode(page, panel)
            watch.stage("run panel, cluster mode: refusal, then P=2 over 2 nodes", t)
        finally:
            await browser.close()
    return out


def test_a_class_on_slurm(slurm_class):
    hub, cluster, folder = slurm_class
    watch = W.Stopwatch("Slurm journey")
    chromium = chromium_in(cluster.lan.switch, folder)
    out = B.run_in_own_loop(lambda: journey(hub, chromium, watch), 3600)
    print(watch.summary())
    print(f"    (the run itself, button to drawn result: {out['panel']['run_s']:.1f} s)")

    assert f"/user/{STUDENT}/lab" in out["url"]
    assert out["frames"][0] != out["frames"][1]
    assert out["where"][0] in NODES, out["where"]          # the kernel runs in a Slurm job
    assert out["where"][1] == str(hub.settings)
    panel = out["panel"]
    assert panel["default_partition"] == "class"
    assert panel["refusal"].startswith("partition 'gpu' asked; this class allows only class "
                                       f"(partitions in {hub.settings}, set by your "
                                       "instructor)"), panel["refusal"]
    assert panel["button_disabled"]
    assert "✓ matches" in panel["result"], panel["result"]
    assert "2 nodes: node 0 pn0" in panel["result"] and panel["image"] == 1, panel["result"]
