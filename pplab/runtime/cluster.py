"""What a run across hosts needs that a run on one host does not.

* **The right network interface.** gloo and NCCL advertise the address the host name resolves
  to; in many containers and cluster images that is 127.0.0.1, so peers on other hosts are
  told to connect to themselves. Each node picks the interface that routes to the rendezvous
  endpoint (``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME``) unless the user set one.
* **Slurm.** Inside ``srun`` the node count, node rank and rendezvous come from the
  allocation, so ``srun pplab run ...`` is one job across the nodes, not N unrelated ones.
* **torchrun's log folders** live in the run's own folder, which is removed after a
  successful run (torchrun's default leaves two ``torchelastic_*`` folders in /tmp per run).

Pure Python (psutil for interface addresses); torch is only touched by ``gather_placement``.
"""
from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass
from typing import Mapping

IFNAME_VARS = ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME")
HOST_ADDR_VAR = "PPLAB_HOST_ADDR"     # the address this node's ranks report (launcher → worker)
NODE_NAME_VAR = "PPLAB_NODE_NAME"
SLURM_PORT_BASE = 20000               # below Linux's ephemeral range (32768–60999)


@dataclass(frozen=True)
class NetChoice:
    """The interface a node's ranks use to reach their peers, and why it was chosen."""
    ifname: str
    address: str
    source: str          # "flag" | "environment" | "route"


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"rendezvous endpoint must be HOST:PORT, got {endpoint!r}")
    return host.strip("[]"), int(port)


def route_source(host: str) -> str:
    """The local address the kernel would use to reach ``host`` (a UDP connect sends nothing)."""
    try:
        infos = socket.getaddrinfo(host, 9, type=socket.SOCK_DGRAM)
    except socket.gaierror as e:
        raise ValueError(f"cannot resolve the rendezvous host {host!r}: {e.strerror}") from None
    infos.sort(key=lambda i: i[0] != socket.AF_INET)      # IPv4 first
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_DGRAM) as s:
        try:
            s.connect(addr)
        except OSError as e:
            raise ValueError(f"no route from this node to the rendezvous host {host!r} "
                             f"({addr[0]}): {e.strerror}") from None
        return s.getsockname()[0]


def _interfaces() -> dict[str, list[str]]:
    import psutil
    return {name: [a.address.split("%")[0] for a in addrs
                   if a.family in (socket.AF_INET, socket.AF_INET6)]
            for name, addrs in psutil.net_if_addrs().items()}


def interface_of(address: str, interfaces: Mapping[str, list[str]] | None = None) -> str:
    """Name of the interface holding ``address`` (loopback addresses belong to ``lo``)."""
    interfaces = _interfaces() if interfaces is None else interfaces
    for name, addrs in interfaces.items():
        if address in addrs:
            return name
    if ipaddress.ip_address(address).is_loopback:
        for name, addrs in interfaces.items():
            if any(ipaddress.ip_address(a).is_loopback for a in addrs):
                return name
    raise ValueError(f"no network interface holds {address}; interfaces: "
                     + ", ".join(sorted(interfaces)))


def address_of(ifname: str, interfaces: Mapping[str, list[str]] | None = None) -> str:
    """First IPv4 (else IPv6) address of ``ifname``; ValueError naming the ones that exist."""
    interfaces = _interfaces() if interfaces is None else interfaces
    if ifname not in interfaces:
        raise ValueError(f"no network interface {ifname!r} on this node; it has "
                         + ", ".join(sorted(interfaces)))
    addrs = sorted(interfaces[ifname], key=lambda a: ":" in a)
    if not addrs:
        raise ValueError(f"network interface {ifname!r} has no IP address")
    return addrs[0]


def choose_interface(host: str, flag: str | None = None,
                     environ: Mapping[str, str] = os.environ,
                     interfaces: Mapping[str, list[str]] | None = None) -> NetChoice:
    """The flag wins, then an interface the user exported, then the route to ``host`` (the
    rendezvous host: node 0 routes to itself, and so finds its own interface too)."""
    if flag:
        return NetChoice(flag, address_of(flag, interfaces), "flag")
    for var in IFNAME_VARS:
        name = environ.get(var, "").lstrip("=^").split(",")[0]
        if name:
            interfaces = _interfaces() if interfaces is None else interfaces
            addr = interfaces[name][0] if interfaces.get(name) else route_source(host)
            return NetChoice(name, addr, "environment")
    src = route_source(host)
    return NetChoice(interface_of(src, interfaces), src, "route")


def launch_env(choice: NetChoice, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Variables for torchrun: the chosen interface for both backends (a user's own setting
    stays unless a flag overrode it) and the address this node's ranks report."""
    env = {HOST_ADDR_VAR: choice.address,
           NODE_NAME_VAR: environ.get("SLURMD_NODENAME") or socket.gethostname()}
    # NCCL reads its variable as a prefix ("eth" matches eth0, eth1); "=" asks for this one
    wanted = {"GLOO_SOCKET_IFNAME": choice.ifname, "NCCL_SOCKET_IFNAME": "=" + choice.ifname}
    for var, value in wanted.items():
        if choice.source == "flag" or not environ.get(var):
            env[var] = value
    return env


def node_env(nnodes: int, rdzv_endpoint: str | None, flag: str | None = None) -> dict[str, str]:
    """launch_env for this node: one host talks over loopback, several over the route to
    node 0's endpoint."""
    host = split_endpoint(rdzv_endpoint)[0] if nnodes > 1 and rdzv_endpoint else "127.0.0.1"
    return launch_env(choose_interface(host, flag))


def torchrun_log_args(run_dir: str) -> list[str]:
    """torchrun writes its logs into the run's folder: removed with it after a success, kept
    with it (and named in the error) after a failure."""
    return [f"--log-dir={os.path.join(run_dir, 'torchrun-logs')}"]


# ---- Slurm ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class SlurmStep:
    """The part of a Slurm step a pplab run needs."""
    job_id: int
    step_id: int
    nnodes: int
    node_rank: int
    ntasks: int
    nodelist: str


def slurm_step(environ: Mapping[str, str] = os.environ) -> SlurmStep | None:
    """The srun step this process belongs to, or None outside ``srun`` (a batch script or a
    notebook in a Slurm job is not a step of several nodes)."""
    step = environ.get("SLURM_STEP_ID", environ.get("SLURM_STEPID"))
    job = environ.get("SLURM_JOB_ID", environ.get("SLURM_JOBID"))
    if step is None or job is None:
        return None
    step_id = int(step) if step.isdigit() else 0     # "batch"/"extern" steps are not srun's
    def get(*names: str, default: str = "") -> str:
        return next((environ[n] for n in names if n in environ), default)
    nnodes = int(get("SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES", default="1"))
    return SlurmStep(job_id=int(job), step_id=step_id, nnodes=nnodes,
                     node_rank=int(get("SLURM_NODEID", default="0")),
                     ntasks=int(get("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", default=str(nnodes))),
                     nodelist=get("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"))


def first_host(nodelist: str) -> str:
    """First name of a Slurm hostlist: ``gpu[003-010,12],login`` → ``gpu003``."""
    m = re.match(r"\s*([^,\[]+)(?:\[([^\]]+)\])?", nodelist)
    if not m or not m.group(1):
        raise ValueError(f"cannot read Slurm's node list {nodelist!r}")
    prefix, ranges = m.group(1), m.group(2)
    return prefix if not ranges else prefix + ranges.split(",")[0].split("-")[0]


def parse_node_addr(scontrol_text: str) -> str | None:
    """NodeAddr from ``scontrol show node`` output (None when absent)."""
    m = re.search(r"\bNodeAddr=(\S+)", scontrol_text)
    return m.group(1) if m else None


def node_address(name: str, timeout: float = 15.0) -> str:
    """The address Slurm itself uses for node ``name``: works where node names don't resolve."""
    try:
        out = subprocess.run(["scontrol", "show", "node", name], capture_output=True, text=True,
                             timeout=timeout, check=True).stdout
    except (OSError, subprocess.SubprocessError) as e:
        raise ValueError(f"cannot ask Slurm for the address of node {name!r} "
                         f"(scontrol show node {name}): {e}") from None
    return parse_node_addr(out) or name


def slurm_port(job_id: int, step_id: int) -> int:
    """Rendezvous port from the job id: jobs sharing a first node differ unless their ids are
    1000 apart and both run at once; consecutive steps of one job differ too."""
    return SLURM_PORT_BASE + (job_id % 1000) * 10 + step_id % 10


def slurm_nodes(environ: Mapping[str, str] = os.environ,
                address=node_address) -> tuple[int, int, str] | None:
    """(nnodes, node_rank, rdzv_endpoint) inside a multi-node srun step, else None.

    ValueError when the step runs several tasks per node: pplab starts P/N ranks per node
    itself, so each extra task would be a second, unrelated job."""
    step = slurm_step(environ)
    if step is None:
        return None
    if step.ntasks != step.nnodes:
        raise ValueError(f"this Slurm step runs {step.ntasks} tasks on {step.nnodes} node(s); "
                         "pplab run starts P/N ranks on each node itself: use one task per "
                         "node (srun --ntasks-per-node=1)")
    if step.nnodes == 1:
        return None
    host = address(first_host(step.nodelist))
    return step.nnodes, step.node_rank, f"{host}:{slurm_port(step.job_id, step.step_id)}"


# ---- placement: which node and address each rank ran on --------------------------------------
def placement_entry(rank: int, environ: Mapping[str, str] = os.environ) -> dict:
    return {"rank": rank, "node_rank": int(environ.get("GROUP_RANK", 0)),
            "host": environ.get(HOST_ADDR_VAR) or socket.gethostname(),
            "node": environ.get(NODE_NAME_VAR) or socket.gethostname()}


def gather_placement(dist, rank: int, world: int) -> list[dict]:
    """Every rank's entry, on every rank (one all_gather_object after init)."""
    out = [None] * world
    dist.all_gather_object(out, placement_entry(rank))
    return out


def nodes_of(placement: list[dict]) -> dict[int, dict]:
    """node_rank → {"host", "node", "ranks"}."""
    nodes: dict[int, dict] = {}
    for p in sorted(placement, key=lambda p: p["rank"]):
        n = nodes.setdefault(p["node_rank"], {"host": p["host"], "node": p.get("node", ""),
                                               "ranks": []})
        n["ranks"].append(p["rank"])
    return nodes


def nodes_line(placement: list[dict]) -> str:
    """``2 nodes: node 0 pn0 10.77.0.1 ranks 0–1, node 1 pn1 10.77.0.2 ranks 2–3``."""
    nodes = nodes_of(placement)
    return f"{len(nodes)} nodes: " + ", ".join(
        f"node {k} {n['node']} {n['host']} ranks {_span(n['ranks'])}"
        for k, n in sorted(nodes.items()))


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _span(ranks: list[int]) -> str:
    return str(ranks[0]) if len(ranks) == 1 else f"{ranks[0]}–{ranks[-1]}"


def lost_node_note(run_dir: str, node_rank: int) -> str:
    """"; node 1 (n1, 10.0.0.2; ranks 2–3) went away ..." when this node's ranks lost their
    connections to another node's address: gloo names the peer's address, and the placement
    gathered at start maps it to a node. Empty when no other node can be named (e.g. all nodes
    on one host)."""
    nodes = nodes_of(_read_json(os.path.join(run_dir, "info.json")).get("placement") or [])
    own = nodes.get(node_rank, {}).get("host")
    lost: dict[int, set[int]] = {}
    for name in sorted(os.listdir(run_dir)):
        d = _read_json(os.path.join(run_dir, name)) if re.match(r"rank\d+\.json$", name) else {}
        if d.get("kind") != "peer-lost":
            continue
        for host in re.findall(r"\[([0-9A-Fa-f.:]+)\]:\d+", d.get("message", "")):
            for k, n in nodes.items():
                if host != own and k != node_rank and n["host"] == host:
                    lost.setdefault(k, set()).add(d["rank"])
    return "".join(
        f"; node {k} ({nodes[k]['node']}, {nodes[k]['host']}; ranks {_span(nodes[k]['ranks'])}) "
        f"went away mid-run: rank(s) {', '.join(map(str, sorted(by)))} on this node lost the "
        "connection to it" for k, by in sorted(lost.items()))


def resolve_nodes(nnodes: int | None, node_rank: int | None, rdzv_endpoint: str | None,
                  environ: Mapping[str, str] = os.environ,
                  address=node_address) -> tuple[int, int, str | None]:
    """Node flags as given; when none is given inside a multi-node srun step, Slurm's."""
    if nnodes is None and node_rank is None and rdzv_endpoint is None:
        found = slurm_nodes(environ, address)
        if found:
            return found
    return (1 if nnodes is None else nnodes), (node_rank or 0), rdzv_endpoint
