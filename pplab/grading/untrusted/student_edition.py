"""The pplab a sandbox sees: the installed package with the answer-computing functions of
a task cut out of the files themselves.

A blocked function keeps its name (so ``from pplab.registry import make_schedule`` still
imports) but its body only raises :class:`~pplab.exercises.guard.LibraryCallBlocked`
naming it. The code that computed the answer is not in the copy at all, so neither a
monkeypatch nor loading the module again by path brings it back.
"""
from __future__ import annotations

import ast
import fnmatch
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2]


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _stub_body(path: str) -> list[ast.stmt]:
    return ast.parse("from pplab.exercises.guard import LibraryCallBlocked as _Blocked\n"
                     f"raise _Blocked('this task asks you to derive it, not to call {path}')"
                     ).body


def cut(source: str, module: str, names: list[str]) -> tuple[str, list[str]]:
    """``source`` with the bodies of its top-level functions matching ``names`` (fnmatch
    patterns) replaced by a stub; also which functions were cut."""
    tree = ast.parse(source)
    done = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                fnmatch.fnmatchcase(node.name, n) for n in names):
            if node.name not in _called_at_import(tree):
                node.body = _stub_body(f"pplab.{module}.{node.name}")
                node.decorator_list = []
            done.append(node.name)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", done


def _called_at_import(tree: ast.Module) -> set[str]:
    """Names the module calls while it is imported (e.g. a factory making constructors):
    cutting those would break the import, and they compute no answer."""
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {call.func.id for stmt in tree.body
            if not isinstance(stmt, defs) and not _is_main_guard(stmt)
            for call in ast.walk(stmt)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)}


def _is_main_guard(stmt) -> bool:
    """``if __name__ == "__main__":`` runs only as a program, never on import."""
    return (isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare)
            and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__")


def resolve(pattern: str) -> list[tuple[str, str]]:
    """(defining module, function name) of every function ``pattern`` names, looked up in
    the real package: ``sim.entry.*`` also names ``timeline.run_events``, which it imports,
    but no wildcard names the functions of ``ir`` and ``keys`` (:func:`guard.sweeps`)."""
    import importlib
    import types

    from ...exercises.guard import sweeps
    module_name, _, attr = pattern.rpartition(".")
    try:
        module = importlib.import_module(f"pplab.{module_name}")
    except ImportError:
        return []
    out = []
    for name, fn in vars(module).items():
        if (isinstance(fn, types.FunctionType) and fnmatch.fnmatchcase(name, attr)
                and fn.__module__.startswith("pplab.") and "<locals>" not in fn.__qualname__
                and (name == attr or sweeps(module_name, fn.__module__[len("pplab."):]))):
            out.append((fn.__module__[len("pplab."):], fn.__name__))
    return out


def _by_module(patterns) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    found_all = {p: resolve(p) for p in patterns}
    cut_modules = {f"pplab.{m}" for found in found_all.values() for m, _ in found}
    keep = _run_at_import(sorted(set(_loaded_by_notebooks()) | cut_modules))
    for p in patterns:
        found = found_all[p]
        if not found:
            raise ValueError(f"blocked pattern names no function: pplab.{p}")
        for module, name in found:
            if (module, name) not in keep:
                out.setdefault(module, []).append(name)
    return out


def _run_at_import(modules) -> set[tuple[str, str]]:
    """(module, name) of every pplab function that one of ``modules`` (those a notebook's
    ``import pplab, pplab.exercises`` loads) calls while it is imported, e.g. the planner
    listing split-backward schedules with ``registry.names``: cutting one would break that
    import, and none computes an answer (a test keeps the answer functions off this list)."""
    import importlib
    import types
    out = set()
    for module in modules:
        path = _module_file(PACKAGE, module[len("pplab."):]) if module != "pplab" \
            else PACKAGE / "__init__.py"
        called = _called_at_import(ast.parse(path.read_text())) if path else set()
        real = importlib.import_module(module) if called else None
        for name in called:
            fn = getattr(real, name, None)
            if isinstance(fn, types.FunctionType) and fn.__module__.startswith("pplab."):
                out.add((fn.__module__[len("pplab."):], fn.__name__))
    return out


def _loaded_by_notebooks() -> list[str]:
    """The pplab modules ``import pplab, pplab.exercises`` loads, in a fresh interpreter."""
    code = ("import sys, pplab, pplab.exercises\n"
            "print(' '.join(m for m in sys.modules if m.split('.')[0] == 'pplab'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=dict(os.environ, PYTHONPATH=str(PACKAGE.parent)))
    return sorted(r.stdout.split())


def build(patterns, dest: Path) -> Path:
    """Write the student edition for ``patterns`` under ``dest`` (``dest/pplab``); return
    ``dest``, the folder to put on the sandbox's ``PYTHONPATH``. A pattern that cuts
    nothing is an error: a renamed function must not silently fail open."""
    target = dest / "pplab"
    dest.mkdir(parents=True, exist_ok=True)
    dest.chmod(0o755)                       # the sandbox's dropped uid must read it
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for module, names in _by_module(patterns).items():
        path = _module_file(target, module)
        if path is None:
            raise ValueError(f"blocked pattern names no module: pplab.{module}")
        text, done = cut(path.read_text(), module, sorted(set(names)))
        missing = sorted(set(names) - set(done))
        if missing:
            raise ValueError(f"pplab.{module}.{missing[0]} is not a top-level def there")
        path.write_text(text)
    _check_imports(dest, sorted(_by_module(patterns)))
    return dest


def _check_imports(dest: Path, modules: list[str]) -> None:
    """The edition must import: a cut that breaks an import would fail every student."""
    code = "import importlib, pplab\n" + "".join(
        f"importlib.import_module('pplab.{m}')\n" for m in modules)
    env = dict(os.environ, PYTHONPATH=str(dest))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, cwd=dest, timeout=300)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise ValueError(f"the student edition does not import: {last}")


def cached(patterns, cache: Path) -> Path:
    """The student edition for ``patterns``, built once per set under ``cache``."""
    digest = hashlib.sha256("\n".join(sorted(set(patterns))).encode())
    for path in sorted(PACKAGE.rglob("*.py")):         # a changed pplab is a new edition
        digest.update(path.read_bytes())
    key = digest.hexdigest()[:16]
    dest = cache / f"edition-{key}"
    if not (dest / "pplab").is_dir():
        tmp = cache / f".building-{key}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        build(patterns, tmp)
        try:
            tmp.rename(dest)
        except OSError:             # another job built the same edition first
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
