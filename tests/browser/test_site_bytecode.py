"""tools/site_bytecode.py: the site's wheels get unchecked-hash pycs, which Python loads
without looking at the source (a wheel unpacked in Pyodide keeps no mtimes). Here CPython
compiles for itself; in the build the site's own Pyodide does."""
from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import site_bytecode  # noqa: E402

FILES = {"tinypkg/__init__.py": "", "tinypkg/mod.py": "VALUE = 1\n",
         "tinypkg/template.py": "def broken(:\n", "tinypkg/data.txt": "x",
         "tinypkg-1.0.dist-info/RECORD": "tinypkg/__init__.py,sha256=abc,0\n"}


def make_wheel(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in FILES.items():
            z.writestr(name, text)


def test_pycs_added_beside_sources_and_listed(tmp_path):
    whl = tmp_path / "tinypkg-1.0-py3-none-any.whl"
    make_wheel(whl)
    assert site_bytecode.add_bytecode(str(whl)) == 2          # template.py does not compile
    names = zipfile.ZipFile(whl).namelist()
    tag = sys.implementation.cache_tag
    assert f"tinypkg/__pycache__/mod.{tag}.pyc" in names
    assert f"tinypkg/__pycache__/__init__.{tag}.pyc" in names
    assert not any("template" in n and n.endswith(".pyc") for n in names)
    assert set(FILES) <= set(names)                            # sources and data kept
    record = zipfile.ZipFile(whl).read("tinypkg-1.0.dist-info/RECORD").decode().splitlines()
    assert f"tinypkg/__pycache__/mod.{tag}.pyc,," in record
    assert record[0] == "tinypkg/__init__.py,sha256=abc,0"


def test_python_loads_the_pyc_without_checking_the_source(tmp_path):
    whl = tmp_path / "tinypkg-1.0-py3-none-any.whl"
    make_wheel(whl)
    site_bytecode.add_bytecode(str(whl))
    site = tmp_path / "site"
    zipfile.ZipFile(whl).extractall(site)
    # a changed source with an unchecked pyc: Python keeps running the compiled one
    (site / "tinypkg" / "mod.py").write_text("VALUE = 2\n")
    out = subprocess.run([sys.executable, "-B", "-c", "import tinypkg.mod as m; print(m.VALUE)"],
                         cwd=site, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "1"
