"""Build the course as a static JupyterLite site in site/ (``make site``), offline from the
package registries only: Pyodide's core from npm, pure-Python wheels from PyPI, pplab as a
wheel built from this checkout. The lessons are notebooks/ itself.

pplab and the widget packages are added to Pyodide's own package lock and preloaded when the
kernel starts, so a lesson's plain ``import pplab`` works with no install cell. So are the
kernel's own wheels (no micropip at start-up), and every wheel carries its bytecode. Work files go
to build/site/ (kept between builds: a rebuild takes seconds); both folders are git-ignored.
usage: python tools/build_site.py [OUT_DIR]
"""
from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "build" / "site"
LITE = ["jupyterlite-core==0.8.6", "jupyterlite-pyodide-kernel==0.8.6", "jupyter-server",
        "jupyterlab_widgets==3.0.17", "anywidget==0.11.0"]
#: loaded from Pyodide's lock at kernel start (the kernel itself needs the first ones)
LOCK_PRELOAD = ["micropip", "packaging", "ipython", "jedi", "typing-extensions", "traitlets"]
#: pure-Python wheels the lessons import, added to the lock and preloaded too
EXTRA = ["comm", "ipywidgets==8.1.9", "anywidget==0.11.0", "psygnal", "jupyterlab_widgets==3.0.17",
         "widgetsnbextension==4.0.16"]
#: in the lock but not preloaded: they hold the widgets' browser side only (no Python imports
#: them; ipywidgets merely requires them), 2.4 MB to unpack at each start for nothing
NOT_PRELOADED = {"jupyterlab-widgets", "widgetsnbextension"}
#: the kernel's own wheels, shipped by jupyterlite-pyodide-kernel: in the lock and preloaded, so
#: the kernel's start-up installs none of them with micropip (about a second each otherwise)
KERNEL_WHEELS = ["piplite", "ipykernel", "pyodide_kernel"]


def run(*cmd, **kw):
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def build_env() -> Path:
    venv = WORK / "venv"
    if not (venv / "ok").exists():
        run(sys.executable, "-m", "venv", venv)
        run(venv / "bin/pip", "install", "-q", *LITE)
        (venv / "ok").touch()
    return venv


def fetch_pyodide(venv: Path) -> Path:
    """Pyodide's core (the version the kernel expects) from npm."""
    schema = next((venv / "share/jupyter/labextensions/@jupyterlite/pyodide-kernel-extension")
                  .rglob("kernel.v0.schema.json")).read_text()
    version = schema.split("pyodide/v", 1)[1].split("/", 1)[0]
    dest = WORK / f"pyodide-{version}"
    if not (dest / "pyodide.mjs").exists():
        tmp = WORK / "npm"
        tmp.mkdir(parents=True, exist_ok=True)
        run("npm", "pack", "-q", f"pyodide@{version}", cwd=tmp, stdout=subprocess.DEVNULL)
        run("tar", "xzf", tmp / f"pyodide-{version}.tgz", "-C", tmp)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(tmp / "package", dest)
    return dest


def pip_download(venv: Path, dest: Path, pins, python: str) -> None:
    run(venv / "bin/pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
        python, "--implementation", "py", "--platform", "any", "--abi", "none", "-d", dest, *pins)


def lock_closure(packages: dict, names) -> list[str]:
    need, stack = [], list(names)
    while stack:
        k = stack.pop().lower().replace("_", "-")
        if k not in need:
            need.append(k)
            stack += packages[k]["depends"]
    return need


def wheel_entry(path: Path) -> dict:
    """A Pyodide lock entry for a pure-Python wheel: name, version, file, hash, imports."""
    with zipfile.ZipFile(path) as z:
        tops = {n.split("/")[0] for n in z.namelist()}
    imports = sorted(t.removesuffix(".py") for t in tops
                     if not t.endswith((".dist-info", ".data")) and t.isidentifier()
                     or t.endswith(".py"))
    name, version = path.name.split("-")[:2]
    return {"name": name.lower().replace("_", "-"), "version": version, "file_name": path.name,
            "install_dir": "site", "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "package_type": "package", "imports": imports, "depends": [],
            "unvendored_tests": False, "shared_library": False}


def prepare_pyodide(venv: Path, core: Path, out: Path) -> list[str]:
    """Copy the core, add the pure wheels, the kernel's own wheels and pplab, compile them
    (bytecode), and write the lock with their hashes. Returns the packages to preload."""
    shutil.copytree(core, out)
    lock = json.loads((out / "pyodide-lock.json").read_text())
    pk, py = lock["packages"], lock["info"]["python"].rsplit(".", 1)[0]
    need = lock_closure(pk, LOCK_PRELOAD)
    pip_download(venv, out, [f"{pk[k]['name']}=={pk[k]['version']}" for k in need], py)
    extra = WORK / "extra"
    shutil.rmtree(extra, ignore_errors=True)
    pip_download(venv, extra, EXTRA, py)
    run(venv / "bin/pip", "wheel", "-q", "--no-deps", "-w", extra, ROOT)
    for whl in sorted(extra.glob("*.whl")):
        entry = wheel_entry(whl)
        if entry["name"] in pk and entry["name"] not in ("anywidget", "pplab"):
            continue                      # Pyodide's lock already has it (and it is preloaded)
        shutil.copy(whl, out / whl.name)
        pk[entry["name"]] = entry
        need.append(entry["name"])
    pypi = next((venv / "share/jupyter/labextensions").rglob("pyodide-kernel-extension/static/pypi"))
    for name in KERNEL_WHEELS:
        whl = next(pypi.glob(f"{name}-*.whl"))
        shutil.copy(whl, out / whl.name)
        entry = wheel_entry(whl)
        pk[entry["name"]] = entry
        need.append(entry["name"])
    add_bytecode(out)
    for entry in pk.values():       # PyPI's files (and now their bytecode): the lock's hashes
        if (out / entry["file_name"]).exists():
            entry["sha256"] = hashlib.sha256((out / entry["file_name"]).read_bytes()).hexdigest()
    (out / "pyodide-lock.json").write_text(json.dumps(lock))
    return [name for name in need if name not in NOT_PRELOADED]


#: run under node: the site's Pyodide compiles the wheels (tools/site_bytecode.py)
BYTECODE_JS = """
const [pyodideDir, toolsDir, wheels] = process.argv.slice(1);
const { loadPyodide } = await import(pyodideDir + "/pyodide.mjs");
const py = await loadPyodide({ indexURL: pyodideDir + "/" });
for (const [dir, at] of [[pyodideDir, "/site"], [toolsDir, "/tools"]]) {
  py.FS.mkdirTree(at);
  py.FS.mount(py.FS.filesystems.NODEFS, { root: dir }, at);
}
py.globals.set("wheels", JSON.parse(wheels));
console.log(py.runPython(`import sys; sys.path.insert(0, "/tools")
import site_bytecode
str(sum(site_bytecode.add_bytecode_all("/site/" + w for w in wheels).values()))`));
"""


def add_bytecode(out: Path) -> None:
    """Every wheel in ``out`` gets its bytecode, compiled by the site's own Python (Pyodide
    under node), so the kernel does not compile IPython & co. at each start."""
    wheels = sorted(p.name for p in out.glob("*.whl"))
    res = subprocess.run(["node", "--input-type=module", "-e", BYTECODE_JS, str(out),
                          str(ROOT / "tools"), json.dumps(wheels)],
                         check=True, capture_output=True, text=True)
    print(f"bytecode: {res.stdout.strip()} modules in {len(wheels)} wheels")


def lite_config(lite: Path, preload: list[str]) -> None:
    kernel = {"pyodideUrl": "./pyodide/pyodide.mjs", "disablePyPIFallback": True,
              "loadPyodideOptions": {"packages": preload}}
    cfg = {"jupyter-lite-schema-version": 0, "jupyter-config-data": {
        "appName": "pplab", "exposeAppInBrowser": True, "defaultKernelName": "python",
        "litePluginSettings": {"@jupyterlite/pyodide-kernel-extension:kernel": kernel}}}
    lite.mkdir(parents=True, exist_ok=True)
    (lite / "jupyter-lite.json").write_text(json.dumps(cfg, indent=1))
    # draw every cell's output at once (lessons are short; tests and students see them all)
    overrides = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}
    (lite / "overrides.json").write_text(json.dumps(overrides, indent=1))
    (lite / ".jupyterlite.doit.db").unlink(missing_ok=True)     # else new settings are dropped


#: written last, so its time says when the site was built (the copied files keep old mtimes)
BUILT_STAMP = ".pplab-built"


def main(out: Path) -> None:
    t0 = time.time()
    WORK.mkdir(parents=True, exist_ok=True)
    venv = build_env()
    core = fetch_pyodide(venv)
    stage = WORK / "pyodide"
    shutil.rmtree(stage, ignore_errors=True)
    preload = prepare_pyodide(venv, core, stage)
    lite = WORK / "lite"
    lite_config(lite, preload)
    lessons = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    args = [a for nb in lessons for a in ("--contents", nb)]
    built = WORK / "output"
    shutil.rmtree(built, ignore_errors=True)
    run(venv / "bin/jupyter", "lite", "build", "--lite-dir", lite, "--output-dir", built, *args,
        cwd=lite, stdout=subprocess.DEVNULL)
    shutil.copytree(stage, built / "pyodide")
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(built, out)
    (out / BUILT_STAMP).write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file()) / 1e6
    print(f"site: {out} ({len(lessons)} lessons, {size:.0f} MB, built in {time.time() - t0:.0f} s)"
          f"; serve it with: python3 -m http.server -d {out} --bind 127.0.0.1")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else ROOT / "site")
