"""The `no-grad-fn` kind: backward() was called on a tensor that does not require grad and has no grad_fn."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

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
                    lambda m: {"index": int(m["i"])}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    i = f.get("index", 0)
    return None, [f"Element {i} of the tensors passed to backward() or autograd.grad() has "
                  "requires_grad=False and no grad_fn."], []


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/no_grad_fn.py)."""
    from tensorscope.analysis import no_grad_fn  # the logic stays in analysis/no_grad_fn.py (runtime provenance lives there)

    return no_grad_fn.explain(ev)
