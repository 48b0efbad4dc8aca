"""DistributedDataParallel's own failures: parameters without a gradient, a gradient ready twice, and
its broadcasts writing a tensor saved for backward (a version error whose writer is DDP itself).

The reducer names parameters by index; the names come from the list recorded when the program
built its DistributedDataParallel (instrument/ddp.py: plain strings in the reducer's order).
"""

from __future__ import annotations

from tensorscope.analysis import source
from tensorscope.analysis.common import Evidence, diagnosis, where
from tensorscope.report import display_path

UNUSED = "ddp-unused-parameters"
READY_TWICE = "ddp-mark-ready-twice"


def _site(ev: Evidence):
    exc = ev.exception or {}
    return exc.get("file"), exc.get("line")


def _model(ev: Evidence, indices) -> dict | None:
    """The DDP model the indices refer to: the last one built that has that many parameters."""
    need = max(indices, default=-1)
    for model in reversed(ev.ddp_models):
        if len(model["parameters"]) > need:
            return model
    return None


def _built(model: dict | None) -> str:
    if not model or not model.get("line"):
        return ""
    code = source.code(model["file"], model["line"])
    return f"; DistributedDataParallel built at line {model['line']}: `{code}`"


def _owners(names: list[str]) -> list[str]:
    """`aux.weight`, `aux.bias` -> [`aux`]: the submodules holding the parameters, in order."""
    owners: list[str] = []
    for name in names:
        owner = name.rpartition(".")[0]
        if owner not in owners:
            owners.append(owner)
    return owners


def _skipping_forward(model: dict | None, owners: list[str]) -> str:
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


def unused_parameters(ev: Evidence) -> dict | None:
    fields = ev.parsed.fields if ev.parsed is not None else {}
    file, line = _site(ev)
    indices = fields.get("indices") or []
    names = list(fields.get("names") or [])
    model = _model(ev, indices)
    if not names and model is not None:
        names = [model["parameters"][i] for i in indices]
    owners = _owners(names)
    rank = fields.get("rank")
    on_rank = f" on rank {rank}" if rank is not None else ""
    if names:
        listed = ", ".join(f"`{n}`" for n in names)
        what = f"{listed} got no gradient in the previous iteration{on_rank}"
        if indices and not fields.get("names"):
            what += f" (DDP's parameter indices {' '.join(map(str, indices))}{_built(model)})"
    else:
        what = f"Some parameters got no gradient in the previous iteration{on_rank}"
    text = f"{what}: they took no part in computing the loss."
    skipped = _skipping_forward(model, owners)
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
    return diagnosis(UNUSED, explanation=text, fix=fix, culprit=where(file, line), evidence=evidence)


def _reentrant_checkpoints(model: dict | None) -> list[tuple[str, int]]:
    """(file, line) of each `checkpoint(...)` call without `use_reentrant=False` in the model's own forwards."""
    import ast

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


def ready_twice(ev: Evidence) -> dict | None:
    fields = ev.parsed.fields if ev.parsed is not None else {}
    file, line = _site(ev)
    index, name = fields.get("index"), fields.get("name")
    model = _model(ev, [index] if index is not None else [])
    if name is None and model is not None and index is not None:
        name = model["parameters"][index]
    who = f"`{name}`" if name else (f"the parameter at index {index}" if index is not None else "a parameter")
    text = (f"DDP received two gradients for {who} in one iteration: a second backward pass went through it, "
            "from a reentrant activation checkpoint or a use outside the DDP-wrapped forward.")
    checkpoints = _reentrant_checkpoints(model)
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
    return diagnosis(READY_TWICE, explanation=text, fix=fix, culprit=culprit, backward=backward,
                     evidence=[f"parameter marked ready twice: {name or index}"])


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


EXPLAINERS = {UNUSED: unused_parameters, READY_TWICE: ready_twice}
