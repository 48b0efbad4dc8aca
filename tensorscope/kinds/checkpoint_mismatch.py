"""The `checkpoint-mismatch` kind: activation checkpointing recomputed something different from the forward."""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, fields, opening, user_files, w, where

KIND = Kind(
    code="checkpoint-mismatch",
    title="torch.utils.checkpoint recomputed the checkpointed function during backward and got different tensors.",
    explanation=(
        "Non-reentrant checkpointing drops the tensors saved inside the checkpointed function and runs the "
        "function again during backward to recompute them. The recomputation must save the same number of "
        "tensors with the same shapes and dtypes; a function whose behaviour depends on state that changed "
        "in between (a call counter, a cache, a module attribute updated in forward, a grad mode, "
        "randomness) does not."
    ),
    causes=(
        "State mutated inside the checkpointed function (`self.cache.append(...)`, a counter, an updated buffer).",
        "Data-dependent control flow or a different grad mode / autocast state during recomputation.",
        "A key/value cache (`use_cache=True`) enabled under gradient checkpointing.",
    ),
    fixes=(
        "Make the checkpointed function depend only on its inputs: move state updates out of it.",
        "Pass `debug=True` to `torch.utils.checkpoint.checkpoint(...)` to see which op differed.",
    ),
)

# "saved metadata: {'shape': torch.Size([3]), ...}" then "recomputed metadata: {...}", one line each
_METADATA = r"saved\s+metadata:\s+\{[^\n]{0,4000}\}\s+recomputed\s+metadata:\s+\{[^\n]{0,4000}\}"

# the tip that ends both messages: on 2.8.0, 2.9.1, 2.10.0 and 2.11.0 (measured) its last words are
# "enable checkpoint-debug mode globally." (a non-breaking hyphen); 2.13 adds a paragraph on torch.compile
# ending "workaround examples."; 2.2.2 to 2.6.0 have no tip. The longer ending is tried first.
def _tip_end(span: int) -> str:
    return (r"(?:[\s\S]{0,%d}?" % span + w("workaround examples.") + r"|[\s\S]{0,%d}?" % span
            + w("mode globally.") + r")")

PATTERNS = (
    Pattern(w("torch.utils.checkpoint: A different number of tensors was saved during the original forward and "
              "recomputation.")
            + r"(?:\s+" + w("Number of tensors saved during forward:") + r"\s+(?P<f>\d{1,9})\s+"
            + w("Number of tensors saved during recomputation:") + r"\s+(?P<r>\d{1,9})\.?)?"
            + r"(?:\s+Tip:" + _tip_end(3000) + r")?",
            lambda m: {"reason": "count", "saved_forward": int(m["f"]) if m["f"] else None,
                       "saved_recompute": int(m["r"]) if m["r"] else None}),
    Pattern(w("torch.utils.checkpoint: Recomputed values for the following tensors have different metadata "
              "than during the forward pass.")
            + r"(?:\s+tensor\s+at\s+position\s+(?P<pos>\d{1,9}):)?"
            # each tensor's two metadata lines: the end of the message where no tip follows (2.2.2 to 2.6.0; 2.11 adds one)
            + r"(?:\s+" + _METADATA + r"(?:\s+tensor\s+at\s+position\s+\d{1,9}:\s+" + _METADATA + r"){0,64})?"
            + r"(?:" + _tip_end(20000) + r")?",
            lambda m: {"reason": "metadata", "position": int(m["pos"]) if m["pos"] else None}),
)


def advise(f: dict):
    if f.get("saved_forward") is not None:
        return None, [f"The forward saved {f['saved_forward']} tensors; the recomputation saved "
                      f"{f['saved_recompute']}."], []
    return None, [], []


def _checkpoint_calls(ev) -> list:
    """``(file, line)`` of the program's calls of ``checkpoint(...)``, in the files the run saw."""

    out = []
    for file in user_files(ev):
        tree = source.tree(file)
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ("checkpoint",
                                                                                        "checkpoint_sequential"):
                out.append((file, node.lineno))
    return sorted(set(out))


def explain(ev):
    at = opening(ev)
    if at is None:
        return None
    file, line, f, code = at
    fl = fields(ev)
    counts = (f" (the forward saved {fl['saved_forward']} tensors, the recomputation {fl['saved_recompute']})"
              if fl.get("saved_forward") is not None else "")
    text = (f"backward (line {line}, `{code}`) recomputed a checkpointed function and it saved "
            f"different tensors than in the forward pass{counts}: the function's result depends on something "
            "besides its inputs.")
    culprit = where(file, line)
    sites = _checkpoint_calls(ev)
    if len(sites) == 1:
        culprit = where(*sites[0])
        text += f" The checkpoint is at line {sites[0][1]}."
    fix = ("Make the checkpointed function depend only on its inputs: move state it updates (counters, caches, "
           "buffers, `self.x = ...`) out of it, and disable caches such as `use_cache=True` under checkpointing; "
           "pass `debug=True` to `checkpoint(...)` to see the first op that differed.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=where(file, line),
                     evidence=["torch.utils.checkpoint compared the recomputed tensors with the saved ones"])
