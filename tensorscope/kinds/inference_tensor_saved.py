"""The `inference-tensor-saved` kind: a tensor made under inference_mode entered a recorded computation."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, opening, user_files, w, where

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


def _inference_blocks(ev) -> list:
    """``(file, line)`` of every ``with torch.inference_mode()`` and ``@torch.inference_mode()`` in the run's files."""

    def is_mode(node) -> bool:
        node = node.func if isinstance(node, ast.Call) else node
        return ast.unparse(node).split(".")[-1] == "inference_mode"

    out = []
    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.With, ast.AsyncWith)):
                out += [(file, node.lineno) for item in node.items if is_mode(item.context_expr)]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out += [(file, d.lineno) for d in node.decorator_list if is_mode(d)]
    return out


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    text = (f"Line {line} (`{code}`) computes with grad enabled on a tensor that was created under "
            "`torch.inference_mode()`; autograd would have to save it for backward, and inference tensors "
            "cannot be saved.")
    fix = ("Create the inputs of this line under `torch.no_grad()` instead of `torch.inference_mode()`, or clone "
           "the inference tensor outside inference mode before this line (`x = x.clone()`).")
    culprit = where(file, line, alias=f.get("alias"))
    blocks = _inference_blocks(ev)
    if len(blocks) == 1:  # the one place inference tensors come from: change it
        bfile, bline = blocks[0]
        culprit = where(bfile, bline)
        text += f" Inference mode is entered at line {bline} (`{source.code(bfile, bline)}`)."
        fix = (f"Replace `torch.inference_mode()` at line {bline} with `torch.no_grad()` (its tensors can then "
               "be used with autograd), or clone the tensors it made before using them with grad "
               "(`x = x.clone()`).")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=None,
                     evidence=["the op raised while saving an inference tensor for backward"])
