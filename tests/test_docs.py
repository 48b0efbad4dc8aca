"""The user-facing pages (README.md, docs/*.md) and benchmarks' pages: every relative link resolves
to a file and, with a `#fragment`, to a heading of that file; the user-facing text carries no dates,
rounds, sessions or issue numbers (measurements and their dates live in benchmarks/RESULTS.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PAGES = [*USER_PAGES, ROOT / "benchmarks" / "README.md", ROOT / "benchmarks" / "RESULTS.md"]

FENCE = re.compile(r"(?ms)^```.*?^```[ \t]*$")
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"(?m)^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$")


def _prose(text: str) -> str:
    """The text outside code: fenced blocks, indented blocks after a blank line, inline code."""
    text = FENCE.sub("", text)
    text = re.sub(r"(?m)(^\s*\n)((?: {4}|\t).*\n?)+", r"\1", text)
    return INLINE_CODE.sub("", text)


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped (hyphens and
    underscores kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set:
    seen: dict = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = github_anchor(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def relative_links(path: Path):
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:, ...
            continue
        yield target


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def broken_links(path: Path) -> list:
    broken = []
    for target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no file {_shown(dest)}")
        elif fragment and (dest.suffix != ".md" or fragment not in anchors(dest)):
            broken.append(f"{target}: no heading #{fragment} in {_shown(dest)}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_the_readme_links_every_docs_page():
    linked = {t.partition("#")[0] for t in relative_links(ROOT / "README.md")}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, pages - linked


def test_the_link_check_catches_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "a.md").write_text("# Top\n\n## Known limits\n\nSee [b](b.md), [c](a.md#known-limits).\n")
    assert broken_links(tmp_path / "a.md") == ["b.md: no file " + str((tmp_path / "b.md").resolve())]
    (tmp_path / "b.md").write_text("# Top\n\n[x](a.md#unknown) [y](#top) [v](#known-limits) `[z](nowhere.md)`\n\n"
                                   "```\n[w](nowhere.md)\n```\n")
    assert broken_links(tmp_path / "b.md") == [
        "a.md#unknown: no heading #unknown in " + str((tmp_path / "a.md").resolve()),
        "#known-limits: no heading #known-limits in " + str(tmp_path / "b.md"),
    ]


def test_github_anchors():
    assert github_anchor("SARIF (for code scanning)") == "sarif-for-code-scanning"
    assert github_anchor("PyTorch's own test suites") == "pytorchs-own-test-suites"
    assert github_anchor("`tensorscope run`: PyTorch's own checks") == "tensorscope-run-pytorchs-own-checks"
    assert github_anchor("torchrun and DistributedDataParallel") == "torchrun-and-distributeddataparallel"


# The README's one table of the compatibility matrix as measured carries the date it was measured
# (the issue asks for it): between these two markers, a Markdown table and one line naming the date.
MATRIX_BLOCK = re.compile(r"<!-- matrix as measured -->\n(.*?)<!-- /matrix as measured -->\n", re.S)


def without_the_measured_matrix(page: Path, text: str) -> str:
    """``text`` less the README's measured-matrix block, checked to be only that: a table and its date."""
    blocks = MATRIX_BLOCK.findall(text)
    if page.name != "README.md" or page.parent != ROOT:
        assert blocks == [], f"{page.name}: only the README carries the measured matrix"
        return text
    assert len(blocks) == 1, "the README carries the measured matrix once"
    lines = [line for line in blocks[0].splitlines() if line.strip()]
    table = [line for line in lines if line.startswith("|")]
    rest = [line for line in lines if not line.startswith("|")]
    assert len(table) >= 3 and len(rest) == 1 and re.search(r"\b20\d\d-\d\d-\d\d\b", rest[0]), blocks[0]
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", "\n".join(table)), "the date goes on its one line"
    return MATRIX_BLOCK.sub("", text)


def test_only_the_measured_matrix_may_carry_a_date():
    block = "<!-- matrix as measured -->\n| a | b |\n|---|---|\n| 1 | 2 |\nMeasured on 2026-11-25.\n<!-- /matrix as measured -->\n"
    assert without_the_measured_matrix(ROOT / "README.md", "x\n" + block + "y\n") == "x\ny\n"
    with pytest.raises(AssertionError):  # a dated line that is not the table's own
        without_the_measured_matrix(ROOT / "README.md", block.replace("| 1 | 2 |", "| 1 | 2 |\nOn 2026-11-24 too."))
    with pytest.raises(AssertionError):  # on another page
        without_the_measured_matrix(ROOT / "docs" / "kinds.md", block)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_pages_carry_no_dates_rounds_or_issue_numbers(page):
    text = without_the_measured_matrix(page, page.read_text())
    found = re.findall(r"\b20\d\d-\d\d-\d\d\b", text)
    found += re.findall(r"(?i)\bissues? #?\d+\b|(?<![\w/])#\d+\b", text)
    found += re.findall(r"(?i)\b(?:first|second|third|fourth|fifth|sixth|this|last|earlier|previous|next)"
                        r" (?:round|session)s?\b", text)
    found += re.findall(r"(?i)(?<!nox )(?<!a nox )\bsessions?\b(?! per \()", text)
    assert found == []


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
