"""Pure Python: nothing is compiled. When the repository's build/libdswa.so exists (run `make`
first), a copy is placed next to the installed package, so that `import dswa` finds it."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "libdswa.so")
        if os.path.exists(lib) and not self.dry_run:
            shutil.copy2(lib, os.path.join(self.build_lib, "dswa", "libdswa.so"))


setup(cmdclass={"build_py": BuildPy})
