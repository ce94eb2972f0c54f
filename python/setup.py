"""Python code (ctypes, no extension module) plus a copy of the C library: `pip install ./python`
places the repository's build/libdswa.so next to the installed package, so that `import dswa`
finds it; the wheel is therefore tagged for the platform (py3-none-linux_x86_64). When build/ has
none yet (a fresh clone), it runs `make` in the repository root first (about 2 minutes with
nvcc; extra make arguments from $DSWA_MAKE_FLAGS, e.g. "GPU_ARCH=90" for one GPU only).
DSWA_NO_MAKE=1 skips that: the package then finds the library through $DSWA_LIB or the system
linker path (`make install`). $DSWA_BUILD names another build folder (make's BUILD, relative to
the repository root or absolute) to take libdswa.so from: scripts/build-wheel.sh bundles
build-wheel/'s this way."""
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def library():
    build = os.environ.get("DSWA_BUILD") or "build"
    lib = os.path.join(ROOT, build, "libdswa.so")
    if os.path.exists(lib) or os.environ.get("DSWA_NO_MAKE") == "1":
        return lib if os.path.exists(lib) else None
    if not os.path.exists(os.path.join(ROOT, "Makefile")):
        return None                            # not built from the repository
    if shutil.which("make") is None:
        sys.exit(f"dswa: {lib} does not exist and `make` is not installed: build the library "
                 f"(make in {ROOT}), then pip install ./python again")
    flags = shlex.split(os.environ.get("DSWA_MAKE_FLAGS", "")) + [f"BUILD={build}"]
    print(f"dswa: {lib} does not exist: running `make {' '.join(flags + ['all'])}` in {ROOT} "
          "(about 2 minutes with nvcc)", file=sys.stderr, flush=True)
    if subprocess.run(["make", "-C", ROOT] + flags + ["all"]).returncode != 0 or \
            not os.path.exists(lib):
        sys.exit(f"dswa: `make` in {ROOT} failed (see above); fix that and run it yourself, then "
                 "pip install ./python again (or DSWA_NO_MAKE=1 with DSWA_LIB set)")
    return lib


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = library()
        if lib is None:
            print("dswa: installing without libdswa.so: set DSWA_LIB to it, or `make install` "
                  "the library", file=sys.stderr)
        elif not self.dry_run:
            shutil.copy2(lib, os.path.join(self.build_lib, "dswa", "libdswa.so"))


class BinaryDistribution(Distribution):
    """The package carries libdswa.so, machine code for this platform: installed to platlib,
    and its wheel tagged for the platform (not py3-none-any, which pip would cache and reuse
    on any machine)."""
    def has_ext_modules(self):
        return True


try:                                           # setuptools >= 70.1 has its own; older: wheel's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:                        # no wheel support at all: nothing to tag
        bdist_wheel = None

cmdclass = {"build_py": BuildPy}
if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        """py3-none-<platform>: the Python code runs on any Python 3 (ctypes, no extension
        module, so no interpreter or ABI tag); only the bundled library is platform-bound."""
        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = BdistWheel

setup(distclass=BinaryDistribution, cmdclass=cmdclass)
