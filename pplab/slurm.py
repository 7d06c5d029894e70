"""Whether Slurm jobs can be submitted from here. Torch-free on purpose: the run panel asks
when it is built, and offers its cluster mode only where the answer is yes."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

SLURM_COMMANDS = ("sbatch", "squeue", "scancel", "scontrol")
CONFIG_PATHS = ("/etc/slurm/slurm.conf", "/etc/slurm-llnl/slurm.conf")


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
        try:                             # configless Slurm: no file, the controller answers
            subprocess.run(["scontrol", "ping"], capture_output=True, timeout=5, check=True)
        except (OSError, subprocess.SubprocessError):
            return ("Slurm's commands are installed but no controller answers (no slurm.conf "
                    "and `scontrol ping` fails): the cluster mode needs a running Slurm")
    return None
