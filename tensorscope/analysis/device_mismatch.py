"""device-mismatch: tensors on two devices meet in one op, or CUDA is asked of a build without it."""

from __future__ import annotations

import ast

from tensorscope.analysis import source
from tensorscope.analysis.common import Evidence, diagnosis, where

CODE = "device-mismatch"


def _site(ev: Evidence):
    f = ev.failure or {}
    if f.get("line"):
        return f.get("file"), f.get("line"), f
    exc = ev.exception or {}
    return exc.get("file"), exc.get("line"), f


def _tensors_by_device(ev: Evidence, file, line) -> dict[str, list[dict]]:
    """Named tensors read by the failing statement (module parameters included), grouped by device."""
    stmt = source.statement_at(file, line)
    names = source.reads(stmt) if stmt is not None else []
    out: dict[str, list[dict]] = {}
    for t in ev.doc.get("tensors") or []:
        hit = next((n for n in t.get("names") or [] for r in names if n == r or n.startswith(r + ".")), None)
        if hit and t.get("device"):
            out.setdefault(t["device"], []).append({"name": hit, "tensor": t})
    return out


def _device_variable(file, line) -> tuple[str | None, ast.stmt | None]:
    """``device`` in ``x.to(device)`` and the statement that defined it."""
    stmt = source.statement_at(file, line)
    if stmt is None:
        return None, None
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("to", "cuda"):
            for a in list(n.args) + [k.value for k in n.keywords if k.arg == "device"]:
                if isinstance(a, ast.Name):
                    return a.id, source.definition(file, line, a.id)
    return None, None


def explain(ev: Evidence) -> dict | None:
    file, line, f = _site(ev)
    if not line:
        return None
    fields = ev.parsed.fields if ev.parsed is not None else {}
    code = source.code(file, line)
    if str(fields.get("reason", "")).startswith("no-"):
        backend = fields.get("backend") or "CUDA"
        var, define = _device_variable(file, line)
        text = (f"Line {line} (`{code}`) asks for a {backend} device, but this PyTorch build has no {backend} "
                "support (no GPU here), so the move itself fails. On a GPU machine the next op would still need "
                "every tensor it combines (inputs and the model's parameters) on that same device.")
        pick = "torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")"
        fix = (f"Run it on the CPU as it is with `tensorscope run --device cpu {ev.doc.get('program', {}).get('path') or 'PROG.py'}`"
               + (f", or choose the device at line {define.lineno}: `{var} = {pick}`" if define is not None else
                  f", or choose the device in the program: `device = {pick}`")
               + ", and move the model and its inputs together (`model.to(device)`, `x.to(device)`).")
        return diagnosis(CODE, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                         evidence=[f"{backend} requested on a build without it"])
    devices = fields.get("devices") or []
    groups = _tensors_by_device(ev, file, line)
    parts = []
    chain = []
    for dev in devices or list(groups):
        members = [m for d, ms in groups.items() if d.split(":")[0] == dev.split(":")[0] for m in ms]
        if not members:
            continue
        m = members[0]
        created = (m["tensor"].get("created") or {})
        where_made = f" (created at line {created['line']}: `{source.code(created.get('file'), created['line'])}`)" if created.get("line") else ""
        parts.append(f"`{m['name']}` is on {dev}{where_made}")
        if created.get("line"):
            chain.append({"file": created.get("file"), "line": created["line"],
                          "code": source.code(created.get("file"), created["line"]), "what": f"`{m['name']}` on {dev}"})
    shown = " and ".join(devices) if devices else "two devices"
    text = (f"Line {line} (`{code}`) combines tensors on {shown}; an op needs all its tensors on one device"
            + (": " + "; ".join(parts) if parts else "") + ".")
    arg = fields.get("argument")
    if arg:
        text += f" PyTorch named the argument `{arg}`" + (f" of {fields.get('op')}" if fields.get("op") else "") + "."
    fix = ("Move everything to one device before this line: `model.to(device)` and `x = x.to(device)` with the "
           "same `device`; on a machine without a GPU run `tensorscope run --device cpu PROG.py`.")
    return diagnosis(CODE, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     alias_chain=chain, evidence=[f"devices: {devices}"])
