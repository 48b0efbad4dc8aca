"""The `device-mismatch` kind: tensors on different devices met in one op, or CUDA was asked for where there is none.

NOTE [CUDA asked for where there is none]
Three texts say that the program asked for CUDA on a machine that cannot give it (measured on torch
2.2.2, 2.6.0, 2.13.0 and 2.15.0): a CPU-only build raises ``AssertionError: Torch not compiled with CUDA
enabled`` (reason ``no-cuda``); PyPI's CUDA builds on a machine without an NVIDIA driver raise
``RuntimeError: Found no NVIDIA driver on your system. Please check ...``, and with a driver but no visible
GPU ``RuntimeError: No CUDA GPUs are available`` (reason ``no-gpu``). The fix is the same (choose the
device at run time, or ``tensorscope run --device cpu``); only the evidence differs: for ``no-gpu``
installing another PyTorch build is not the answer.
"""

from __future__ import annotations

import ast
import re
from typing import Optional

from tensorscope import source
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, site, w, where
from tensorscope.kinds._message import DEV, decode_type

KIND = Kind(
    code='device-mismatch',
    title='Tensors on different devices met in one op, or CUDA was asked for on a build without it.',
    explanation=(
        'Every tensor an op reads must be on the same device; PyTorch never moves them implicitly. A '
        'CPU-only build of PyTorch cannot create CUDA tensors at all.'
    ),
    causes=(
        (
            'The model was moved with `.to(device)` but an input, target or new tensor '
            '(`torch.zeros(...)`, `torch.tensor(...)`) stayed on the CPU.'
        ),
        'A tensor created inside `forward` without `device=`.',
        "`device='cuda'` or `.cuda()` on a PyTorch build without CUDA, or on a machine without an NVIDIA GPU.",
    ),
    fixes=(
        "Move every input to the model's device: `x = x.to(next(model.parameters()).device)`.",
        'Create new tensors on the right device: `torch.zeros(n, device=x.device)`.',
        "Choose the device once: `device = 'cuda' if torch.cuda.is_available() else 'cpu'`.",
    ),
)


_SAME_DEVICE = w("Expected all tensors to be on the same device")
_METHOD = r"\s+(?P<method>[\w.:]{1,200})\)"


def _method_op(method: Optional[str]) -> Optional[str]:
    """Return the op of a dispatcher wrapper name: ``wrapper_CUDA__index_select`` -> ``index_select``."""
    if not method:
        return None
    return re.sub(r"^wrapper_(?:[A-Za-z]+_)?_?", "", method) or None


def _two_devices(m: re.Match) -> dict:
    gd = m.groupdict()
    method = gd.get("method")
    first = gd.get("d1") or "cpu"  # "addmm: expected 'mat2' to be a CPU tensor" names one device
    return {"reason": "two-devices", "devices": [first.lower(), m["d2"].lower()],
            "argument": gd.get("arg"), "method": method, "op": gd.get("op") or _method_op(method)}


def _input_weight(m: re.Match) -> Optional[dict]:
    (dt1, d1), (dt2, d2) = decode_type(m["t1"]), decode_type(m["t2"])
    if d1 is None or d2 is None or d1 == d2:
        return None  # same device: a dtype mismatch, which is not a kind tensorscope knows
    return {"reason": "input-weight", "devices": [d1, d2], "argument": "input", "method": None,
            "op": None, "dtypes": [dt1, dt2]}


PATTERNS = (
    # "..., but found at least two devices, cuda:0 and cpu! (when checking argument for argument mat1 in method ...)"
    Pattern(_SAME_DEVICE + r",\s+" + w("but found at least two devices,")
            + r"\s+(?P<d1>" + DEV + r")\s+and\s+(?P<d2>" + DEV + r")!"
            + r"(?:\s+\(" + w("when checking") + r"\s+arg(?:ument)?\s+" + w("for argument")
            + r"\s+(?P<arg>\w{1,100})\s+in\s+method" + _METHOD + r")?", _two_devices),
    # "..., but got index is on cpu, different from other tensors on cuda:0 (when checking argument in method ...)"
    Pattern(_SAME_DEVICE + r",\s+but\s+got\s+(?P<arg>\w{1,100})\s+is\s+on\s+(?P<d2>" + DEV + r"),\s+"
            + w("different from other tensors on") + r"\s+(?P<d1>" + DEV + r")"
            + r"(?:\s+\(" + w("when checking argument in method") + _METHOD + r")?", _two_devices),
    # "... on the same device. addmm: expected 'mat2' to be a CPU tensor, but got tensor on cuda:0"
    Pattern(_SAME_DEVICE + r"\.\s+(?P<op>\w{1,100}):?\s+expected\s+'(?P<arg>\w{1,100})'\s+to\s+be\s+"
            + r"(?:a\s+)?" + w("CPU tensor, but got tensor on") + r"\s+(?P<d2>" + DEV + r")", _two_devices),
    Pattern(r"Input\s+type\s+\((?P<t1>[\w.]{1,80})\)\s+and\s+weight\s+type\s+\((?P<t2>[\w.]{1,80})\)\s+"
            + w("should be the same")
            + r"(?:\s+" + w("or input should be a MKLDNN tensor and weight is a dense tensor") + r")?", _input_weight),
    # a meta (or fake) kernel's device check: "Tensor on device meta is not on the expected device cpu!"
    Pattern(r"Tensor\s+on\s+device\s+(?P<d2>" + DEV + r")\s+" + w("is not on the expected device")
            + r"\s+(?P<d1>" + DEV + r")!", _two_devices),
    Pattern(w("Torch not compiled with") + r"\s+(?P<backend>CUDA|XPU|MTIA|MPS|HIP)\s+enabled",
            lambda m: {"reason": "no-" + m["backend"].lower(), "backend": m["backend"]}),
    # torch 2.2.2 without XPU: the allocation itself has no kernel there, "Could not run
    # 'aten::empty.memory_format' with arguments from the 'XPU' backend." (2.6.0 on: "Torch not compiled with
    # XPU enabled"). Only an allocation (empty*): another op missing for a backend is not a missing backend.
    Pattern(w("Could not run") + r"\s+'aten::empty(?:_strided|\.\w{1,40})?'\s+" + w("with arguments from the")
            + r"\s+'(?P<backend>XPU|MTIA|MPS|HIP)'\s+backend\.",
            lambda m: {"reason": "no-" + m["backend"].lower(), "backend": m["backend"]}),
    # a CUDA build on a machine with no NVIDIA driver, or none of its GPUs visible (NOTE [CUDA asked for where
    # there is none])
    Pattern(w("Found no NVIDIA driver on your system.")
            + r"(?:\s+" + w("Please check that you have an NVIDIA GPU and installed a driver from")
            + r"\s+[\w:/.?=&%-]{1,400})?", lambda m: {"reason": "no-gpu", "backend": "CUDA"}),
    Pattern(w("No CUDA GPUs are available"), lambda m: {"reason": "no-gpu", "backend": "CUDA"}),
)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    reason = f.get("reason")
    if reason == "no-gpu":
        return "CUDA was asked for on a machine with no GPU that this PyTorch can use.", [
            "This PyTorch build has CUDA, but this machine has no NVIDIA driver or no GPU it can see."], [
            "Use `device='cpu'`, or choose it at run time: "
            "`device = 'cuda' if torch.cuda.is_available() else 'cpu'`; or run it on a machine with a GPU."]
    if reason and reason.startswith("no-") and reason != "no-cuda":
        backend = f.get("backend", "")
        return None, [f"This PyTorch build has no {backend} support."], [
            f"Use `device='cpu'`, or install a PyTorch build with {backend}."]
    if reason == "no-cuda":
        return None, ["This PyTorch build has no CUDA support (a CPU-only build)."], [
            "Use `device='cpu'`, or choose it at run time: "
            "`device = 'cuda' if torch.cuda.is_available() else 'cpu'`; or install a CUDA build of PyTorch."]
    devices = f.get("devices") or []
    if len(devices) < 2:
        return None, [], []
    if "meta" in devices:  # a meta tensor has no data: moving the others to meta is never the fix
        other = next((d for d in devices if d != "meta"), "cpu")
        return None, [f"The op received a tensor on the meta device (shapes only, no data) and one on {other}."], [
            f"Materialise what is on the meta device before using it: `model.to_empty(device='{other}')` then load "
            f"its weights (or build it without `device='meta'`), so that everything is on {other}."]
    target = next((d for d in devices if d != "cpu"), devices[0])
    if reason == "input-weight":
        return None, [f"The input is on {devices[0]} but the layer's weight is on {devices[1]}."], [
            "Move the input to the layer's device: `x = x.to(next(model.parameters()).device)`, "
            "or move the model: `model.to(device)`."]
    op = f" {f['op']}" if f.get("op") else ""
    evidence = [f"The op{op} received tensors on {devices[0]} and {devices[1]}."]
    arg = f.get("argument")
    if arg:
        evidence.append(f"Its argument `{arg}` is on {devices[1]}.")
        return None, evidence, [f"Move `{arg}` to {target}: `{arg} = {arg}.to('{target}')`."]
    return None, evidence, [f"Move the tensors of this op to one device, e.g. `.to('{target}')`, "
                            "or create them with `device=`."]


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
    file, line, f = site(ev)
    if not line:
        return None
    fields = ev.parsed.fields if ev.parsed is not None else {}
    code = source.code(file, line)
    if str(fields.get("reason", "")).startswith("no-"):
        backend = fields.get("backend") or "CUDA"
        var, define = _device_variable(file, line)
        lacks = ("this machine has no NVIDIA driver or no GPU this CUDA build of PyTorch can see"
                 if fields.get("reason") == "no-gpu" else f"this PyTorch build has no {backend} support (no GPU here)")
        text = (f"Line {line} (`{code}`) asks for a {backend} device, but {lacks}, "
                "so the move itself fails. On a GPU machine the next op would still need "
                "every tensor it combines (inputs and the model's parameters) on that same device.")
        pick = "torch.device(\"cuda\" if torch.cuda.is_available() else \"cpu\")"
        fix = (f"Run it on the CPU as it is with `tensorscope run --device cpu {ev.doc.get('program', {}).get('path') or 'PROG.py'}`"
               + (f", or choose the device at line {define.lineno}: `{var} = {pick}`" if define is not None else
                  f", or choose the device in the program: `device = {pick}`")
               + ", and move the model and its inputs together (`model.to(device)`, `x.to(device)`).")
        return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                         evidence=[f"{backend} requested on a machine without a GPU" if fields.get("reason") == "no-gpu"
                                   else f"{backend} requested on a build without it"])
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
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     alias_chain=chain, evidence=[f"devices: {devices}"])
