"""The `ddp-mark-ready-twice` kind: distributedDataParallel saw the gradient of one parameter become ready twice in one iteration."""

from __future__ import annotations

from tensorscope import source
from tensorscope.kinds import _ddp
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, w, where

KIND = Kind(
    code='ddp-mark-ready-twice',
    title=(
        'DistributedDataParallel saw the gradient of one parameter become ready twice in one '
        'iteration.'
    ),
    explanation=(
        "DDP hooks every parameter's gradient accumulation and expects each to fire once per "
        'iteration. A second gradient for the same parameter in the same iteration comes from a '
        'second backward pass through it: a reentrant activation checkpoint re-running the layer '
        'inside backward, or the parameter used outside the DDP-wrapped forward.'
    ),
    causes=(
        (
            "`torch.utils.checkpoint.checkpoint(..., use_reentrant=True)` (or a model's "
            '`gradient_checkpointing_enable()` with reentrant checkpoints) under DDP, with '
            '`find_unused_parameters=True` or the same layers checkpointed twice.'
        ),
        (
            'A parameter used twice: through `model.module` or in the loss itself, besides the '
            'DDP-wrapped `forward`.'
        ),
    ),
    fixes=(
        'Use non-reentrant checkpoints: `checkpoint(fn, x, use_reentrant=False)`.',
        (
            "Call every use of the parameters through the DDP model's forward (compute auxiliary terms "
            'inside `forward` and return them).'
        ),
        (
            'If the graph is the same every iteration, pass `static_graph=True` to '
            '`DistributedDataParallel`.'
        ),
    ),
)


PATTERNS = (Pattern(
    w("Expected to mark a variable ready only once.")
    + r"(?:[\s\S]{0,4000}?" + w("Parameter at index") + r"\s+(?P<index>\d{1,9})"
    + r"(?:\s+with\s+name\s+(?P<name>[\w.]{1,500}))?\s+" + w("has been marked as ready twice.") + r")?",
    lambda m: {"index": int(m["index"]) if m["index"] else None, "name": m["name"]}),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    evidence = []
    if f.get("index") is not None:
        name = f" (`{f['name']}`)" if f.get("name") else ""
        evidence.append(f"The parameter at index {f['index']}{name} received two gradients in one iteration.")
    return None, evidence, []


def explain(ev: Evidence) -> dict | None:
    """The diagnosis of this kind from the decoded message and the DDP models the program built."""
    fields = ev.parsed.fields if ev.parsed is not None else {}
    file, line = _ddp.raised_at(ev)
    index, name = fields.get("index"), fields.get("name")
    model = _ddp.model_of(ev, [index] if index is not None else [])
    if name is None and model is not None and index is not None:
        name = model["parameters"][index]
    who = f"`{name}`" if name else (f"the parameter at index {index}" if index is not None else "a parameter")
    text = (f"DDP received two gradients for {who} in one iteration: a second backward pass went through it, "
            "from a reentrant activation checkpoint or a use outside the DDP-wrapped forward.")
    checkpoints = _ddp.reentrant_checkpoints(model)
    culprit = where(file, line)
    backward = None
    if checkpoints:
        cfile, cline = checkpoints[0]
        text += (f" Line {cline} (`{source.code(cfile, cline)}`) is a reentrant checkpoint: it runs its layers again "
                 "inside backward, a second backward pass DDP's hooks see.")
        culprit, backward = where(cfile, cline), where(file, line)
        fix = (f"Make the checkpoint at line {cline} non-reentrant: pass `use_reentrant=False` "
               "(`checkpoint(fn, x, use_reentrant=False)`).")
    else:
        if line:
            text += f" Raised at line {line} (`{source.code(file, line)}`)."
        fix = ("Use non-reentrant checkpoints (`torch.utils.checkpoint.checkpoint(fn, x, use_reentrant=False)`); "
               f"use {who} only inside the DDP model's forward; or pass `static_graph=True` when the graph never "
               "changes.")
    return diagnosis(KIND, explanation=text, fix=fix, culprit=culprit, backward=backward,
                     evidence=[f"parameter marked ready twice: {name or index}"])
