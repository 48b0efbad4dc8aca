"""Plain-data helpers shared by the explanations (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tensorscope.report import code_at, display_path


@dataclass
class Evidence:
    """Everything an explanation may look at: the report and the recorder's plain facts."""

    doc: dict
    failure: dict | None
    saved_failure: dict | None
    hazards: list
    backwards: list
    node_lines: dict
    created: dict
    names: dict
    exception: dict | None
    parsed: object | None = None
    by_id: dict = field(default_factory=dict)

    def tensor_names(self, tid: str | None) -> list[str]:
        if not tid:
            return []
        t = self.by_id.get(tid)
        if t is not None and t["names"]:
            return list(t["names"])
        return list(self.names.get(tid, []))

    def label(self, tid: str | None) -> str:
        names = self.tensor_names(tid)
        if names:
            return f"`{names[0]}`"
        t = self.by_id.get(tid) if tid else None
        base = t.get("view_of") if t else None
        if base and self.tensor_names(base):
            return f"tensor {tid} (a view of `{self.tensor_names(base)[0]}`)"
        return f"tensor {tid}" if tid else "a tensor"


def where(file: str | None, line: int | None, **extra) -> dict | None:
    if not line:
        return None
    d = {"file": display_path(file), "line": line, "code": code_at(file, line)}
    d.update(extra)
    return d


def diagnosis(kind_code: str, *, explanation: str, fix: str, culprit=None, saved_by=None, backward=None,
              tensor=None, other_writes=None, alias_chain=None, title: str | None = None,
              evidence: list | None = None, graph: dict | None = None) -> dict:
    """A diagnosis object with the stable fields of the JSON contract."""
    from tensorscope.explain.kinds import get

    kind = get(kind_code)
    return {
        "kind": kind_code,
        "title": title or kind.title,
        "explanation": explanation,
        "culprit": culprit,
        "saved_by": saved_by,
        "backward": backward,
        "tensor": tensor,
        "other_writes": other_writes or [],
        "alias_chain": alias_chain or [],
        "fix": fix,
        "evidence": evidence or [],
        "graph": graph,
    }


def out_of_place(op: str) -> str:
    """``mul_`` -> ``mul``; ``setitem`` -> indexing out of place."""
    if op.endswith("_") and not op.startswith("_"):
        return op[:-1]
    return {"iadd": "+", "isub": "-", "imul": "*", "itruediv": "/", "ipow": "**"}.get(op, op)
