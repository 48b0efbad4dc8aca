"""The `ddp-unused-parameters` kind: distributedDataParallel waited for gradients of parameters that the previous iteration did not use."""

from __future__ import annotations

import re

from tensorscope import source
from tensorscope.kinds import _ddp
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, w, where

KIND = Kind(
    code='ddp-unused-parameters',
    title=(
        'DistributedDataParallel waited for gradients of parameters that the previous iteration did '
        'not use.'
    ),
    explanation=(
        "DDP's reducer expects a gradient for every parameter it reduces, in every iteration, and "
        "finishes the iteration's all-reduce when the last one arrives. Parameters that took no part "
        "in computing the loss got no gradient, so the previous iteration's reduction never finished "
        'and the next forward refused to start.'
    ),
    causes=(
        (
            'A submodule created in `__init__` but never called in `forward` (or called only on some '
            'iterations: a data-dependent branch).'
        ),
        'An output of `forward` that does not contribute to the loss.',
        '`static_graph=True` with a graph that changes between iterations.',
    ),
    fixes=(
        (
            'Remove the unused submodule, or freeze it before wrapping: `module.requires_grad_(False)` '
            '(DDP skips parameters that do not require grad).'
        ),
        (
            'Pass `find_unused_parameters=True` to `DistributedDataParallel` (it costs a graph traversal '
            'per iteration).'
        ),
        'Make every output of `forward` take part in the loss.',
    ),
)


def _decode(m: re.Match) -> dict:
    names = [n.strip() for n in (m["names"] or "").split(",") if n.strip()]
    rank = m["rank"] or m["nrank"]
    return {"indices": [int(i) for i in (m["indices"] or "").split()], "names": names,
            "rank": int(rank) if rank is not None else None,
            "reason": "static-graph" if m["why"] and "graph" in m["why"] else "unused-parameters"}


PATTERNS = (Pattern(
    w("Expected to have finished reduction in the prior iteration before starting a new one.")
    + r"(?:\s+" + w("This error indicates that your")
    + r"\s+(?P<why>module\s+has\s+parameters|training\s+graph\s+has\s+changed))?"
    + r"(?:[\s\S]{0,4000}?" + w("Parameter indices which did not receive grad for rank")
    + r"\s+(?P<rank>\d{1,6}):(?P<indices>[ \d]{1,20000}))?"
    + r"(?:[\s\S]{0,4000}?" + w("Parameters which did not receive grad for rank")
    + r"\s+(?P<nrank>\d{1,6}):\s*(?P<names>[^\n]{1,20000}))?", _decode),)


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    evidence, fixes = [], []
    if f.get("names"):
        evidence.append(f"Rank {f.get('rank')}: no gradient for {', '.join(f['names'])}.")
    elif f.get("indices"):
        evidence.append(f"Rank {f.get('rank')}: no gradient for the parameters at indices "
                        f"{' '.join(map(str, f['indices']))} of the model's parameters that require grad "
                        "(in `named_parameters()` order).")
    if f.get("reason") == "static-graph":
        fixes.append("The graph changed between iterations under `static_graph=True`: drop `static_graph=True`, "
                     "or make every iteration use the same parameters.")
    return None, evidence, fixes


def explain(ev: Evidence) -> dict | None:
    """The diagnosis of this kind from the decoded message and the DDP models the program built."""
    fields = ev.parsed.fields if ev.parsed is not None else {}
    file, line = _ddp.raised_at(ev)
    indices = fields.get("indices") or []
    names = list(fields.get("names") or [])
    model = _ddp.model_of(ev, indices)
    if not names and model is not None:
        names = [model["parameters"][i] for i in indices]
    owners = _ddp.owners(names)
    rank = fields.get("rank")
    on_rank = f" on rank {rank}" if rank is not None else ""
    if names:
        listed = ", ".join(f"`{n}`" for n in names)
        what = f"{listed} got no gradient in the previous iteration{on_rank}"
        if indices and not fields.get("names"):
            what += f" (DDP's parameter indices {' '.join(map(str, indices))}{_ddp.built_at(model)})"
    else:
        what = f"Some parameters got no gradient in the previous iteration{on_rank}"
    text = f"{what}: they took no part in computing the loss."
    skipped = _ddp.skipping_forward(model, owners)
    if skipped:
        text += f" The forward that skipped them: {skipped}."
    if line:
        text += (f" Line {line} (`{source.code(file, line)}`) started the next forward before DDP's reduction "
                 "of the previous one could finish.")
    if fields.get("reason") == "static-graph":
        text += " The model was built with static_graph=True, and its graph changed between iterations."
    modules = [o for o in owners if o]
    if modules:
        first = modules[0]
        fix = (f"`{first}` takes no part in the loss: call it in forward, remove it, or freeze it before wrapping "
               f"(`m.{first}.requires_grad_(False)`, then `DistributedDataParallel(m)`); or pass "
               "`find_unused_parameters=True` to DistributedDataParallel.")
    else:
        fix = "Pass `find_unused_parameters=True` to DistributedDataParallel, or make every parameter take part in the loss."
    evidence = [f"unused parameters{on_rank}: {', '.join(names)}" if names else "unused parameters: unknown"]
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line), evidence=evidence)
