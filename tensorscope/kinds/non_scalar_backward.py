"""The `non-scalar-backward` kind: backward() was called without a gradient on a tensor that is not a scalar."""

from __future__ import annotations


from tensorscope import source
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, site, tensor_of, w, where

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


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from backward's root and its shape: reduce it to a scalar, or pass `gradient`."""
    file, line, f = site(ev)
    if not line:
        return None
    roots = f.get("roots") or []
    r = roots[0] if roots else {}
    name = (r.get("names") or [None])[0]
    shape = r.get("shape")
    expr = name or "out"
    stmt = source.statement_at(file, line)
    found = source.call_roots(stmt) if stmt is not None else []
    if found:
        expr = source.text(found[0])
    shown = f"shape {tuple(shape)}" if shape is not None else "more than one element"
    text = (f"Line {line} (`{source.code(file, line)}`) calls backward() on `{expr}`, which has {shown}. "
            "backward() without a `gradient` argument only works on a single number (a scalar loss): for a "
            "tensor of several values autograd does not know how to weigh them.")
    fix = (f"Reduce it to a scalar loss first: `{expr}.sum().backward()` or `{expr}.mean().backward()`; or pass the "
           f"weights explicitly: `{expr}.backward(gradient=torch.ones_like({expr}))`.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=expr),
                     backward=where(file, line), tensor=tensor_of(ev, r.get("tensor"), r.get("names")),
                     evidence=[f"backward root shape {shape}"])
