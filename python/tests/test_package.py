"""The wheel `pip wheel ./python` makes: it carries libdswa.so (machine code), so it must be
tagged for this platform and install to platlib, never py3-none-any (pip would cache that one
and reuse it on any machine). Built offline from a copy of python/ with this build's library;
skipped (visibly) without pip or a setuptools that can make wheels."""
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from _util import skip

PYDIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _wheel_support():
    """None when this Python can build a wheel offline, else what it lacks. Looked up, not
    imported (importing setuptools here can clash with a distutils already loaded)."""
    from importlib.metadata import PackageNotFoundError, version
    from importlib.util import find_spec

    def at_least(name, want):
        try:
            return tuple(int(x) for x in version(name).split(".")[:2]) >= want
        except (PackageNotFoundError, ValueError):
            return False
    if find_spec("pip") is None:
        return "pip"
    if not (at_least("setuptools", (70, 1)) or
            (at_least("setuptools", (61, 0)) and find_spec("wheel") is not None)):
        return "setuptools >= 70.1, or >= 61 with the wheel package"
    return None


def test_wheel_is_platform_tagged():
    if not os.path.exists(os.path.join(PYDIR, "setup.py")):
        skip(f"skipped: no setup.py in {PYDIR} (the tests run outside the repository, against "
             "an installed package)")
    missing = _wheel_support()
    if missing:
        skip(f"skipped: this Python cannot build a wheel offline: it needs {missing}")
    lib = os.environ.get("DSWA_LIB")
    if not lib or not os.path.exists(lib):
        skip(f"skipped: DSWA_LIB = {lib!r} is not a library to package")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "python")
        shutil.copytree(PYDIR, src, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__", "tests"))
        os.makedirs(os.path.join(tmp, "build"))
        shutil.copy2(lib, os.path.join(tmp, "build", "libdswa.so"))     # setup.py's ROOT/build
        out = os.path.join(tmp, "out")
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                            "--no-build-isolation", "-q", "-w", out, src],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, DSWA_NO_MAKE="1"))
        assert r.returncode == 0, r.stdout[-4000:]
        wheels = os.listdir(out)
        assert len(wheels) == 1, wheels
        name = wheels[0]
        tag = name[:-len(".whl")].split("-")[-3:]
        assert tag[:2] == ["py3", "none"] and tag[2] not in ("any", ""), name
        with zipfile.ZipFile(os.path.join(out, name)) as z:
            files = z.namelist()
            meta = z.read(next(f for f in files if f.endswith(".dist-info/WHEEL"))).decode()
            packaged = z.read("dswa/libdswa.so")
        assert "Root-Is-Purelib: false" in meta, meta
        assert f"Tag: {'-'.join(tag)}" in meta, meta
        assert not [f for f in files if ".data/" in f], files            # all in platlib
        with open(lib, "rb") as f:
            assert packaged == f.read()
