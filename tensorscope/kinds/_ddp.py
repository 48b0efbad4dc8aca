"""What the DDP kinds share: the DistributedDataParallel models a program built, the reentrant checkpoints
in their forwards, and DDP's broadcasts as the writer of a saved tensor (the ddp-* kinds,
inplace-modified-saved-tensor and silent-saved-tensor-write word them here).

The reducer names parameters by index; the names come from the list recorded when the program
built its DistributedDataParallel (instrument/ddp.py: plain strings in the reducer's order).
"""

from __future__ import annotations

import ast

from tensorscope import source
from tensorscope.kinds._base import Evidence
from tensorscope.source import display_path


def raised_at(ev: Evidence):
    exc = ev.exception or {}
    return exc.get("file"), exc.get("line")


def model_of(ev: Evidence, indices) -> dict | None:
    """The DDP model the indices refer to: the last one built that has that many parameters."""
    need = max(indices, default=-1)
    for model in reversed(ev.ddp_models):
        if len(model["parameters"]) > need:
            return model
    return None


def built_at(model: dict | None) -> str:
    if not model or not model.get("line"):
        return ""
    code = source.code(model["file"], model["line"])
    return f"; DistributedDataParallel built at line {model['line']}: `{code}`"


def owners(names: list[str]) -> list[str]:
    """`aux.weight`, `aux.bias` -> [`aux`]: the submodules holding the parameters, in order."""
    owners: list[str] = []
    for name in names:
        owner = name.rpartition(".")[0]
        if owner not in owners:
            owners.append(owner)
    return owners


def skipping_forward(model: dict | None, owners: list[str]) -> str:
    """Where the forward that did not call those submodules is defined, when it is the program's own."""
    if not model:
        return ""
    parts = []
    for owner in owners:
        parent = owner.rpartition(".")[0]
        fwd = (model.get("forwards") or {}).get(parent)
        child = owner.rpartition(".")[2] or owner
        if fwd and owner:
            parts.append(f"`{fwd['function']}` ({display_path(fwd['file'])}:{fwd['line']}) did not use "
                         f"`self.{child}`")
    return "; ".join(parts)


def reentrant_checkpoints(model: dict | None) -> list[tuple[str, int]]:
    """(file, line) of each `checkpoint(...)` call without `use_reentrant=False` in the model's own forwards."""

    found: list[tuple[str, int]] = []
    for fwd in (model or {}).get("forwards", {}).values():
        module = source.tree(fwd["file"])
        if module is None:
            continue
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == fwd["line"]:
                for call in ast.walk(node):
                    if isinstance(call, ast.Call) and source.dotted(call.func).split(".")[-1] == "checkpoint":
                        flag = next((k.value for k in call.keywords if k.arg == "use_reentrant"), None)
                        if not (isinstance(flag, ast.Constant) and flag.value is False):
                            if (fwd["file"], call.lineno) not in found:
                                found.append((fwd["file"], call.lineno))
    return found


# --- DDP as the writer of a saved tensor (inplace-modified-saved-tensor; see NOTE [DDP's broadcasts are
# writes] in instrument/ddp.py for the ops recorded)

def is_ddp_write(w: dict | None) -> bool:
    """Whether a recorded write is one of DDP's broadcasts."""
    return bool(w) and str(w.get("op") or "").startswith("DistributedDataParallel")


def _line(w: dict) -> tuple[int | None, str]:
    return w.get("line"), source.code(w.get("file"), w.get("line")) if w.get("line") else ""


def write_sentence(w: dict) -> str:
    """What DDP did to the saved tensor, in the explanation's words."""
    line, code = _line(w)
    op = w.get("op") or ""
    src = op.rpartition("(from rank ")[2].rstrip(")") or "0"
    at = f"Line {line} (`{code}`) then" if line else "DistributedDataParallel then"
    bump = f"bumping its version {w.get('version_before')} -> {w.get('version_after')}"
    if "construction" in op:
        return (f"{at} wrote into it: building DistributedDataParallel broadcasts rank {src}'s parameters and "
                f"buffers into the module in place, on every rank (rank {src} included), {bump}.")
    if "broadcast_buffers" in op and "join" not in op:
        return (f"{at} wrote into it: DistributedDataParallel's forward broadcasts rank {src}'s buffers into the "
                f"module in place before running it (`broadcast_buffers=True`, the default), {bump}.")
    return f"{at} wrote into it: {op}, in place, {bump}."


def write_fix(w: dict, saved_label: str) -> str:
    """The fix for DDP's broadcast writing a saved tensor, by which broadcast it was."""
    line, code = _line(w)
    op = w.get("op") or ""
    if "construction" in op:
        return (f"Build DistributedDataParallel once, before the first forward, and run every forward through it: "
                f"line {line} (`{code}`) wrapped the model while a forward's backward was still to come, and its "
                f"broadcast rewrote {saved_label}. Or call backward() on that forward's loss before wrapping.")
    if "broadcast_buffers" in op and "join" not in op:
        stats = "running_mean" in saved_label or "running_var" in saved_label
        why = (" (eval-mode BatchNorm's running statistics do not change, so nothing is lost)" if stats else
               " (buffers are then synchronised only when DistributedDataParallel is built)")
        return (f"Run one forward per backward: concatenate the batches (`model(torch.cat([a, b]))`, then split "
                f"the output) instead of calling the model at line {line} again before backward(); or pass "
                f"`broadcast_buffers=False` to DistributedDataParallel{why}. torch releases that keep the version "
                "counter during this broadcast (2.13 does) raise no error here.")
    return (f"Call backward() before line {line} (`{code}`), which makes DistributedDataParallel write "
            f"{saved_label} in place.")


def silent_write(w: dict) -> tuple[str, str]:
    """(how, fix) of a silent-saved-tensor-write whose writer is DDP's broadcast: it kept the version but
    copied other values (this rank's buffers had drifted from rank 0's since the forward that saved them)."""
    line, code = _line(w)
    op = w.get("op") or ""
    src = op.rpartition("(from rank ")[2].rstrip(")") or "0"
    how = (f"line {line} (`{code}`) ran DistributedDataParallel, whose broadcast copied rank {src}'s values over "
           "this rank's in place while keeping the version (torch puts it back after the broadcast), so backward "
           "reads rank " + src + "'s values, not the ones saved")
    fix = ("Call backward() before the next forward through the DDP model (one forward per backward, or "
           "`model(torch.cat([a, b]))`), keep the ranks' buffers equal (change them on every rank or none), or pass "
           "`broadcast_buffers=False` to DistributedDataParallel.")
    return how, fix


