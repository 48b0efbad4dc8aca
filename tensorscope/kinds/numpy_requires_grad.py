"""The `numpy-requires-grad` kind: numpy() was called on a tensor that requires grad."""

from __future__ import annotations


from tensorscope import source
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, name_of, site, tensor_of, w, where

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


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the tensor `.numpy()` was called on: detach it first."""
    file, line, f = site(ev)
    if not line:
        return None
    alias = f.get("alias") or name_of(ev, f)
    info = ev.by_id.get(f.get("tensor")) or {}
    cuda = str(info.get("device") or "").startswith("cuda")
    text = (f"Line {line} (`{source.code(file, line)}`) calls `.numpy()` on `{alias}`, which requires grad "
            f"(grad_fn {info.get('grad_fn') or 'set'}). A NumPy array shares the tensor's memory but autograd "
            "cannot follow it, so PyTorch asks you to leave the graph explicitly.")
    fix = (f"Use `{source.atom(alias)}.detach(){'.cpu()' if cuda else ''}.numpy()` for logging or plotting"
           + ("" if cuda else " (add `.cpu()` for a CUDA tensor)") + "; keep the computation itself in torch ops.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=alias),
                     tensor=tensor_of(ev, f.get("tensor"), f.get("names")), evidence=["numpy() raised inside its wrapper"])
