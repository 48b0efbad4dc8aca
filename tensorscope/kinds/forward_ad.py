"""The `forward-ad` kind: forward-mode automatic differentiation (torch.autograd.forward_ad, jvp) failed."""

from __future__ import annotations

import re

from tensorscope.kinds._base import Kind, Pattern, diagnosis, fields, opening, w, where

KIND = Kind(
    code="forward-ad",
    title="Forward-mode AD (dual tensors, jvp) was used with a tangent or an op it does not support.",
    explanation=(
        "Forward-mode AD carries a tangent beside each primal (`fwAD.make_dual`, `torch.func.jvp`). The "
        "tangent must match the primal's size, dtype and layout, and every op applied to a dual tensor needs "
        "a forward derivative formula (a custom Function needs `jvp`)."
    ),
    causes=(
        "`fwAD.make_dual(primal, tangent)` with a tangent of another shape or dtype.",
        "An op without a forward-AD formula (`torch.unique`, some fused kernels) applied to a dual tensor.",
        "A custom `autograd.Function` without a `jvp` static method used under forward AD.",
    ),
    fixes=(
        "Build the tangent like the primal: `fwAD.make_dual(x, torch.randn_like(x))`.",
        "Apply unsupported ops to the primal only (`fwAD.unpack_dual(d).primal`), or implement `jvp` for "
        "the custom Function.",
    ),
)

PATTERNS = (
    Pattern(w("Trying to set a forward gradient that has a different size than that of the original Tensor, "
              "this is not supported.")
            + r"(?:\s+" + w("Tensor is of size") + r"\s+\[(?P<p>[-\d,\s]{0,400})\]\s+"
            + w("while the given forward gradient is of size") + r"\s+\[(?P<t>[-\d,\s]{0,400})\]\.?)?",
            lambda m: {"reason": "tangent-size", "primal_shape": _ints(m["p"]), "tangent_shape": _ints(m["t"])}),
    Pattern(w("Trying to use forward AD with") + r"\s+(?P<op>[\w.]{1,200})\s+"
            + w("that does not support it") + r"[^\n]{0,300}"
            + r"(?:\s+" + w("Please file an issue to PyTorch") + r"[^\n]{0,400}"
            # torch 2.2's third line (measured on 2.2.2; gone by 2.6.0)
            + r"(?:\s+" + w("Note that forward AD support for some operators require") + r"[^\n]{0,600})?)?",
            lambda m: {"reason": "no-formula", "op": m["op"]}),
    Pattern(w("You must implement the jvp function for custom autograd.Function to use it with forward mode AD."),
            lambda m: {"reason": "no-jvp"}),
    Pattern(w("Trying to create a dual Tensor for forward AD but no level exists, make sure to enter_dual_level() "
              "first."), lambda m: {"reason": "no-level"}),
)


def _ints(text):
    return [int(x) for x in re.findall(r"-?\d{1,19}", text or "")] if text is not None else None


def advise(f: dict):
    if f.get("reason") == "tangent-size" and f.get("primal_shape") is not None:
        return None, [f"The primal has shape {f['primal_shape']}, the tangent {f['tangent_shape']}."], []
    if f.get("op"):
        return None, [f"{f['op']} has no forward-AD formula."], []
    return None, [], []


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    fl = fields(ev)
    reason = fl.get("reason")
    if reason == "tangent-size":
        text = (f"Line {line} (`{code}`) pairs a primal of shape {fl.get('primal_shape')} with a tangent of shape "
                f"{fl.get('tangent_shape')}; forward-mode AD needs a tangent of the primal's shape.")
        fix = "Give the tangent the primal's shape, e.g. `torch.randn_like(primal)` or `tangent.reshape(primal.shape)`."
    elif reason == "no-formula":
        text = (f"Line {line} (`{code}`) applies {fl.get('op')} to a dual tensor, but {fl.get('op')} has no "
                "forward-mode AD formula.")
        fix = ("Apply that op to the primal only (`fwAD.unpack_dual(x).primal`) when its result needs no tangent, "
               "or compute this derivative with reverse mode (`torch.autograd.grad`).")
    elif reason == "no-level":
        text = (f"Line {line} (`{code}`) makes a dual tensor outside any forward-AD level: `make_dual` needs an "
                "enclosing `fwAD.dual_level()` block.")
        fix = ("Run this line inside a forward-AD level: `with fwAD.dual_level(): ...` (where "
               "`import torch.autograd.forward_ad as fwAD`).")
    else:
        text = f"Line {line} (`{code}`) raised a forward-mode AD error: {(f.get('message') or '')[:200]}"
        fix = ("Implement `jvp` (and `setup_context`) for the custom Function, or use reverse mode "
               "(`torch.autograd.grad`) for this derivative.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line),
                     evidence=["forward-mode AD refused the op or the tangent"])
