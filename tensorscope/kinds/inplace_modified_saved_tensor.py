"""The `inplace-modified-saved-tensor` kind: a tensor saved for backward was modified in place before backward() used it."""

from __future__ import annotations

import ast
import re

from tensorscope.kinds import _ddp, _intent
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, w, where
from tensorscope.kinds._fixes import clone_of, out_of_place, rewrite_out_of_place
from tensorscope.kinds._message import INTS, decode_type, frame_where, ints, node_facts, snake
from tensorscope.source import code_at, display_path

KIND = Kind(
    code='inplace-modified-saved-tensor',
    title='A tensor saved for backward was modified in place before backward() used it.',
    explanation=(
        'Autograd saves some inputs and outputs of an op (for example the result of sigmoid, exp or '
        'tanh, or the operands of mm) to compute gradients later. Every in-place write bumps the '
        "tensor's version counter; at backward time the saved tensor's version no longer matched the "
        'version recorded when it was saved, so its gradient would have been computed from the wrong '
        'values.'
    ),
    causes=(
        (
            'An in-place op (`x.add_()`, `x += ...`, `x[i] = ...`, `x.zero_()`) on a tensor that an '
            'earlier op saved for backward.'
        ),
        (
            'A write through an alias that shares the version counter: a view, a slice, or `.detach()` of'
            ' the saved tensor.'
        ),
        (
            'An activation module with `inplace=True` (`nn.ReLU(inplace=True)`, '
            '`nn.Dropout(inplace=True)`) overwriting a tensor the previous op saved.'
        ),
        (
            '`optimizer.step()` updating parameters in place between the forward pass and a later '
            'backward() that still needs the old parameter values.'
        ),
    ),
    fixes=(
        'Clone before the write: `y = y.clone()` and modify the clone.',
        'Use the out-of-place op: `x = x + 1` instead of `x += 1` or `x.add_(1)`.',
        'Pass `inplace=False` to activation and dropout modules.',
        'Move `optimizer.step()` after the last backward() that uses the current graph.',
    ),
)


_HINT_ENABLE = w(
    "enable anomaly detection to find the operation that failed to compute its gradient, with"
) + r"\s+torch\.autograd\.set_detect_anomaly\(True(?:,\s*check_nan=False)?\)\."
_HINT_ENABLED = w(
    "the backtrace further above shows the operation that failed to compute its gradient. "
    "The variable in question was changed in there or anywhere later. Good luck!"
)
_INPLACE = (
    w("one of the variables needed for gradient computation has been modified by an inplace operation")
    + r"(?::\s*\[(?P<type>[A-Za-z_][\w.]{0,80})\s+\[(?P<shape>" + INTS + r")\]\]"
    + r"(?:,\s+" + w("which is output") + r"\s+(?P<nr>\d{1,9})\s+of\s+(?P<op>[^\s,]{1,300}),)?"
    + r"\s+" + w("is at version") + r"\s+(?P<ver>\d{1,19});\s+"
    + w("expected version") + r"\s+(?P<exp>\d{1,19})\s+instead\."
    + r"(?:\s+Hint:\s+(?:(?P<enable>" + _HINT_ENABLE + r")|(?P<enabled>" + _HINT_ENABLED + r")))?)?"
)


def _decode(m: re.Match) -> dict:
    f = dict.fromkeys(("tensor_type", "dtype", "device", "shape", "output_nr", "output_of", "op",
                       "node", "version", "expected_version", "bumps", "is_leaf_saved"))
    f["node_guessed"] = False
    f["anomaly_enabled"] = bool(m["enabled"])
    if m["type"] is None:  # the oldest wording stops after "inplace operation"
        return f
    f["tensor_type"] = m["type"]
    f["dtype"], f["device"] = decode_type(m["type"])
    f["shape"] = ints(m["shape"])
    f["is_leaf_saved"] = m["nr"] is None
    if m["nr"] is not None:
        f["output_nr"] = int(m["nr"])
        f["output_of"] = m["op"]
        f.update(node_facts(m["op"]))
    f["version"], f["expected_version"] = int(m["ver"]), int(m["exp"])
    f["bumps"] = f["version"] - f["expected_version"]
    return f


PATTERNS = (Pattern(_INPLACE, _decode),)

# Ops whose backward saves their own output, so a write right after them breaks backward.
_SAVES_RESULT = {"Sigmoid", "Tanh", "Exp", "Exp2", "Expm1", "Relu", "LeakyRelu", "Elu", "Celu",
                 "Selu", "Softmax", "LogSoftmax", "Sqrt", "Rsqrt", "Reciprocal", "Threshold",
                 "Hardtanh", "Relu6"}
_INDEX_DTYPES = {"bool", "int64", "int32", "int16", "int8", "uint8"}
# Ops with an in-place variant: after `x.add_()` autograd shows x as an output of Add.
_HAS_INPLACE = {"Add", "Sub", "Mul", "Div", "Clamp", "Fill", "Zero", "MaskedFill", "IndexPut",
                "Copy", "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Pow", "Sqrt", "Neg",
                "Abs", "Addcmul", "Addcdiv", "Lerp", "Hardtanh", "Threshold", "Elu"}


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    evidence, fixes = [], []
    op, nr = f.get("op"), f.get("output_nr")
    if f.get("tensor_type"):
        what = f"{f.get('dtype') or f['tensor_type']}, shape {f.get('shape')}, on {f.get('device') or '?'}"
        origin = f"output {nr} of {op}" if op else "a leaf (no grad_fn): a parameter, an input or a buffer"
        evidence.append(f"The saved tensor ({what}) is {origin}.")
    if f.get("version") is not None:
        writes = "1 in-place write" if f["bumps"] == 1 else f"{f['bumps']} in-place writes"
        evidence.append(f"It is at version {f['version']} but was saved at version {f['expected_version']}: "
                        f"{writes} after it was saved.")
    if op in _HAS_INPLACE:
        evidence.append(f"Autograd names the tensor's grad_fn when backward ran: {op} created it, or was the "
                        f"last tracked in-place op on it (`{snake(op)}_()`).")
    if f.get("node_guessed"):
        evidence.append(f"Its grad_fn is probably {f['node']} (newer PyTorch prints only the op name).")
    if f.get("saved_by"):
        frames = f.get("forward_frames") or []
        at = f"; its forward call was at {frame_where(frames[-1])}, so the write happened there or later" if frames else ""
        evidence.append(f"Anomaly mode: {f['saved_by']} saved it{at}.")
    if op == "AsStrided":
        fixes.append("The saved tensor is a view that was written through another alias (autograd then shows "
                     "it as AsStrided): do not write to it, its base or any view of the same storage before "
                     "backward(); clone the view when it is made (`v = base[...].clone()`).")
    elif op == "CopySlices":
        fixes.append("The saved tensor was last changed by an indexed assignment (`x[idx] = ...`): clone it "
                     "first (`x = x.clone(); x[idx] = ...`) or build the result out of place (`torch.where`).")
    elif op:
        name = snake(op)
        fixes.append(f"The tensor is output {nr} of {op}: do not modify {name}'s output in place (e.g. "
                     f"`out.detach().zero_()` or `out += 1`), clone it first: `out = out.clone()`.")
        if op in _SAVES_RESULT:
            fixes.append(f"{op} saves its output for backward: the op right after {name} must not be in place; "
                         "pass `inplace=False` to a following `nn.ReLU`/`nn.Dropout`, or use `x = x + y`.")
    elif f.get("is_leaf_saved") and f.get("dtype") not in _INDEX_DTYPES:
        fixes.append("The saved tensor is a leaf: if `optimizer.step()` or another in-place update ran between "
                     "this forward pass and backward(), move `optimizer.step()` after the last backward(); "
                     "otherwise clone the input before writing to it.")
    if f.get("dtype") in _INDEX_DTYPES:
        fixes.append(f"It holds {f['dtype']} values, an index or mask an op saved (gather, index_select, "
                     "masked_fill, where): do not modify it in place before backward(); clone it.")
    if (f.get("bumps") or 0) > 1:
        fixes.append(f"It was written {f['bumps']} times after being saved: look for an in-place op in a loop "
                     "or repeated `+=` on it.")
    return None, evidence, fixes


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


def _fix(ev: Evidence, w: dict | None, saved_label: str, saved_code: str, backward: dict | None,
         saved_tid=None, saved_at: tuple | None = None) -> str:
    if w is None:
        return (f"Do not modify {saved_label} in place between the forward pass and backward(): "
                "clone() it before the in-place op, or use the out-of-place op.")
    if _ddp.is_ddp_write(w):
        return _ddp.write_fix(w, saved_label)
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
    param = _intent.parameter_written(ev, w.get("tensor"), w.get("alias")) if not lib else None
    if param is not None:  # see NOTE [A fix keeps the write's intent]
        return _intent.move_after_step(ev, param, w.get("file"), line, w.get("seq"), backward)
    keep = _intent.keep_write_clone_saved(ev, w, saved_tid, *saved_at) if not lib and saved_at else None
    if keep:  # see NOTE [A write meant to reach its base]
        return keep
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


def _what_wrote(culprit_write: dict | None, others: list) -> list[str]:
    """The sentences saying which write bumped the saved tensor's version (and how many more did)."""
    out = []
    if culprit_write:
        via = culprit_write.get("alias")
        text = f"Line {culprit_write['line']} (`{code_at(culprit_write.get('file'), culprit_write.get('line'))}`) then wrote into it"
        if via:
            text += f" through `{via}`"
        if culprit_write.get("library"):
            text += f" (inside {culprit_write['library']})"
        text += (f", bumping its version {culprit_write.get('version_before')} -> "
                 f"{culprit_write.get('version_after')}.")
        out.append(_ddp.write_sentence(culprit_write) if _ddp.is_ddp_write(culprit_write) else text)
        if others:
            out.append(f"{len(others)} more write(s) bumped it afterwards (listed below).")
    else:
        out.append("It was then modified in place (the write was not seen: it ran in code tensorscope does "
                   "not instrument, e.g. a `out=` argument or a C++ extension).")
    return out


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the saved-tensor record: who saved the tensor, which write bumped it, the alias chain."""
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
        if (ev.doc or {}).get("command") == "explain":  # explain's hooks were on, yet did not see this save
            parts.append("The forward line that built it is not known: explain's saved-tensor hooks did not see "
                         "it saved (PyTorch keeps them per thread: they act on the main thread only, and not "
                         "under saved-tensor hooks of the program's own).")
        else:
            parts.append("The forward line that built it is not known under `tensorscope run` (it registers no "
                         "saved-tensor hooks); `tensorscope explain` names it.")
    parts += _what_wrote(culprit_write, others)
    parts.append(f"It is now at version {sf.get('version_now')}; backward needs the saved values, so autograd "
                 "refuses to compute a wrong gradient.")
    chain = alias_chain(ev, culprit_write, saved_tid) if culprit_write else []
    if culprit_write:
        chain.append({"file": display_path(culprit_write.get("file")), "line": culprit_write.get("line"),
                      "code": code_at(culprit_write.get("file"), culprit_write.get("line")),
                      "what": f"writes through `{culprit_write.get('alias')}`: version of {label} "
                              f"{culprit_write.get('version_before')} -> {culprit_write.get('version_after')}"})
    return diagnosis(
        KIND,
        explanation=" ".join(parts),
        fix=_fix(ev, culprit_write, label, saved_code, {"file": f.get("file"), "line": f.get("line")}, saved_tid,
                 (sf.get("saved_file"), sf.get("saved_line")) if sf.get("saved_line") else None),
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
