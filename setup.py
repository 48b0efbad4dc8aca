"""The optional compiled accelerator (tensorscope/_speedups.c); everything else is in pyproject.toml.

The extension is optional: where no C compiler or Python headers are found its build fails quietly and
tensorscope runs its pure-Python path, with identical results (NOTE [The compiled lane] in
tensorscope/instrument/speedups.py). In a checkout, ``python setup.py build_ext --inplace`` builds it next to
the sources (the README's development section).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("tensorscope._speedups", ["tensorscope/_speedups.c"], optional=True)])
