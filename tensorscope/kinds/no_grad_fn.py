"""The `no-grad-fn` kind: backward() was called on a tensor that does not require grad and has no grad_fn."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, fields, opening, w

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
    from tensorscope.analysis.common import diagnosis, where

    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    title, what, fix = _USES[reason]
    return diagnosis(KIND.code, title=title, explanation=f"Line {line} (`{code}`) {what}.", fix=fix,
                     culprit=where(file, line, alias=f.get("alias")),
                     evidence=[f"the message names a tensor that does not require grad ({reason})"])


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/no_grad_fn.py; the other uses here)."""
    from tensorscope.analysis import no_grad_fn  # the logic stays in analysis/no_grad_fn.py (runtime provenance lives there)

    if fields(ev).get("reason") in _USES:
        return _use(ev, fields(ev)["reason"])

    return no_grad_fn.explain(ev)
