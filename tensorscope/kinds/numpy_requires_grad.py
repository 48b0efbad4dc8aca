"""The `numpy-requires-grad` kind: numpy() was called on a tensor that requires grad."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

KIND = Kind(
    code='numpy-requires-grad',
    title='numpy() was called on a tensor that requires grad.',
    explanation=(
        'A NumPy array made by `numpy()` shares memory with the tensor but is invisible to autograd. '
        'Writes through the array would silently corrupt the graph, so PyTorch refuses to hand out '
        'the memory of a tensor that requires grad.'
    ),
    causes=(
        'Calling `.numpy()` on a model output, loss or parameter to log or plot it.',
        'Passing such a tensor to a NumPy, pandas or matplotlib function.',
    ),
    fixes=(
        'Detach first: `t.detach().cpu().numpy()`.',
        'Or ask for a copy explicitly: `t.numpy(force=True)`.',
    ),
)


PATTERNS = (Pattern(w("Can't call numpy() on") + r"\s+(?:Tensor|Variable)\s+" + w("that requires grad.")
                    + r"(?:\s+Use\s+(?:tensor|var)\.detach\(\)\.numpy\(\)\s+instead\.)?"),)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.numpy_requires_grad(ev)
