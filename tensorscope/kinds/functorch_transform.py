"""The `functorch-transform` kind: a ``torch.func`` transform (vmap, grad, vjp, jacrev, ...) refused the
function it was given: Python control flow or ``.item()`` on a batched tensor, random ops under
``randomness='error'``, inputs whose mapped dimensions differ, or a ``grad`` of a non-scalar."""

from __future__ import annotations

import re

from tensorscope.kinds._base import Kind, Pattern, diagnosis, fields, opening, w, where

KIND = Kind(
    code="functorch-transform",
    title="A torch.func transform (vmap, grad, jacrev, ...) could not run the function it was given.",
    explanation=(
        "`torch.func` transforms run the function on special tensors: under `vmap` each tensor holds the "
        "whole batch behind a per-example view, so there is no single Python number or bool to hand back; "
        "`grad` differentiates one scalar output. Code that asks a batched tensor for a Python value, draws "
        "random numbers without saying how, or returns something other than one scalar to `grad` is refused."
    ),
    causes=(
        "`.item()`, `float(t)`, `if t > 0:` or `if t.any():` on a tensor inside `vmap`.",
        "A random op (dropout in training mode, `torch.rand`) inside `vmap` with the default `randomness='error'`.",
        "Boolean-mask indexing (`x[x > 0]`) inside `vmap`: each example would get its own shape.",
        "`vmap` over inputs whose mapped dimensions differ: a shared tensor not marked `in_dims=None`.",
        "`torch.func.grad` of a function that returns a vector, or a Python float (`.item()`).",
    ),
    fixes=(
        "Keep the computation in tensor ops (`torch.where`, `torch.clamp`), and do Python-level checks "
        "outside `vmap`.",
    ),
)

_REASONS = {
    "item": ("Line {line} (`{code}`) asks for a Python number (`.item()`) from a tensor inside `vmap`, where it "
             "holds one value per example.",
             "Keep the value a tensor and use tensor ops instead of Python arithmetic (`torch.clamp(max_norm / "
             "norm, max=1.0)` instead of `min(1.0, max_norm / norm.item())`); read numbers with `.item()` only "
             "outside `vmap`."),
    "control-flow": ("Line {line} (`{code}`) branches in Python on a tensor inside `vmap` (`if`/`while`/`bool()`), "
                     "but each example may take a different branch.",
                     "Replace the branch with `torch.where(cond, a, b)` (both sides computed, one selected per "
                     "example), or move the check outside `vmap` (run it on the whole batch first)."),
    "randomness": ("Line {line} (`{code}`) runs a random op (dropout in training mode, `torch.rand*`, "
                   "`bernoulli`) inside `vmap`, whose default `randomness='error'` refuses it.",
                   "Say how examples share randomness: `vmap(f, randomness='different')` (each example its own "
                   "draws, like a batch) or `randomness='same'`; or put the model in `eval()` mode."),
    "random-out": ("Line {line} (`{code}`) calls the `out=` form of a random op inside `vmap`.",
                   "Use the op without `out=` and rebind (`x = torch.rand(shape)`), with `vmap(f, "
                   "randomness='different')` or `'same'`."),
    "in-dims": ("Line {line} (`{code}`) gives `vmap` an `in_dims` that does not fit its inputs.",
                "Give one `in_dims` entry per positional argument, each the dimension to map over (`0`) or `None` "
                "for an argument every example shares, and within each tensor's dimensions: "
                "`vmap(f, in_dims=(None, 0))(weights, examples)`."),
    "dynamic-shape": ("Line {line} (`{code}`) uses an op whose output shape depends on the values (a boolean "
                      "mask, `nonzero`) inside `vmap`, so examples would get different shapes.",
                      "Keep shapes fixed: `torch.where(mask, x, 0)` or `x * mask` instead of `x[mask]`, "
                      "then reduce."),
    "mapped-sizes": ("Line {line} (`{code}`) maps over inputs whose mapped dimensions differ ({sizes}): one of "
                     "them is probably meant to be shared by every example.",
                     "Mark the shared argument unmapped: `vmap(f, in_dims=(None, 0))(weights, examples)` (one "
                     "entry per argument, `None` for an argument every example shares)."),
    "grad-non-scalar": ("Line {line} (`{code}`) asks `torch.func.grad` for the gradient of a function that "
                        "returns a tensor with {dims} dimension(s); `grad` needs one scalar.",
                        "Reduce the output to a scalar in the function (`.sum()` or `.mean()`), or use "
                        "`torch.func.jacrev`/`vjp` when you want the Jacobian of a vector output."),
    "grad-non-tensor": ("Line {line} (`{code}`) asks `torch.func.grad` for the gradient of a function that "
                        "returns {got}, not a tensor (a `.item()` or `float()` cut the graph).",
                        "Return the scalar tensor itself (drop `.item()`/`float()` in the function); pass other "
                        "values out with `grad(f, has_aux=True)`."),
    "vmap-output": ("Line {line} (`{code}`) vmaps a function that returns {got}; vmap can only stack tensors.",
                    "Return tensors from the function (wrap numbers with `torch.as_tensor`), or pass "
                    "`out_dims=None` for outputs that are not batched."),
    "saved-tensor-hooks": ("Line {line} (`{code}`) runs a `torch.func` transform while saved-tensor hooks "
                           "(`torch.autograd.graph.saved_tensors_hooks`, activation offloading) are active.",
                           "Run the transform outside the `saved_tensors_hooks`/`save_on_cpu` block, or use "
                           "`torch.autograd.grad` there."),
}

PATTERNS = (
    Pattern(w("vmap: It looks like you're calling .item() on a Tensor.") + r"[^\n]{0,600}",
            lambda m: {"reason": "item"}),
    Pattern(w("vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow.")
            + r"[^\n]{0,600}", lambda m: {"reason": "control-flow"}),
    Pattern(w("vmap: called random operation while in randomness error mode.") + r"[^\n]{0,600}",
            lambda m: {"reason": "randomness"}),
    Pattern(w("vmap: We do not support calling out variants of random operations inside of vmap.")
            + r"[^\n]{0,300}", lambda m: {"reason": "random-out"}),
    Pattern(w("vmap: We do not support batching operators that can") + r"\s+(?:output|support)\s+"
            + w("dynamic shape.") + r"[^\n]{0,600}", lambda m: {"reason": "dynamic-shape"}),
    Pattern(w("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes")
            + r"\s+\[(?P<s>[\d,\s]{0,200})\]\s+" + w("for the mapped dimension"),
            lambda m: {"reason": "mapped-sizes", "sizes": [int(x) for x in re.findall(r"\d+", m["s"])]}),
    Pattern(r"vmap\([^\n]{0,300}\)\(<inputs>\):\s+" + w("in_dims is not compatible with the structure of `inputs`.")
            + r"[^\n]{0,400}", lambda m: {"reason": "in-dims"}),
    Pattern(r"vmap\([^\n]{0,300}\)\(<inputs>\):\s+" + w("Got in_dim=") + r"-?\d{1,4}\s+"
            + w("for some input, but that input is a Tensor of dimensionality") + r"[^\n]{0,300}",
            lambda m: {"reason": "in-dims"}),
    Pattern(r"grad(?:_and_value)?\(f\)\(\*args\):\s+" + w("Expected f(*args) to return a scalar Tensor, got tensor "
            "with") + r"\s+(?P<d>\d{1,3})\s+dims\.?[^\n]{0,300}",
            lambda m: {"reason": "grad-non-scalar", "dims": int(m["d"])}),
    Pattern(r"grad(?:_and_value)?\(f\)\(\*args\):\s+" + w("Expected f(*args) to return a Tensor, got")
            + r"\s+(?P<got>[^\n]{1,120})", lambda m: {"reason": "grad-non-tensor", "got": m["got"].strip()}),
    Pattern(r"vjp\(f, \*primals\):\s+" + w("expected f(*primals) to return only tensors, got unsupported type")
            + r"\s+(?P<got>[^\n]{1,120})", lambda m: {"reason": "grad-non-tensor", "got": m["got"].strip()}),
    Pattern(r"vmap\([^\n]{0,200}\):\s+`[^`\n]{0,200}`\s+" + w("must only return Tensors, got type")
            + r"\s+(?P<got><class '[\w.]{1,80}'>)[^\n]{0,200}", lambda m: {"reason": "vmap-output", "got": m["got"]}),
    # "torch.func transforms don't ..." on 2.2.2
    Pattern(r"(?:" + re.escape("torch.func.{grad, vjp, jacrev, hessian}") + "|" + w("torch.func transforms") + r")\s+"
            + w("don't yet support saved tensor hooks.")
            + r"[^\n]{0,200}", lambda m: {"reason": "saved-tensor-hooks"}),
)


def advise(f: dict):
    reason = f.get("reason")
    if reason == "mapped-sizes" and f.get("sizes"):
        return None, [f"The mapped dimensions have sizes {f['sizes']}."], [_REASONS[reason][1]]
    if reason in _REASONS:
        return None, [], [_REASONS[reason][1]]
    return None, [], []


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    fl = fields(ev)
    reason = fl.get("reason")
    if reason not in _REASONS:
        return None
    text, fix = _REASONS[reason]
    values = {"line": line, "code": code, "sizes": fl.get("sizes"), "dims": fl.get("dims"), "got": fl.get("got")}
    return diagnosis(KIND, explanation=text.format(**values), fix=fix.format(**values),
                     culprit=where(file, line, alias=f.get("alias")),
                     evidence=[f"torch.func refused the function ({reason})"])
