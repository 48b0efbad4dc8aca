"""Load an HTML file in a real headless Chromium and read back its DOM and a screenshot.

Tests that use it skip cleanly where no Chromium is installed (``needs_browser``). The DOM
comes from ``chromium --dump-dom`` (what the browser built, after parsing), read with the
standard library's HTMLParser into a small tree of :class:`Element`.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (Debian: apt-get install chromium)")
WINDOW = (1200, 1800)

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Element:
    def __init__(self, tag: str, attrs: dict, parent: "Element | None"):
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list = []  # Elements and strings

    @property
    def classes(self) -> set:
        return set((self.attrs.get("class") or "").split())

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Element):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list:
        """Descendants with TAG, the class CLS and every ATTRS (data_x= means data-x=)."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [e for e in self.iter()
                if (tag is None or e.tag == tag) and (cls is None or cls in e.classes)
                and all(e.attrs.get(k) == v for k, v in want.items())]

    def one(self, tag: str | None = None, cls: str | None = None, **attrs) -> "Element":
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, f"expected one <{tag} class={cls} {attrs}>, found {len(found)}"
        return found[0]

    def by_id(self, ident: str) -> "Element | None":
        return next((e for e in self.iter() if e.attrs.get("id") == ident), None)


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: (v if v is not None else "") for k, v in attrs}, self.current)
        self.current.children.append(el)
        if tag not in _VOID:
            self.current = el

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag):
        el = self.current
        while el is not None and el.tag != tag:
            el = el.parent
        if el is not None and el.parent is not None:
            self.current = el.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse(html_text: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(html_text)
    builder.close()
    return builder.root


def load(page: Path, workdir: Path, screenshot: Path | None = None) -> Element:
    """Open PAGE in headless Chromium; return its DOM (and write SCREENSHOT, a PNG, if given)."""
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={workdir / 'chromium-profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}"]
    if screenshot is not None:
        cmd.append(f"--screenshot={screenshot}")
    cmd += ["--dump-dom", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "<html" in proc.stdout, proc.stderr[-2000:]
    return parse(proc.stdout)


def png_facts(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the image data) of a PNG: a blank page has very few."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    idat, pos = b"", 8
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def measure(page: Path, workdir: Path, script: str, window: tuple[int, int] = WINDOW):
    """Run SCRIPT (JavaScript ending in a value) on a copy of PAGE in headless Chromium, after the
    page is built; return that value, passed through JSON. The report itself runs no script: this
    one belongs to the test (it measures boxes and clicks, as a reader would)."""
    copy = workdir / ("measured-" + page.name)
    probe = ("<script>(function(){let out;try{out=(function(){" + script + "})();}"
             "catch(e){out={error:String(e&&e.stack||e)};}"
             "const pre=document.createElement('pre');pre.id='measured';pre.textContent=JSON.stringify(out);"
             "document.body.appendChild(pre);})();</script>")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", probe + "</body>"), encoding="utf-8")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={workdir / 'chromium-profile'}", f"--window-size={window[0]},{window[1]}",
           "--dump-dom", copy.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=workdir)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = parse(proc.stdout).by_id("measured")
    assert found is not None, proc.stderr[-2000:]
    value = json.loads(found.text())
    assert not (isinstance(value, dict) and "error" in value), value
    return value
