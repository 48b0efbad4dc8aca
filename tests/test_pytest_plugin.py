"""The pytest plugin, run for real with pytester on real torch test files.

The inner runs live in pytester's temporary folder, so they do not read this project's
addopts (``-n 2 --dist loadfile``); pytester drops PYTEST_ADDOPTS as well.
"""

from __future__ import annotations

import re

import pytest

# Imported here, before any in-process run: pytester unloads the modules first imported inside
# a run, and torch's C extension cannot be imported a second time in one process.
import tensorscope.instrument.session  # noqa: F401
import torch  # noqa: F401

pytest_plugins = ["pytester"]

TESTS = '''\
import pytest
import torch


def test_inplace():
    x = torch.ones(3, requires_grad=True)
    z = (x * 2).sigmoid()
    tmp = z.detach()
    tmp.mul_(2)
    z.sum().backward()


def test_ok():
    x = torch.ones(3, requires_grad=True)
    (x * 2).sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_hazard():
    w = torch.ones(3, requires_grad=True)
    x = torch.full((3,), 2.0, requires_grad=True)
    y = w * x
    x.data.mul_(3)
    y.sum().backward()


@pytest.mark.tensorscope(fail_on_hazard=True)
def test_hazard_marked():
    w = torch.ones(3, requires_grad=True)
    x = torch.full((3,), 2.0, requires_grad=True)
    y = w * x
    x.data.mul_(3)
    y.sum().backward()


def test_assert():
    assert torch.ones(1).item() == 2
'''
LINES = TESTS.splitlines()


def line(fragment: str, nth: int = 0) -> int:
    return [i + 1 for i, text in enumerate(LINES) if fragment in text][nth]


def failure_block(output: str, test: str) -> str:
    """The failure report of one test: from its `____ test ____` heading to the next heading."""
    m = re.search(rf"_{{3,}} {test} _{{3,}}\n(.*?)(?=\n_{{3,}} \w|\n={{3,}} )", output, re.S)
    assert m, output
    return m.group(1)


def check_inplace_section(output: str) -> None:
    block = failure_block(output, "test_inplace")
    assert "RuntimeError: one of the variables needed for gradient computation has been modified" in block
    section = block.split(" tensorscope -", 1)[1]
    assert "Diagnosis: inplace-modified-saved-tensor" in section
    assert f"culprit test_demo.py:{line('tmp.mul_(2)')}  tmp.mul_(2)" in section
    assert f"saved by test_demo.py:{line('z = (x * 2).sigmoid()')}" in section
    assert f"backward test_demo.py:{line('z.sum().backward()')}" in section
    assert "alias chain: `tmp = z.detach()`" in section and "fix:" in section


@pytest.fixture
def demo(pytester):
    pytester.makepyfile(test_demo=TESTS)
    return pytester


def test_dormant_without_the_flag(demo):
    help_text = demo.runpytest("--help").stdout.str()
    assert "--tensorscope" in help_text and "--tensorscope-fail-on-hazard" in help_text
    result = demo.runpytest("--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3, failed=2)  # the marker does nothing without --tensorscope
    out = result.stdout.str()
    assert " tensorscope -" not in out and "tensorscope hazards" not in out


def test_dormant_imports_no_torch(pytester):
    pytester.makepyfile(test_light="import sys\n\ndef test_light():\n    assert 'torch' not in sys.modules\n")
    pytester.runpytest_subprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_a_failing_test_gets_the_diagnosis_and_hazards_are_listed(demo):
    plain = demo.runpytest("-p", "no:cacheprovider")
    result = demo.runpytest("--tensorscope", "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    out = result.stdout.str()
    check_inplace_section(out)
    # the test's own failure text is what pytest shows without tensorscope
    errors = lambda text: [ln for ln in text.splitlines() if ln.startswith("E ")]  # noqa: E731
    assert errors(failure_block(out, "test_inplace")) == errors(failure_block(plain.stdout.str(), "test_inplace"))
    assert " tensorscope -" not in failure_block(out, "test_assert")  # not a tensor-semantics error
    marked = failure_block(out, "test_hazard_marked")
    assert "tensorscope found 1 hazard(s) in this test" in marked
    assert f"silent-saved-tensor-write at test_demo.py:{line('x.data.mul_(3)', 1)}" in marked
    summary = out.split("tensorscope hazards in passing tests", 1)[1]
    assert "test_demo.py::test_hazard\n" in summary
    assert f"silent-saved-tensor-write at test_demo.py:{line('x.data.mul_(3)')} `x.data.mul_(3)`" in summary
    assert f"saved by test_demo.py:{line('y = w * x')}" in summary


def test_fail_on_hazard_makes_every_hazard_a_failure(demo):
    result = demo.runpytest("--tensorscope-fail-on-hazard", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=4)
    assert "tensorscope found 1 hazard(s) in this test" in failure_block(result.stdout.str(), "test_hazard")


@pytest.mark.slow
def test_works_with_xdist(demo):
    result = demo.runpytest_subprocess("--tensorscope", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=3)
    out = result.stdout.str()
    check_inplace_section(out)
    assert out.count("tensorscope hazards in passing tests") == 1  # listed by the controller only
    assert "test_demo.py::test_hazard\n" in out.split("tensorscope hazards in passing tests", 1)[1]


def test_a_culprit_in_the_projects_own_module_is_named(pytester):
    pytester.makeini("[pytest]\n")  # the rootdir: the project's own modules lie below it
    pytester.mkpydir("mypkg").joinpath("model.py").write_text(
        "def scale(t):\n"
        "    out = t.sigmoid()\n"
        "    out.mul_(2)\n"
        "    return out\n")
    tests = pytester.mkdir("tests")
    tests.joinpath("test_model.py").write_text(
        "import torch\n"
        "from mypkg.model import scale\n\n\n"
        "def test_scale():\n"
        "    x = torch.ones(2, requires_grad=True)\n"
        "    scale(x).sum().backward()\n")
    pytester.syspathinsert()
    result = pytester.runpytest("--tensorscope", "-p", "no:cacheprovider", "tests")
    result.assert_outcomes(failed=1)
    section = result.stdout.str().split(" tensorscope -", 1)[1]
    assert "culprit mypkg/model.py:3  out.mul_(2)" in section
    assert "saved by mypkg/model.py:2  out = t.sigmoid()" in section
    assert "backward tests/test_model.py:7  scale(x).sum().backward()" in section
