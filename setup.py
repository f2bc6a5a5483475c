"""The layout pyproject.toml cannot say: the package lives in tools/fixmono
and its catalogue in fixes/, installed as fixmono and fixmono.fixes; the
fixes' tests stay in the repository; and fixmono-hotfixes.pth beside the
package, which turns hot-fixes on from FIXMONO_HOTFIXES at start-up and,
with the variable unset, imports nothing (`os` is already loaded by site)."""
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent


PTH = ("import os; os.environ.get('FIXMONO_HOTFIXES', '').strip() and "
       "__import__('fixmono.runtime.autoload', fromlist=['install']).install(os.environ['FIXMONO_HOTFIXES'])\n")


class BuildWithoutTests(build_py):
    def find_package_modules(self, package, package_dir):
        return [m for m in super().find_package_modules(package, package_dir) if not m[1].startswith("test_")]

    def run(self):
        super().run()
        Path(self.build_lib, "fixmono-hotfixes.pth").write_text(PTH)


setup(
    package_dir={"fixmono": "tools/fixmono", "fixmono.fixes": "fixes"},
    packages=find_packages("tools", include=["fixmono", "fixmono.*"])
    + ["fixmono.fixes"] + [f"fixmono.fixes.{p}" for p in find_packages("fixes", exclude=["*.fixtures"])],
    package_data={"": ["README.md", "fix.patch", "fixtures/*"]},  # each fix folder's README, diff and fixtures
    cmdclass={"build_py": BuildWithoutTests},
)
