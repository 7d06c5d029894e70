"""The class's settings file, as one typed object (the file's own comments say what each
value means: ``pplab/classroom/kit/classroom.ini``).

The file is looked up like the policy it also holds (``pplab.probe.policy.settings_file``):
``$PPLAB_CLASSROOM``, else ``/etc/pplab/classroom.ini``. ``pplab classroom init`` writes it
from the kit's template, with the values that depend on where pplab is installed filled in.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, fields
from pathlib import Path

from ..probe.policy import read_settings, settings_file

KIT = Path(__file__).parent / "kit"
#: (section, key) of every field, in the file's order; the field name is the key
SECTIONS = {"class": ("course_id", "students", "instructors", "grader", "course_dir",
                      "exchange", "source", "lessons", "lessons_folder", "venv"),
            "hub": ("home", "spawner", "ip", "port", "hub_ip", "formgrader_port",
                    "idle_timeout", "singleuser_args", "server_memory", "server_cpus",
                    "server_processes"),
            "slurm": ("partition", "cpus", "memory", "time")}

#: each JupyterLab's limits (pplab/classroom/spawner.py): key, form, what the form means
LIMIT_FORMS = (("server_memory", r"[1-9]\d*(\.\d+)?[KMGT]", "a number with K, M, G or T"),
               ("server_cpus", r"0\.\d*[1-9]\d*|[1-9]\d*(\.\d+)?", "a number of CPUs above 0"),
               ("server_processes", r"[1-9]\d*", "a whole number of tasks, at least 1"))


@dataclass
class Settings:
    """Everything the kit's files read, by the key it has in the settings file."""
    path: Path
    course_id: str
    students: str
    instructors: str
    grader: str
    course_dir: str
    exchange: str
    source: str
    lessons: str
    lessons_folder: str
    venv: str
    home: str
    spawner: str
    ip: str
    port: str
    hub_ip: str
    formgrader_port: str
    idle_timeout: str
    singleuser_args: str
    server_memory: str
    server_cpus: str
    server_processes: str
    partition: str
    cpus: str
    memory: str
    time: str

    @classmethod
    def read(cls, path: Path) -> "Settings":
        parser = read_settings(path)
        values = {}
        for section, keys in SECTIONS.items():
            for key in keys:
                values[key] = parser.get(section, key, fallback="").strip()
        if values["spawner"] not in ("local", "slurm"):
            raise ValueError(f"{path}: [hub] spawner must be local or slurm, got "
                             f"{values['spawner']!r}")
        for key, form, meaning in LIMIT_FORMS:
            if not re.fullmatch(form, values[key]):
                raise ValueError(f"{path}: [hub] {key} must be {meaning}, got {values[key]!r}")
        return cls(path=Path(path), **values)

    @classmethod
    def load(cls) -> "Settings":
        """The class's settings; FileNotFoundError saying where they were looked for."""
        path = settings_file()
        if path is None:
            from ..probe.policy import SETTINGS_VAR, SYSTEM_PATH
            raise FileNotFoundError(f"no class settings: set {SETTINGS_VAR} or write "
                                    f"{SYSTEM_PATH} (pplab classroom init does)")
        return cls.read(path)

    @property
    def bin(self) -> str:
        """The shared environment's programs (jupyterhub-singleuser, nbgrader, pplab)."""
        return f"{self.venv}/bin"

    def args(self) -> list[str]:
        return shlex.split(self.singleuser_args)


def class_settings() -> Settings | None:
    """This machine's class, or None where it has none."""
    path = settings_file()
    return Settings.read(path) if path else None


def render(template: str, values: dict[str, str]) -> str:
    """The template with ``key = value`` lines set from ``values`` ("section.key" or a key
    that is unique in the file), its comments kept. KeyError for a key it does not have."""
    section, out, done = "", [], set()
    for line in template.splitlines(keepends=True):
        m = re.match(r"\[(\w+)\]", line)
        if m:
            section = m.group(1)
        m = re.match(r"(\w+)\s*=", line)
        if m:
            for name in (f"{section}.{m.group(1)}", m.group(1)):
                if name in values:
                    line = f"{m.group(1)} = {values[name]}\n"
                    done.add(name)
        out.append(line)
    missing = set(values) - done
    if missing:
        raise KeyError(f"the settings file has no {', '.join(sorted(missing))}")
    return "".join(out)


FIELDS = tuple(f.name for f in fields(Settings))
