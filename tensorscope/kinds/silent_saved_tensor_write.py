"""The `silent-saved-tensor-write` kind: a tensor saved for backward changed without a version bump, so backward gives wrong gradients."""

from __future__ import annotations

import ast

from tensorscope.kinds import _ddp, _intent
from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.kinds._fixes import rewrite_out_of_place
from tensorscope.source import code_at

KIND = Kind(
    code='silent-saved-tensor-write',
    title=(
        'A tensor saved for backward changed without a version bump, so backward gives wrong '
        'gradients.'
    ),
    explanation=(
        'Autograd only notices in-place writes that bump the version counter. Writing through '
        "`.data`, replacing a tensor's data with `x.data = ...`, or `set_` on an alias with its own "
        'counter changes the values a node saved without any bump: backward() succeeds and silently '
        'computes gradients from the new values.'
    ),
    causes=(
        'An in-place write through `x.data` (`x.data.zero_()`, `x.data.mul_(...)`).',
        'Assigning `x.data = y` on a tensor an op has saved.',
        '`set_` on a tensor that shares storage but not the version counter.',
    ),
    fixes=(
        'Write through `x.detach()` instead of `x.data`: autograd then reports the problem.',
        'Clone before the write: `x = x.clone()` and modify the clone.',
        'Do the write after the last backward() that needs the saved value.',
    ),
    hazard=True,
)

# writes that no wrapper saw: the recorded fact is who shared the memory, not the writing line
_UNSEEN = ("numpy", "from_numpy", "custom_function")
# writes whose fix is not the program's write moved: NumPy's, a custom Function's, a gradient hook's
_NOT_THE_PROGRAMS = (*_UNSEEN, "grad_hook")


def _out_of_place_return(code: str) -> str:
    """``g.mul_(10)`` -> ``g.mul(10)``, ``g *= 2`` -> ``g * 2``; else a generic ``g * scale``."""

    rewritten = rewrite_out_of_place(code or "")
    if rewritten and " = " in rewritten:
        expr = rewritten.split(" = ", 1)[1]
        try:
            ast.parse(expr, mode="eval")
            return expr
        except SyntaxError:
            pass
    return "grad * scale"


def _written(first: dict) -> tuple[str, str, str]:
    """(how, fix, evidence) for a hazard whose writer was recorded: ``first`` is its first write."""
    op, line = first.get("op", ""), first.get("line")
    via = first.get("alias") or "an alias"
    wcode = code_at(first.get("file"), line)
    evidence = "write into the saved tensor's bytes that did not bump its version counter"
    if op == "data_set":
        how = (f"line {line} (`{wcode}`) swapped its data with `.data = ...`: it now reads another "
               "storage, and its version counter did not move")
        fix = (f"Do not assign `.data` on a tensor the graph saved; build a new tensor and a new forward pass, "
               f"or wrap the update in `with torch.no_grad(): {via}.copy_(...)` so autograd can see it.")
    elif _ddp.is_ddp_write(first):
        how, fix = _ddp.silent_write(first)
        evidence = "saved bytes changed at an unchanged version; written by DistributedDataParallel's broadcast"
    elif op in ("numpy", "from_numpy"):
        made = "`.numpy()`" if op == "numpy" else "`torch.from_numpy`"
        how = (f"its bytes changed while its version did not move: it shares memory with the NumPy array made "
               f"by {made} at line {line} (`{wcode}`), and NumPy's writes bump no version counter")
        fix = (f"Give NumPy its own copy at line {line} (`.numpy().copy()`, or `torch.from_numpy(a.copy())`), "
               "or write into the array only after backward has run.")
        evidence = f"saved bytes changed at an unchanged version; memory shared with NumPy by {made} at line {line}"
    elif op == "custom_function":
        fn = first.get("function") or "a custom autograd.Function"
        at = f" (applied at line {first['applied_line']})" if first.get("applied_line") else ""
        how = (f"its bytes changed while its version did not move; {fn}.forward (line {line}){at} takes it as "
               "input, and writes into it without `ctx.mark_dirty`")
        fix = (f"In {fn}.forward, write into a clone of the input (`x = x.clone()`), or declare the write with "
               "`ctx.mark_dirty(x)` and return the written input (then autograd tracks it).")
        evidence = f"saved bytes changed at an unchanged version; consumed by the custom Function {fn}"
    elif op == "grad_hook":
        fn = first.get("function") or "a hook"
        inner = first.get("inner_op") or "an in-place op"
        how = (f"the gradient hook `{fn}` wrote it in place at line {line} (`{wcode}`, {inner}); autograd had "
               "handed the same gradient tensor to another branch of the graph as well, so that branch "
               "received the changed values too")
        fix = (f"In `{fn}`, return a new gradient instead of writing the argument in place (e.g. "
               f"`return {_out_of_place_return(wcode)}`): a hook's return value replaces the gradient of its "
               "tensor only.")
        evidence = "gradient written in place inside a tensor hook while another branch still held it"
    else:
        how = (f"line {line} (`{wcode}`) wrote into its memory through `{via}`, which shares the storage but "
               "not the version counter, so the version did not move")
        fix = (f"Replace `.data` with `.detach()` at line {line} (then autograd raises instead of computing a "
               f"wrong gradient), or write into a clone: `{via.replace('.data', '.detach().clone()')}`; if the "
               "write is meant to change the forward value, redo the forward pass after it.")
    return how, fix, evidence


def _unseen(ev: Evidence, hazard: dict) -> tuple[str, str, str]:
    """(how, fix, evidence) for a hazard no write was recorded for: the checksum saw the bytes change."""
    frm, to = hazard.get("saved_line"), (hazard.get("backward") or {}).get("line")
    if any(n.split(".")[-1] in ("running_mean", "running_var") for n in ev.tensor_names(hazard.get("tensor"))):
        how = ("its bytes changed while its version did not move: BatchNorm's kernel updates its running "
               "statistics in place without bumping their version, so a training-mode call of the module"
               + (f" between line {frm} (saved, in eval mode) and line {to} (backward)" if frm and to else "")
               + " changed what this eval-mode output's backward reads")
        fix = ("Run backward before calling the module in training mode again, or compute the eval-mode output "
               "from a copy of the module (`copy.deepcopy(bn).eval()`).")
        return how, fix, ("saved bytes changed at an unchanged version (checksum at save and at backward); "
                          "a BatchNorm buffer")
    how = ("its bytes changed while its version did not move: something wrote into its memory without "
           "autograd seeing it (a kernel or extension writing through a pointer, NumPy, a BatchNorm "
           "running statistic updated by a training-mode call, `.data`)"
           + (f", between line {frm} (saved) and line {to} (backward)" if frm and to else ""))
    fix = ("Find the write in that window and make it out of place (or through the tensor itself, so its "
           "version moves); for a BatchNorm module, do not call it in training mode while a graph through "
           "its eval-mode output waits for backward.")
    return how, fix, "saved bytes changed at an unchanged version (checksum at save and at backward)"


def explain(ev: Evidence, hazard: dict) -> dict:
    """The diagnosis of one recorded hazard (a hazard kind's explainer takes the hazard too)."""
    writes = hazard.get("writes") or []
    first = writes[0] if writes else {}
    label = ev.label(hazard.get("tensor"))
    saved_code = code_at(hazard.get("saved_file"), hazard.get("saved_line"))
    op, line = first.get("op", ""), first.get("line")
    backward = hazard.get("backward") or {}
    how, fix, evidence = _written(first) if writes else _unseen(ev, hazard)
    programs = bool(writes) and first.get("op") not in _NOT_THE_PROGRAMS and not first.get("library") \
        and not _ddp.is_ddp_write(first)
    param = _intent.parameter_written(ev, first.get("tensor"), first.get("alias")) if programs else None
    if param is not None:  # see NOTE [A fix keeps the write's intent]
        fix = _intent.move_after_step(ev, param, first.get("file"), line, first.get("seq"), backward)
    culprit = where(first.get("file"), line, alias=first.get("alias"))
    changed = hazard.get("changed_at")
    if changed and changed[1] and (not writes or first.get("op") in _UNSEEN):
        # the line after which the watched bytes differed (see NOTE [Watching exposed saved bytes])
        cfile, cline = changed[0], changed[1]
        ccode = code_at(cfile, cline)
        culprit = where(cfile, cline)
        how += f"; the bytes changed while line {cline} (`{ccode}`) ran"
        if line and line != cline:
            fix = fix.replace(f"at line {line} ", f"at line {line} (written at line {cline}) ", 1)
        elif not line:
            fix = f"Line {cline} (`{ccode}`) changed them. " + fix
    node = hazard.get("node")
    explanation = (
        f"{label} was saved for backward by {node or 'a backward node'}"
        + (f" at line {hazard['saved_line']} (`{saved_code}`)" if hazard.get("saved_line") else "")
        + f", then {how}. Backward used the changed values without any error: the gradients it computed "
        "are wrong."
    )
    if op == "grad_hook":
        at = f" at line {backward['line']}" if backward.get("line") else ""
        explanation = (f"During the backward{at}, {how}. Backward ran without any error: the gradients it "
                       "computed are wrong.")
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=fix,
        culprit=culprit,
        saved_by=where(hazard.get("saved_file"), hazard.get("saved_line"), node=node),
        backward=where(backward.get("file"), backward.get("line")),
        tensor={"id": hazard.get("tensor"), "names": ev.tensor_names(hazard.get("tensor")),
                "version_at_save": hazard.get("version_at_save"), "version_now": hazard.get("version_now")},
        other_writes=[where(w.get("file"), w.get("line"), alias=w.get("alias")) for w in writes[1:] if w.get("line")],
        evidence=[evidence],
    )
