"""The `non-scalar-backward` kind: backward() was called without a gradient on a tensor that is not a scalar."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

KIND = Kind(
    code='non-scalar-backward',
    title='backward() was called without a gradient on a tensor that is not a scalar.',
    explanation=(
        'backward() with no argument starts from a gradient of 1, which only makes sense for a real '
        'single-element output. For any other output autograd needs the gradient of the final '
        'objective with respect to it.'
    ),
    causes=(
        'Calling `out.backward()` on a per-sample loss or a model output instead of a reduced loss.',
        "A loss built with `reduction='none'`.",
        'A complex-valued loss.',
    ),
    fixes=(
        'Reduce to a scalar first: `loss.sum().backward()` or `loss.mean().backward()`.',
        'Pass the gradient explicitly: `out.backward(gradient=torch.ones_like(out))`.',
    ),
)


PATTERNS = (Pattern(w("grad can be implicitly created only for") + r"\s+(?:real\s+)?" + w("scalar outputs")
                    + r"(?:\s+but\s+got\s+torch\.(?P<dtype>\w{1,40}))?",
                    lambda m: {"dtype": m["dtype"]}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    if f.get("dtype"):
        return None, [f"The output is {f['dtype']}: backward() without a gradient needs a real scalar."], [
            "Reduce to a real scalar: `out.abs().sum().backward()` or `out.real.sum().backward()`."]
    return None, [], []


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.non_scalar_backward(ev)
