"""Add compiled bytecode to pure-Python wheels, for the JupyterLite site (tools/build_site.py).

PyPI's pure wheels hold only sources, so the site's kernel compiled IPython, prompt_toolkit,
jedi, … in WebAssembly on every start: about 3 of the 4 s its Python start-up took. Each wheel
gets ``__pycache__/*.pyc`` next to its sources (sources kept, for tracebacks), written as
*unchecked-hash* pycs (PEP 552): Python loads them without comparing the source's mtime,
which unpacking a wheel does not keep.

A pyc suits only the interpreter that wrote it, so build_site.py runs this file inside the
site's own Pyodide (under node): ``add_bytecode(paths)`` compiles with the running Python.
"""
from __future__ import annotations

import importlib.util
import os
import py_compile
import tempfile
import zipfile


def pyc_name(source: str) -> str:
    """'pkg/mod.py' -> 'pkg/__pycache__/mod.<tag>.pyc' (the running interpreter's tag)."""
    return importlib.util.cache_from_source(source)


def compiled(source: bytes, name: str, work: str) -> bytes | None:
    """The unchecked-hash pyc of ``source`` (None if it does not compile)."""
    py, pyc = os.path.join(work, "m.py"), os.path.join(work, "m.pyc")
    with open(py, "wb") as f:
        f.write(source)
    try:
        py_compile.compile(py, pyc, dfile=name, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    except py_compile.PyCompileError:
        return None
    with open(pyc, "rb") as f:
        return f.read()


def add_bytecode(path: str) -> int:
    """Rewrite the wheel at ``path`` with a pyc beside every .py; returns how many. Sources
    that do not compile (e.g. templates shipped as .py) are left without one."""
    tmp = path + ".tmp"
    done, pycs, record = 0, [], None
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out, \
            tempfile.TemporaryDirectory() as work:
        names = set(src.namelist())
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                record = (info, data)
                continue
            out.writestr(info, data)
            if not info.filename.endswith(".py"):
                continue
            target = pyc_name(info.filename)
            if target in names:
                continue
            pyc = compiled(data, info.filename, work)
            if pyc is not None:
                out.writestr(target, pyc)
                pycs.append(target)
                done += 1
        if record is not None:      # the wheel spec lets RECORD list .pyc files without a hash
            info, data = record
            lines = data.decode().rstrip("\n").split("\n") + [f"{p},," for p in pycs]
            out.writestr(info, "\n".join(lines) + "\n")
    os.replace(tmp, path)
    return done


def add_bytecode_all(paths) -> dict:
    return {os.path.basename(p): add_bytecode(p) for p in paths}
