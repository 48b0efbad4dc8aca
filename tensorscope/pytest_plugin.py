"""pytest plugin: ``pytest --tensorscope`` runs each test under ``tensorscope.inspect()``.

Dormant without the flag: it only adds its options and its marker, imports no torch
and registers no hook that runs per test. With the flag, a test that fails with an
autograd or tensor-semantics error gets a "tensorscope" section in its failure report
(the diagnosis: kind, culprit file:line, saved by, alias chain, fix), and hazards found
in passing tests are listed in the terminal summary; ``--tensorscope-fail-on-hazard``
or ``@pytest.mark.tensorscope(fail_on_hazard=True)`` makes them failures. Everything
it adds travels in the test reports (``report.sections``), so it works with
pytest-xdist: the controller lists what the workers found.
"""

from __future__ import annotations

import pytest

from tensorscope.render.fold import fold, repeats

SECTION = "tensorscope"
HAZARD_SECTION = "tensorscope hazards"
_MARKER = ("tensorscope(fail_on_hazard=False): with --tensorscope, fail this test when tensorscope "
           "finds a hazard in it (a problem that raised nothing)")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tensorscope", "tensor-semantics inspection")
    group.addoption("--tensorscope", action="store_true", default=False,
                    help="run each test under tensorscope: a test failing with an autograd or tensor-semantics "
                         "error gets a 'tensorscope' section with the diagnosis; hazards of passing tests are "
                         "listed at the end")
    group.addoption("--tensorscope-fail-on-hazard", action="store_true", default=False,
                    help="like --tensorscope, and a test in which a hazard is found fails")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", _MARKER)
    fail_on_hazard = config.getoption("tensorscope_fail_on_hazard")
    if config.getoption("tensorscope") or fail_on_hazard:
        config.pluginmanager.register(Inspector(fail_on_hazard), "tensorscope-inspector")


class Inspector:
    """The per-test hooks, registered only with ``--tensorscope``."""

    def __init__(self, fail_on_hazard: bool):
        self.fail_on_hazard = fail_on_hazard
        self.reports = pytest.StashKey()
        self.hazards: list[tuple[str, str]] = []  # (nodeid, section text), in the order reports arrive

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        from tensorscope.api import recording

        fn = getattr(item, "obj", None)
        scope = getattr(fn, "__globals__", None)
        # the project's own modules are the user's code too, so a culprit inside them is named
        block = recording(str(item.path), scope, root=str(item.config.rootpath), explain=True)
        item.stash[self.reports] = block.__enter__()
        outcome = yield
        # the test's exception stays in `outcome`: it never passes through this frame
        excinfo = outcome.excinfo
        block.__exit__(None, excinfo[1] if excinfo else None, None)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        if call.when != "call":
            return
        rep = item.stash.get(self.reports, None)
        if rep is None or rep._doc is None:
            return
        report = outcome.get_result()
        doc = rep.doc
        diagnosis = doc["diagnosis"]
        if report.failed and diagnosis is not None and diagnosis["kind"] != "other":
            report.sections.append((SECTION, rep.render(full=False).rstrip("\n")))
        if doc["hazards"]:
            text = hazard_lines(doc["hazards"])
            marker = item.get_closest_marker("tensorscope")
            fail = self.fail_on_hazard or bool(marker is not None and marker.kwargs.get("fail_on_hazard"))
            if report.passed and fail:
                report.outcome = "failed"
                report.longrepr = f"tensorscope found {len(doc['hazards'])} hazard(s) in this test:\n{text}"
            else:
                report.sections.append((HAZARD_SECTION, text))

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" and report.passed:
            for name, text in report.sections:
                if name == HAZARD_SECTION:
                    self.hazards.append((report.nodeid, text))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.hazards:
            return
        tr = terminalreporter
        tr.section("tensorscope hazards in passing tests", sep="=", yellow=True)
        for nodeid, text in self.hazards:
            tr.line(nodeid)
            for line in text.splitlines():
                tr.line("  " + line)
        tr.line("(--tensorscope-fail-on-hazard or @pytest.mark.tensorscope(fail_on_hazard=True) makes them failures)")


def hazard_lines(hazards: list) -> str:
    """One line per hazard (kind, culprit file:line and code, title) and its fix; a hazard found again at
    the same lines once, with how many times."""
    out = []
    for h, group in fold(hazards):  # NOTE [Folding repeated hazards]
        c = h.get("culprit") or {}
        at = f" at {c.get('file')}:{c.get('line')} `{c.get('code') or ''}`" if c.get("line") else ""
        out.append(f"{h['kind']}{at}: {h['title']}")
        if len(group) > 1:
            out.append(f"  {repeats(group)}")
        if h.get("saved_by") and h["saved_by"].get("line"):
            s = h["saved_by"]
            out.append(f"  saved by {s.get('file')}:{s['line']} `{s.get('code') or ''}`")
        out.append(f"  fix: {h.get('fix') or ''}")
    return "\n".join(out)
