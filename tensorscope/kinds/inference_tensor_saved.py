"""The `inference-tensor-saved` kind: a tensor made under inference_mode entered a recorded computation."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, site, w

KIND = Kind(
    code="inference-tensor-saved",
    title="A tensor created in inference mode was saved for backward by an op autograd records.",
    explanation=(
        "Tensors created under `torch.inference_mode()` have no version counter and no autograd metadata, "
        "so autograd cannot save them for backward. Using one in a computation that requires grad is refused."
    ),
    causes=(
        "Inputs, targets or cached tensors created under `torch.inference_mode()` reused in training.",
        "A model's buffers or weights produced in inference mode (e.g. a cached embedding) used with grad.",
    ),
    fixes=(
        "Create the tensor under `torch.no_grad()` instead of `torch.inference_mode()`.",
        "Clone it outside inference mode before use: `x = x.clone()`.",
    ),
)

PATTERNS = (Pattern(w("Inference tensors cannot be saved for backward.")
                    + r"(?:\s+" + w("Please do not use Tensors created in inference mode in computation "
                                   "tracked by autograd.") + r")?"
                    + r"(?:\s+" + w("To work around") + r"[^\n]{0,300})?"),)


def _inference_created(ev):
    """The tensors recorded as created while inference mode was on (the report's create events)."""
    out = []
    for t in (ev.doc or {}).get("tensors") or []:
        if t.get("inference") and t.get("created"):
            out.append(t)
    return out


def explain(ev):
    from tensorscope.analysis import source
    from tensorscope.analysis.common import diagnosis, where

    file, line, f = site(ev)
    if not line:
        return None
    code = source.code(file, line)
    text = (f"Line {line} (`{code}`) computes with grad enabled on a tensor that was created under "
            "`torch.inference_mode()`; autograd would have to save it for backward, and inference tensors "
            "cannot be saved.")
    fix = ("Create the inputs of this line under `torch.no_grad()` instead of `torch.inference_mode()`, or clone "
           "the inference tensor outside inference mode before this line (`x = x.clone()`).")
    return diagnosis(KIND.code, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     evidence=["the op raised while saving an inference tensor for backward"])
