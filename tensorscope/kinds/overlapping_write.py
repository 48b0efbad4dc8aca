"""The `overlapping-write` kind: an in-place write targets a tensor whose elements share memory."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

KIND = Kind(
    code='overlapping-write',
    title='An in-place write targets a tensor whose elements share memory.',
    explanation=(
        'The written-to tensor has several elements at one memory location (an `expand`ed or stride-0'
        ' tensor), or it overlaps the input being read. The result would depend on the order of the '
        'writes, so PyTorch refuses the operation.'
    ),
    causes=(
        'An in-place op on the result of `expand`, `expand_as` or a broadcast view.',
        '`out=` or `copy_` into a tensor that overlaps its own source, e.g. `a[1:].copy_(a[:-1])`.',
        'An `as_strided` view with a zero or too-small stride.',
    ),
    fixes=(
        'Clone (or `.contiguous()`) the expanded tensor before writing: `x = x.expand(3, 4).clone()`.',
        'Clone the source before copying: `a[1:].copy_(a[:-1].clone())`.',
        'Use the out-of-place op.',
    ),
)


PATTERNS = (Pattern(w("unsupported operation:") + r"\s+(?:(?P<one>"
                    + w("more than one element of the written-to tensor refers") + r")|"
                    + w("some elements of the input tensor and the written-to tensor refer") + r")\s+"
                    + w("to a single memory location.")
                    + r"(?:\s+" + w("Please clone() the tensor before performing the operation.") + r")?",
                    lambda m: {"reason": "internal-overlap" if m["one"] else "input-overlap"}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    if f.get("reason") == "input-overlap":
        return None, ["The tensor written overlaps the tensor being read."], [
            "Clone the source before the write: `dst.copy_(src.clone())`."]
    return None, ["Several elements of the tensor written share one memory location (expand or a stride-0 "
                  "view)."], ["Write to a copy: `x = x.clone()` (or `x.contiguous()`) before the in-place op."]


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/simple.py)."""
    from tensorscope.analysis import simple

    return simple.overlapping_write(ev)
