"""Build coc's compiled extensions: the C engine in native/ plus its Cython binding, and the
benchmark's timing kernel (C++ bound with pybind11).

All metadata lives in pyproject.toml; this file only declares what setuptools cannot
read from there: the extension and the data folders shipped inside the package.
"""
import os
import sys
import sysconfig
from glob import glob

import pybind11
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

# The engine's libraries from the distribution: each header, the library it comes with and
# the Debian/Ubuntu package that installs both (README.md's set-up line lists them).
NATIVE_LIBRARIES = [("openssl/evp.h", "crypto", "libssl-dev"),
                    ("zstd.h", "zstd", "libzstd-dev"),
                    ("lz4.h", "lz4", "liblz4-dev")]


def _check_headers():
    """Stop the build with the package to install when a library's header is missing,
    instead of a compiler error deep inside native/."""
    dirs = [d for d in os.environ.get("CPATH", "").split(os.pathsep) if d]
    dirs += ["/usr/include", "/usr/local/include", sysconfig.get_config_var("INCLUDEDIR") or "",
             f"/usr/include/{sysconfig.get_config_var('MULTIARCH') or ''}"]
    missing = [pkg for header, _, pkg in NATIVE_LIBRARIES
               if not any(os.path.exists(os.path.join(d, header)) for d in dirs if d)]
    if missing:
        sys.exit(f"coc's engine needs {', '.join(missing)}: install with "
                 f"`apt install {' '.join(missing)}` (or your system's equivalent)")


if not {"egg_info", "sdist", "dist_info", "--version", "--name"} & set(sys.argv):
    _check_headers()

engine = Extension(
    "coc._engine",
    sources=["coc/_engine.pyx", *sorted(glob("native/src/*.c"))],
    include_dirs=["native/include", "native/src"],
    extra_compile_args=["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-sign-compare"],
    libraries=["pthread", *(lib for _, lib, _ in NATIVE_LIBRARIES)],
)

# coc bench's calibrated clock and spin-until (coc/bench/_timing.cpp); pybind11 is header-only.
timing = Extension(
    "coc._timing",
    sources=["coc/bench/_timing.cpp"],
    include_dirs=[pybind11.get_include()],
    language="c++",
    extra_compile_args=["-std=c++17", "-O2", "-Wall", "-Wextra"],
)

setup(
    # topology/ and launcher/ are files users read and edit at the top of the repository;
    # they are shipped inside the package so `coc-run --topology NAME` finds them after a
    # plain (non-editable) install.
    packages=find_packages(include=["coc", "coc.*"]) + ["coc.data.topology", "coc.data.launcher"],
    package_dir={"coc.data.topology": "topology", "coc.data.launcher": "launcher"},
    package_data={
        "coc": ["*.pyx", "*.pxd", "*.pxi", "*.pyi", "py.typed"],
        "coc.mpi4py": ["startup/sitecustomize.py"],
        "coc.data.topology": ["*.yaml"],
        "coc.data.launcher": ["*", "*/*"],
    },
    ext_modules=cythonize([engine], language_level=3,
                          compiler_directives={"embedsignature": True}) + [timing],
)
