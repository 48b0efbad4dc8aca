"""The `kept-value-changed` kind: a value the program kept shares memory with a tensor it later wrote in place, so the kept value silently changed.

The instrumentation records the keeping (an alias taken on a program line), the first write into its
bytes through another tensor, and whether it was still alive at the end or died after that write (see
NOTE [Kept values] in instrument/kept.py). This explainer adds the last condition, from the program's text: the kept value is
read after the write (a name it was bound to is loaded on a later line, or anywhere in a loop around the
write). A view taken and used before the write is no finding.
"""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at
from tensorscope.kinds._reads import kept_names, loads_after, roots

KIND = Kind(
    code="kept-value-changed",
    title="A value the program kept shares memory with a tensor written in place later, so it silently changed.",
    explanation=(
        "`state_dict()`, `.detach()`, `.data`, a view, `torch.from_numpy` and `torch.as_tensor` of an array "
        "return tensors that read the same bytes as their source, not copies. When the program keeps one "
        "as a snapshot (a best model, previous weights, an initial value) and the source is later written "
        "in place (the optimizer step, `zero_()`, `copy_`, `+=`), the snapshot changes with it. Nothing "
        "raises: a comparison, a restore or a checkpoint silently uses the new values."
    ),
    causes=(
        "`best = model.state_dict()` kept as the best model while training goes on.",
        "`prev = w.detach()` or `init = w.data` kept to compare against later weights.",
        "`torch.from_numpy(a)` or `torch.as_tensor(a)` kept while the array or another tensor over it is written.",
        "`history.append(w.numpy())` while `w` is written in place: every entry is the same memory.",
    ),
    fixes=(
        "Copy when keeping: `copy.deepcopy(model.state_dict())`, `w.detach().clone()`, `w.numpy().copy()`.",
        "Make a tensor that owns its memory from an array: `torch.tensor(a)` or `torch.from_numpy(a.copy())`.",
        "Read the kept value before the write, if a view was all that was needed.",
    ),
    hazard=True,
)

_WHY = {
    "state_dict": "`state_dict()` returns the module's tensors detached, not copied",
    "optimizer_state_dict": ("`optimizer.state_dict()` returns the optimizer's own per-parameter state (its "
                             "`exp_avg`, `step`, `momentum_buffer` tensors), not copies"),
    "detach": "`.detach()` returns a tensor over the same memory",
    "data": "`.data` returns a tensor over the same memory (with its own version counter)",
    "numpy": "`.numpy()` of a CPU tensor returns an array over the tensor's own memory, not a copy",
    "from_numpy": "`torch.from_numpy` makes a tensor over the array's own memory",
    "as_tensor": "`torch.as_tensor` of an array makes a tensor over the array's own memory",
    "asarray": "`torch.asarray` of an array makes a tensor over the array's own memory",
    "frombuffer": "`torch.frombuffer` makes a tensor over the buffer's own memory",
    "from_dlpack": "`torch.from_dlpack` makes a tensor over the producer's own memory",
}


def _by_asarray(code) -> bool:
    """The keeping line took the array with ``np.asarray`` (torch's ``__array__``), not ``.numpy()``."""
    return bool(code) and "asarray(" in code and ".numpy(" not in code


_WHY_ASARRAY = ("`np.asarray` of a CPU tensor returns an array over the tensor's own memory (torch's `__array__` "
                "is `.numpy()`), not a copy")


def _fix(op: str, code: str, line) -> str:
    at = f"at line {line}" if line else "where it is kept"
    if op == "state_dict":
        return (f"Keep a copy {at}: `copy.deepcopy(model.state_dict())`, or "
                "`{k: v.detach().clone() for k, v in model.state_dict().items()}`; `torch.save` to a file also copies.")
    if op == "optimizer_state_dict":
        return (f"Keep a copy {at}: `copy.deepcopy(optimizer.state_dict())`; `torch.save` to a file also copies.")
    if op in ("from_numpy", "as_tensor", "asarray", "frombuffer", "from_dlpack"):
        return (f"Give the kept tensor its own memory {at}: `torch.tensor(a)` copies, as does "
                "`torch.from_numpy(a.copy())`; or `.clone()` the tensor you keep.")
    if op == "data":
        return f"Keep a copy {at}: `.detach().clone()` instead of `.data`."
    if op == "numpy" and _by_asarray(code):  # NOTE [An array from np.asarray] in instrument/patches.py
        return (f"Keep a copy {at}: `np.asarray(...).copy()`, or `np.array(...)`, which copies; `.cpu()` of a CPU "
                "tensor is the tensor itself, so `np.asarray(t.cpu())` shares memory too.")
    if op == "numpy":
        return (f"Keep a copy {at}: `.numpy().copy()` (or `.detach().clone().numpy()`); `.cpu()` of a CPU tensor "
                "is the tensor itself, so `.cpu().numpy()` shares memory too.")
    if op == "detach":
        return f"Keep a copy {at}: `.detach().clone()`."
    return f"Keep a copy {at}: `.clone()` the view, or read it before the write."


def explain(ev: Evidence, hazard: dict):
    """A hazard diagnosis, or None when the program never reads the kept value after the write."""
    if hazard.get("through"):
        return _through(ev, hazard)
    kept = hazard.get("kept") or {}
    writes = hazard.get("writes") or []
    first = writes[0] if writes else {}
    kfile, kline, op = kept.get("file"), kept.get("line"), kept.get("op") or ""
    wfile, wline = first.get("file"), first.get("line")
    tid = hazard.get("tensor")
    names = kept_names(kfile, kline, op or None) + roots((hazard.get("names") or []) + ev.tensor_names(tid))
    died = hazard.get("died") or {}
    dline = died.get("line") if died.get("file") == wfile and hazard.get("alive_at_end") is False else None
    if kfile == wfile and not loads_after(kfile, kline, wline, names, dline):
        return None
    bound = [n for n in kept_names(kfile, kline, op or None) if not n.startswith(".")]
    if hazard.get("alive_at_end") is False and (not bound or (kfile, kline) == (wfile, wline)):
        return None  # a temporary view that died (`w[:, 2] -= d` takes and drops one): nothing was kept
    kcode, wcode = code_at(kfile, kline), code_at(wfile, wline)
    label = ev.label(tid)
    if op == "numpy":  # an array has no tensor id: the name its keeping line bound
        label = f"the NumPy array kept in `{bound[0]}`" if bound else "a NumPy array"
    elif not ev.tensor_names(tid) and bound:  # died before the end: the name its keeping line bound
        label = f"a tensor of `{bound[0]}`" if op == "state_dict" else f"`{bound[0]}`"
    n = hazard.get("count") or len(hazard.get("tensors") or [tid])
    noun = "array(s)" if op == "numpy" else "tensor(s)"
    what = f"{label}" + (f" (with {n - 1} more {noun} kept by the same line)" if n > 1 else "")
    by = f" ({first['library']})" if first.get("library") else ""
    through = f" through `{first['alias']}`" if first.get("alias") and not first.get("library") else ""
    count = hazard.get("write_count") or 1
    memory = (" The write went through a different storage object over the same memory (see the storages' "
              "`memory` group)." if hazard.get("distinct_storage") else "")
    explanation = (
        f"{what} was kept at line {kline} (`{kcode}`): "
        f"{_WHY_ASARRAY if op == 'numpy' and _by_asarray(kcode) else _WHY.get(op, f'`{op}` returns a view, not a copy')}. "
        f"Line {wline} (`{wcode}`{by}) then wrote into that memory in place{through}"
        + (f" ({count} writes in all)" if count > 1 else "")
        + ", so the kept value changed with it and no longer holds what it held when it was kept; the program "
        f"reads it after the write, and nothing raised.{memory}"
    )
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=_fix(op, kcode, kline),
        culprit=where(wfile, wline, alias=first.get("alias")),
        tensor={"id": tid, "names": ev.tensor_names(tid) or list(hazard.get("names") or []),
                "version_at_save": hazard.get("version_at_keep"), "version_now": hazard.get("version_now")},
        alias_chain=[d for d in (where(kfile, kline, what=f"kept by `{op}`: an alias, not a copy"),) if d],
        evidence=[f"kept at line {kline} by `{op}`; its bytes written at line {wline} through another tensor; "
                  + ("alive at the end" if hazard.get("alive_at_end", True) else "alive after the write (it died before "
                   "the end, with the function that held it)") + " and read after the write"],
    ) | {"kept_at": where(kfile, kline, how=op)}


def _through(ev: Evidence, hazard: dict):
    """The caller's data written through an alias its function took (NOTE [The caller's data written through
    an alias] in instrument/kept.py): reported when the data is alive at the end."""
    kept = hazard.get("kept") or {}
    writes = hazard.get("writes") or []
    first = writes[0] if writes else {}
    kfile, kline, op = kept.get("file"), kept.get("line"), kept.get("op") or ""
    wfile, wline = first.get("file"), first.get("line")
    kcode, wcode = code_at(kfile, kline), code_at(wfile, wline)
    tid = hazard.get("tensor")
    fn = hazard.get("function") or "the function"
    external = op in ("from_numpy", "as_tensor", "asarray", "frombuffer", "from_dlpack")
    bound = [n for n in kept_names(kfile, kline, op or None) if not n.startswith(".")]
    alias = first.get("alias") or (bound[0] if bound else "the alias")
    if external:
        what = f"the {hazard.get('source_type') or 'array'} handed to `{fn}`"
        why = _WHY.get(op, "it reads the same memory")
    else:
        what = ev.label(tid) if tid else "the tensor it was taken from"
        why = f"`{op}` returns a view of it, not a copy"
    count = hazard.get("write_count") or 1
    made = (f"Line {kline} (`{kcode}`) handed `{fn}` a view of {what} (`{op}` returns a view, not a copy), and `{fn}` "
            f"wrote its argument in place: line {wline} (`{wcode}`)" if hazard.get("handed") else
            f"Line {kline} (`{kcode}`) in `{fn}` made `{alias}` over {what}: {why}. Line {wline} (`{wcode}`) then "
            f"wrote `{alias}` in place")
    explanation = (
        made
        + (f" ({count} writes in all)" if count > 1 else "")
        + f", so the data the caller of `{fn}` still holds changed with it"
        + (" (called again on the same data, it changes it again: a data set normalised at every epoch drifts)"
           if hazard.get("repeated") else "")
        + "; nothing raised."
    )
    if external:
        fix = (f"Copy the caller's data at line {kline}: `torch.tensor(a)` or `torch.from_numpy(a.copy())`; or write "
               f"out of place at line {wline} (`{alias} = {alias} - m` rather than `{alias} -= m`, `{alias}.clamp(...)` rather "
               f"than `{alias}.clamp_(...)`).")
    elif hazard.get("handed"):
        fix = (f"Write out of place in `{fn}` at line {wline} (`{alias} = {alias} * scale` rather than `{alias}.mul_(scale)`: "
               f"return the new tensor), or hand it a copy at line {kline}: `.clone()` the view.")
    else:
        fix = (f"Write out of place at line {wline} (`{alias} = ({alias} - mean) / std` rather than `{alias}.sub_(mean)"
               f".div_(std)`), or copy at line {kline}: `.clone()` the view before writing it.")
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=fix,
        culprit=where(wfile, wline, alias=first.get("alias")),
        tensor={"id": tid, "names": ev.tensor_names(tid) if tid else [],
                "version_at_save": hazard.get("version_at_keep"), "version_now": hazard.get("version_now")},
        alias_chain=[d for d in (where(kfile, kline, what=f"`{alias}` made by `{op}` over the caller's data"),) if d],
        evidence=[f"aliased at line {kline} by `{op}` inside `{fn}`; written in place through the alias at line "
                  f"{wline}; the aliased data was made outside `{fn}` and is alive at the end"],
    ) | {"kept_at": where(kfile, kline, how=op)}
