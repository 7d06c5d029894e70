"""Whether Slurm jobs can be submitted from here. Torch-free on purpose: the run panel asks
when it is built, and offers its cluster mode only where the answer is yes."""
from __future__ import annotations

import importlib.util
import os
import shutil

SLURM_COMMANDS = ("sbatch", "squeue", "scancel", "scontrol")
#: where Debian's packages and configless slurmd (its cached copy) keep slurm.conf
CONFIG_PATHS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf", "/run/slurm/conf/slurm.conf")


def installed() -> bool:
    """Whether any of Slurm's commands is on PATH. Where none is (a laptop), nobody expects a
    cluster mode, and the run panel says so in one quiet line, not as an error."""
    return any(shutil.which(c) is not None for c in SLURM_COMMANDS)


def unavailable_reason() -> str | None:
    """Why jobs cannot be submitted from here, or None when they can."""
    missing = [c for c in SLURM_COMMANDS if shutil.which(c) is None]
    if missing:
        return (f"no Slurm on this machine ({', '.join(missing)} not on PATH): the cluster "
                "mode submits through Slurm, so it is offered only where Slurm is installed")
    if importlib.util.find_spec("submitit") is None:
        return "submitit is not installed (pip install submitit): the cluster mode submits with it"
    confs = (os.environ.get("SLURM_CONF", ""), *CONFIG_PATHS)
    if not any(p and os.path.exists(p) for p in confs):
        return ("Slurm's commands are installed but there is no Slurm configuration (SLURM_CONF, "
                + ", ".join(CONFIG_PATHS) + "): the cluster mode needs a configured Slurm")
    return None
