"""The `no-grad-fn` kind: backward() was called on a tensor that does not require grad and has no grad_fn."""

from __future__ import annotations

from tensorscope import source
from tensorscope.kinds import _provenance
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, fields, opening, w, where
from tensorscope.source import code_at, display_path

KIND = Kind(
    code='no-grad-fn',
    title='backward() was called on a tensor that does not require grad and has no grad_fn.',
    explanation=(
        'Autograd can only differentiate a tensor produced by ops it recorded. The tensor given to '
        'backward() or autograd.grad() has requires_grad=False and no grad_fn, so no graph leads from'
        ' it to any leaf.'
    ),
    causes=(
        (
            'The forward pass ran under `torch.no_grad()`, `torch.inference_mode()` or '
            '`torch.set_grad_enabled(False)`.'
        ),
        (
            'The graph was cut by `.detach()`, `.data`, `.item()`, `.numpy()` or by rebuilding the loss '
            'with `torch.tensor(...)`.'
        ),
        'No input or parameter has `requires_grad=True` (a frozen model, `requires_grad_(False)`).',
    ),
    fixes=(
        'Run the forward pass with grad mode enabled (outside `torch.no_grad()`).',
        (
            'Keep the loss a tensor computed by torch ops: no `.item()`, `.detach()` or '
            '`torch.tensor(loss)` on the way.'
        ),
        'Make sure the parameters to train have `requires_grad=True`.',
    ),
)


PATTERNS = (Pattern(r"element\s+(?P<i>\d{1,9})\s+of\s+"
                    + w("tensors does not require grad and does not have a grad_fn"),
                    lambda m: {"index": int(m["i"])}),
            # the other places autograd needs a tensor that requires grad
            Pattern(w("One of the differentiated Tensors does not require grad"),
                    lambda m: {"reason": "grad-input"}),
            Pattern(w("can't retain_grad on Tensor that has requires_grad=False"),
                    lambda m: {"reason": "retain-grad"}),
            Pattern(w("cannot register a hook on a tensor that doesn't require gradient"),
                    lambda m: {"reason": "hook"}),
            Pattern(r"Output\s+(?P<i>\d{1,9})\s+" + w("of the user-provided function does not require gradients."),
                    lambda m: {"reason": "functional-output", "index": int(m["i"])}))

# reason -> (title, what the line asked of a tensor that does not require grad, fix)
_USES = {
    "grad-input": ("autograd.grad was asked for the gradient of an input that does not require grad.",
                   "asks `torch.autograd.grad` for the gradient with respect to an input that does not require "
                   "grad, so no graph leads to it",
                   "Set `requires_grad=True` on that input before the forward pass (`x.requires_grad_()`), or "
                   "leave it out of the `inputs` of `torch.autograd.grad`."),
    "retain-grad": ("retain_grad() was called on a tensor that does not require grad.",
                    "calls `retain_grad()` on a tensor that does not require grad: it will never get a gradient",
                    "Call `retain_grad()` only on tensors computed from inputs that require grad; check that the "
                    "forward pass runs with grad enabled and the inputs have `requires_grad=True`."),
    "hook": ("A gradient hook was registered on a tensor that does not require grad.",
             "registers a gradient hook on a tensor that does not require grad: no gradient will ever reach it",
             "Register the hook on a tensor that requires grad (a parameter, or a result computed from one with "
             "grad enabled), or give the tensor `requires_grad=True` first."),
    "functional-output": ("A function given to torch.autograd.functional returned an output that does not "
                          "require grad.",
                          "runs `torch.autograd.functional` with `strict=True` on a function whose output does not "
                          "depend differentiably on its input",
                          "Compute the function's output from its input with differentiable torch ops (no "
                          "`.detach()`, `.item()` or NumPy), or drop `strict=True`."),
}


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    if f.get("reason") in _USES:
        title, _, fix = _USES[f["reason"]]
        return title, [], [fix]
    i = f.get("index", 0)
    return None, [f"Element {i} of the tensors passed to backward() or autograd.grad() has "
                  "requires_grad=False and no grad_fn."], []


def _use(ev, reason: str):
    """A diagnosis for a line that needed a tensor requiring grad other than as backward's root."""

    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    title, what, fix = _USES[reason]
    return diagnosis(KIND, title=title, explanation=f"Line {line} (`{code}`) {what}.", fix=fix,
                     culprit=where(file, line, alias=f.get("alias")),
                     evidence=[f"the message names a tensor that does not require grad ({reason})"])


def _backward_root(ev: Evidence) -> dict | None:
    """backward() on a root with no graph: where the graph was cut (See NOTE [Provenance of a missing graph])."""
    f = ev.failure or {}
    if f.get("where") != "backward":
        return None
    file, bline = f.get("file"), f.get("line")
    root = _provenance.root_label(f)
    roots = f.get("roots") or []
    tensor = None
    if roots:
        r = roots[0]
        tensor = {"id": r.get("tensor"), "names": r.get("names") or [], "version_at_save": None, "version_now": None}
    evidence = ["backward roots: requires_grad=False, no grad_fn"]
    int_root = next((r for r in roots if r.get("dtype") and not r["dtype"].startswith(("float", "complex", "bfloat"))), None)
    cut, sl, rt, prov = None, None, None, None
    try:
        prov = _provenance.recorded_cut(ev, f)
    except Exception:  # an odd recording must not lose the diagnosis
        prov = None
    if prov is None:
        rt = _provenance.runtime_cut(ev, f)
    if prov is None and rt is None:
        try:
            cut, sl = _provenance.static_cut(ev, f)
        except Exception:  # an odd program must not lose the diagnosis
            cut, sl = None, None
    if prov is not None:
        e = prov["event"]
        text, fix = prov["text"], prov["fix"]
        culprit = _provenance.where_event(e, alias=(e.get("names") or [None])[0])
        evidence.append(f"recorded {e.get('kind')} event #{e['seq']} ({prov['what']}) at line {e.get('line')}, "
                        "the first cut of a tensor with a graph since the last backward that succeeded"
                        if prov["what"] != "no_grad" else
                        f"recorded grad_mode event #{e['seq']} at line {e.get('line')}: autograd off in that window")
    elif rt is not None:
        e, text, fix = rt
        culprit = {"file": display_path(e.get("file")) if e.get("file") else None, "line": e.get("line"),
                   "code": code_at(e.get("file"), e.get("line")), "alias": (e.get("names") or [None])[0]}
        if e.get("library"):
            culprit["library"] = e["library"]
        evidence.append(f"recorded {e.get('kind')} event at line {e.get('line')}")
    elif cut is not None:
        text, fix = _provenance.static_fix(cut, file, sl, root)
        culprit = where(file, cut["line"], alias=source.text(cut["expr"]) if cut.get("expr") is not None else None)
        evidence.append("nothing recorded cut the graph: static backward slice of the root through the program's "
                        "assignments")
    else:
        text = (f"Nothing {root} is computed from requires grad: no input or parameter on its way has "
                "requires_grad=True, so autograd recorded no graph.")
        fix = ("Create the tensors you want gradients for with `requires_grad=True` (e.g. "
               "`w = torch.randn(3, requires_grad=True)`), or use nn.Parameter / a module's parameters.")
        culprit = where(file, bline)
    if int_root is not None and cut is None:
        text += f" ({root} has dtype {int_root['dtype']}: integer tensors never require grad.)"
    explanation = (f"backward() at line {bline} was called on {root}, which has requires_grad=False and no "
                   f"grad_fn. " + text)
    d = diagnosis(KIND, explanation=explanation, fix=fix, culprit=culprit, backward=where(file, bline),
                  tensor=tensor, evidence=evidence)
    d["provenance"] = prov["provenance"] if prov is not None else None
    return d


def explain(ev):
    """The diagnosis of this kind: a line that needed a tensor requiring grad, or backward() on a root with no graph."""

    if fields(ev).get("reason") in _USES:
        return _use(ev, fields(ev)["reason"])

    return _backward_root(ev)
