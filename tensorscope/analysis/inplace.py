"""inplace-modified-saved-tensor: a write bumped the version of a tensor saved for backward."""

from __future__ import annotations

from tensorscope.analysis import ddp
from tensorscope.analysis.common import Evidence, clone_of, diagnosis, out_of_place, rewrite_out_of_place, where
from tensorscope.report import code_at, display_path

CODE = "inplace-modified-saved-tensor"


def alias_chain(ev: Evidence, write: dict, saved_tid: str | None) -> list[dict]:
    """How the written tensor is related to the saved one: the alias-creating lines, then the write."""
    chain = []
    tid = write.get("tensor")
    seen = set()
    while tid and tid not in seen and tid != saved_tid:
        seen.add(tid)
        created = ev.created.get(tid)
        if not created or created.get("how") in (None, "clone", "tensor", "create"):
            break
        src = created.get("source")
        how = created["how"]
        shares = created.get("shares_version_counter")
        what = f"{ev.label(tid)} = {how} of {ev.label(src)}"
        what += ": shares its storage and version counter" if shares else ": shares its storage, not its version counter"
        chain.append({"file": display_path(created["file"]), "line": created["line"],
                      "code": code_at(created["file"], created["line"]), "what": what})
        tid = src
    chain.reverse()
    return chain


def _culprit(writes: list[dict], version_at_save: int) -> tuple[dict | None, list[dict]]:
    """The write that made the saved version stale (the first bump after the save), and the others."""
    if not writes:
        return None, []
    first = next((w for w in writes if w.get("version_before") == version_at_save), writes[0])
    others = [w for w in writes if w is not first]
    return first, others


def _write_place(w: dict) -> dict | None:
    return where(w.get("file"), w.get("line"), alias=w.get("alias"))


def _fix(w: dict | None, saved_label: str, saved_code: str) -> str:
    if w is None:
        return (f"Do not modify {saved_label} in place between the forward pass and backward(): "
                "clone() it before the in-place op, or use the out-of-place op.")
    if ddp.is_ddp_write(w):
        return ddp.write_fix(w, saved_label)
    op = w.get("op", "")
    lib = w.get("library") or ""
    alias = w.get("alias") or saved_label
    line = w.get("line")
    code = code_at(w.get("file"), line)
    if "torch/optim" in lib:
        return (f"`{code}` (line {line}) updates parameters that the graph still needs. Call backward() for "
                "every loss that uses them before the optimizer step (e.g. in a GAN: compute the discriminator "
                "loss on `fake.detach()`, step, then run a fresh generator forward pass), or recompute the "
                "forward pass after the step.")
    if "torch/nn" in lib or op in ("relu_", "leaky_relu_", "hardtanh_", "elu_", "threshold_", "silu_", "gelu_"):
        return (f"The in-place activation called at line {line} (`{code}`) overwrites a value saved for "
                "backward: use `inplace=False` (e.g. `nn.ReLU()` / `F.relu(x)`), or clone its input.")
    if not w.get("grad_enabled", True):
        return (f"Writing under torch.no_grad() still bumps the version counter: at line {line} write into a "
                f"copy instead ({clone_of(alias)} first), or move the write after backward().")
    if op == "setitem":
        return (f"Line {line} assigns into {alias} in place. Build a new tensor instead (e.g. "
                f"{clone_of(alias)} before the assignment, or `torch.where`/`index_put` out of place), "
                f"so {saved_label} keeps the value saved for backward.")
    rewritten = rewrite_out_of_place(code)
    if op.startswith("i") and op not in ("index_add_", "index_copy_", "index_fill_", "index_put_"):
        how = f": `{rewritten}`" if rewritten else f" (the {out_of_place(op)} operator, giving a new tensor)"
        if not rewritten and out_of_place(op) == op:
            how = ""
        return (f"Line {line} `{code}` is in place; write it out of place{how}, "
                f"so {saved_label} keeps the value saved for backward.")
    fix = f"Line {line} `{code}` writes in place through `{alias}`. Use the out-of-place op"
    fix += f" (`{rewritten}`)" if rewritten else ""
    if "detach()" in alias or ".data" in alias:
        fix += f", or clone first (`{alias}.clone()`)" if _parses(f"{alias}.clone()") else ", or clone first"
    else:
        fix += f", or clone before writing ({clone_of(alias)})"
    if not saved_code:  # the saving line is not known (`run` registers no saved-tensor hooks)
        return fix + f", so {saved_label} keeps the value saved for backward."
    return fix + f", so {saved_label} keeps the value saved by `{saved_code}`."


def _parses(expr: str) -> bool:
    import ast

    try:
        ast.parse(expr)
    except (SyntaxError, ValueError):
        return False
    return True


def graph_for_report(graph: dict | None) -> dict | None:
    """The autograd graph read on the failure path, with paths as the report shows them."""
    if not graph:
        return None
    nodes = [dict(n, file=display_path(n.get("file"))) for n in graph.get("nodes") or []]
    return {"nodes": nodes, "root": graph.get("root"), "truncated": bool(graph.get("truncated"))}


def explain(ev: Evidence) -> dict | None:
    f = ev.failure or {}
    sf = f.get("saved") or ev.saved_failure
    if sf is None:
        return None
    saved_tid = sf.get("tensor")
    writes = sf.get("writes") or []
    culprit_write, others = _culprit(writes, sf.get("version_at_save", 0))
    saved_code = code_at(sf.get("saved_file"), sf.get("saved_line"))
    label = ev.label(saved_tid)
    node = sf.get("node")
    culprit = _write_place(culprit_write) if culprit_write else None
    if culprit_write and culprit_write.get("library"):
        culprit["library"] = culprit_write["library"]
    parts = [f"{label} was saved for backward by {node or 'a backward node'}"]
    if sf.get("saved_line"):
        parts[0] += f" when line {sf['saved_line']} ran (`{saved_code}`)"
    parts[0] += f", at version {sf.get('version_at_save')}."
    if not sf.get("saved_line") and sf.get("from") == "graph":
        parts.append("The forward line that built it is not known under `tensorscope run` (it registers no "
                     "saved-tensor hooks); `tensorscope explain` names it.")
    if culprit_write:
        via = culprit_write.get("alias")
        text = f"Line {culprit_write['line']} (`{code_at(culprit_write.get('file'), culprit_write.get('line'))}`) then wrote into it"
        if via:
            text += f" through `{via}`"
        if culprit_write.get("library"):
            text += f" (inside {culprit_write['library']})"
        text += (f", bumping its version {culprit_write.get('version_before')} -> "
                 f"{culprit_write.get('version_after')}.")
        parts.append(ddp.write_sentence(culprit_write) if ddp.is_ddp_write(culprit_write) else text)
        if others:
            parts.append(f"{len(others)} more write(s) bumped it afterwards (listed below).")
    else:
        parts.append("It was then modified in place (the write was not seen: it ran in code tensorscope does "
                     "not instrument, e.g. a `out=` argument or a C++ extension).")
    parts.append(f"It is now at version {sf.get('version_now')}; backward needs the saved values, so autograd "
                 "refuses to compute a wrong gradient.")
    chain = alias_chain(ev, culprit_write, saved_tid) if culprit_write else []
    if culprit_write:
        chain.append({"file": display_path(culprit_write.get("file")), "line": culprit_write.get("line"),
                      "code": code_at(culprit_write.get("file"), culprit_write.get("line")),
                      "what": f"writes through `{culprit_write.get('alias')}`: version of {label} "
                              f"{culprit_write.get('version_before')} -> {culprit_write.get('version_after')}"})
    return diagnosis(
        CODE,
        explanation=" ".join(parts),
        fix=_fix(culprit_write, label, saved_code),
        culprit=culprit,
        saved_by=where(sf.get("saved_file"), sf.get("saved_line"), node=node) or {"node": node, "file": None, "line": None, "code": ""},
        backward=where(f.get("file"), f.get("line")),
        tensor={"id": saved_tid, "names": ev.tensor_names(saved_tid), "version_at_save": sf.get("version_at_save"),
                "version_now": sf.get("version_now")},
        other_writes=[_write_place(w) for w in others if w.get("line")],
        alias_chain=chain,
        evidence=(["stale saved variable read from the autograd graph after backward raised",
                   "in-place writes logged per storage, matched by byte range, version and sequence nr"]
                  if sf.get("from") == "graph" else
                  ["saved-tensor record at pack time", "in-place writes checked against saved tensors"]),
        graph=graph_for_report(f.get("autograd_graph")),
    )
