"""Build coc's compiled extensions: the C engine in native/ plus its Cython binding, and the
benchmark's timing kernel (C++ bound with pybind11).

All metadata lives in pyproject.toml; this file only declares what setuptools cannot
read from there: the extension and the data folders shipped inside the package.
"""
from glob import glob

import pybind11
from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

engine = Extension(
    "coc._engine",
    sources=["coc/_engine.pyx", *sorted(glob("native/src/*.c"))],
    include_dirs=["native/include", "native/src"],
    extra_compile_args=["-std=c11", "-O2", "-D_GNU_SOURCE", "-Wall", "-Wextra",
                        "-Wno-unused-parameter", "-Wno-sign-compare"],
    libraries=["pthread"],
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
        "coc": ["*.pyx", "*.pxd", "*.pyi", "py.typed"],
        "coc.mpi4py": ["startup/sitecustomize.py"],
        "coc.data.topology": ["*.yaml"],
        "coc.data.launcher": ["*", "*/*"],
    },
    ext_modules=cythonize([engine], language_level=3,
                          compiler_directives={"embedsignature": True}) + [timing],
)
