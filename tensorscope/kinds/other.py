"""The `other` kind: an exception that is not an autograd failure, said plainly."""

from __future__ import annotations

import re

from tensorscope import source
from tensorscope.usercode import UserCode
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, fields, opening, site, w, where
from tensorscope.kinds._message import INTS, ints

KIND = Kind(
    code='other',
    title='An exception that is not an autograd failure.',
    explanation=(
        'The exception is none of the autograd failure kinds: a Python error of the program itself (a '
        '`KeyError`, a `ValueError`), or a tensor op refused for its shapes or arguments before autograd was '
        'involved. The diagnosis says which, and names the line that raised it. Known tensor errors are decoded '
        '(the `reason` field).'
    ),
    causes=(
        'A Python error of the program (configuration, indexing a dict or list, a wrong argument type).',
        'Shapes that do not fit an op: `mat1 and mat2 shapes cannot be multiplied`, a loss target of another size.',
        'An `as_strided` view larger than its storage; `expand` of a dimension whose size is not 1.',
        'A tensor made under `torch.inference_mode()` written in place outside it.',
        'Autograd misuses no failure kind covers (decoded): a non-tensor given to `ctx.save_for_backward`, '
        '`copy.deepcopy` of a non-leaf tensor.',
    ),
    fixes=(
        'Read the decoded fields and fix the shapes or strides they name.',
    ),
)


def _as_strided(m: re.Match) -> dict:
    return {"reason": "as-strided-out-of-bounds", "sizes": ints(m["sizes"]),
            "strides": ints(m["strides"]), "storage_offset": int(m["offset"]),
            "itemsize": int(m["itemsize"]), "required_nbytes": int(m["required"]),
            "storage_nbytes": int(m["available"])}


def _expand(m: re.Match) -> dict:
    return {"reason": "expand-size-mismatch", "target_size": int(m["target"]),
            "existing_size": int(m["existing"]), "dim": int(m["dim"]),
            "target_sizes": ints(m["tsizes"]) if m["tsizes"] is not None else None,
            "sizes": ints(m["sizes"]) if m["sizes"] is not None else None}


PATTERNS = (
    Pattern(r"setStorage:\s+sizes\s+\[(?P<sizes>" + INTS + r")\],\s+strides\s+\[(?P<strides>" + INTS
            + r")\],\s+" + w("storage offset") + r"\s+(?P<offset>\d{1,19}),\s+and\s+itemsize\s+"
            + r"(?P<itemsize>\d{1,6})\s+" + w("requiring a storage size of") + r"\s+(?P<required>\d{1,19})\s+"
            + w("are out of bounds for storage of size") + r"\s+(?P<available>\d{1,19})", _as_strided),
    Pattern(w("The expanded size of the tensor") + r"\s+\((?P<target>-?\d{1,19})\)\s+"
            + w("must match the existing size") + r"\s+\((?P<existing>\d{1,19})\)\s+"
            + w("at non-singleton dimension") + r"\s+(?P<dim>\d{1,9})\."
            + r"(?:\s+Target\s+sizes:\s+\[(?P<tsizes>" + INTS + r")\]\.\s+"
            + r"Tensor\s+sizes:\s+\[(?P<sizes>" + INTS + r")\])?", _expand),
    Pattern(w("Inplace update to inference tensor outside InferenceMode is not allowed.")
            + r"(?:\s*" + w("You can make a clone to get a normal tensor before doing inplace update.")
            + r")?(?:\s*See\s+https://github\.com/pytorch/rfcs/pull/17\s+for\s+more\s+details\.)?",
            lambda m: {"reason": "inference-tensor-inplace"}),
    # autograd misuses that no failure kind covers: decoded so that the diagnosis does not call them
    # "not a tensor or autograd error"
    Pattern(w("save_for_backward can only save variables, but argument") + r"\s+(?P<i>\d{1,9})\s+is\s+of\s+type\s+"
            + r"(?P<t>[\w.]{1,100})", lambda m: {"reason": "save-for-backward-non-tensor", "index": int(m["i"]),
                                                 "type": m["t"]}),
    Pattern(w("Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol"),
            lambda m: {"reason": "deepcopy-non-leaf"}),
)

# reason -> (title, what the line did, fix)
_AUTOGRAD_MISUSE = {
    "save-for-backward-non-tensor": (
        "A custom Function's forward passed something other than a tensor to ctx.save_for_backward.",
        "runs a custom Function whose forward passes a non-tensor to `ctx.save_for_backward`",
        "Pass only tensors (or None) to `ctx.save_for_backward(...)`; keep other values as attributes of ctx "
        "(`ctx.k = k`)."),
    "deepcopy-non-leaf": (
        "A tensor computed by autograd-recorded ops (a non-leaf) was deep-copied.",
        "deep-copies an object holding a non-leaf tensor (one computed from tensors that require grad), which "
        "autograd does not support",
        "Deep-copy before the forward pass, or keep only detached tensors in the copied object "
        "(`self.cache = out.detach()`); for a model, copy it before running it or use `copy.deepcopy` on "
        "`model.state_dict()`."),
}


def advise(f: dict):
    """Concrete wording from the decoded message: (title or None, evidence, fixes)."""
    reason = f.get("reason")
    if reason == "as-strided-out-of-bounds":
        return ("as_strided asked for a view that reaches past the end of its storage.",
                [f"Sizes {f['sizes']}, strides {f['strides']}, storage offset {f['storage_offset']} and "
                 f"itemsize {f['itemsize']} need {f['required_nbytes']} bytes; the storage has "
                 f"{f['storage_nbytes']}."],
                ["Check the sizes and strides given to `as_strided` (the last element sits at offset + "
                 "sum((size - 1) * stride)); prefer `view`, `expand`, `narrow` or `unfold`, which check shapes."])
    if reason == "expand-size-mismatch":
        sizes = f" (target sizes {f['target_sizes']}, tensor sizes {f['sizes']})" if f.get("sizes") else ""
        return ("expand was asked to change a dimension whose size is not 1.",
                [f"Dimension {f['dim']} has size {f['existing_size']}; expand asked for "
                 f"{f['target_size']}{sizes}."],
                ["expand only grows dimensions of size 1: `unsqueeze` a size-1 dimension first, use "
                 "`repeat` to copy the data, or fix the target sizes."])
    if reason in _AUTOGRAD_MISUSE:
        title, _, fix = _AUTOGRAD_MISUSE[reason]
        return title, [], [fix]
    if reason == "inference-tensor-inplace":
        return ("A tensor created in inference mode was modified in place outside it.", [],
                ["Clone it before writing (`x = x.clone()`), or create it under `torch.no_grad()` "
                 "instead of `torch.inference_mode()`."])
    return None, [], []


# Decoded tensor errors that autograd plays no part in: their diagnosis opens by saying so.
_NOT_AUTOGRAD = {None, "as-strided-out-of-bounds", "expand-size-mismatch"}


# NOTE [An exception re-raised from a DataLoader worker]
# An exception in a DataLoader worker process (or a pin-memory thread, or a DataParallel replica) reaches the
# program re-raised by torch (torch/_utils.py ExceptionWrapper.reraise) at the line that asked for the data:
# the `for` over the loader. Its message is "Caught <Type> in DataLoader worker process N.\nOriginal
# Traceback (most recent call last):\n  File ..., line L, in ...\n...\n<Type>: <text>": the worker's own
# traceback as python prints it, which is what python's output shows last. The line that raised is the last
# frame of that traceback in the program's own files (usercode.UserCode: outside the Python installation),
# read from the message (so `explain report.json` finds it too); the diagnosis names it, with the worker's
# message, and says where it was re-raised. Where no frame of the text is the program's (the error is
# torch's own collate), the re-raising line stays the culprit.
_WRAPPED = re.compile(r"Caught (?P<type>\w+) (?P<where>[^\n]*?)\.\nOriginal Traceback \(most recent call last\):\n")
_FRAME = re.compile(r'^  File "(?P<file>[^"\n]+)", line (?P<line>\d+), in ', re.M)


def _wrapped_site(message: str):
    """(file, line, where, the original's last line) of an exception re-raised from a worker, else None
    (NOTE [An exception re-raised from a DataLoader worker])."""
    m = _WRAPPED.search(message)
    if m is None:
        return None
    original = message[m.end():]
    last = original.rfind("Traceback (most recent call last):\n")
    if last >= 0:
        original = original[last:]
    user = UserCode(None)
    found = None
    for frame in _FRAME.finditer(original):
        if frame["file"] in user:
            found = frame["file"], int(frame["line"])
    if found is None:
        return None
    tail = [text for text in original.strip().splitlines() if text and not text.startswith(" ")]
    return found[0], found[1], m["where"], tail[-1] if tail else m["type"]


def _explain_line(ev: Evidence) -> dict | None:
    file, line, f = site(ev)
    exc = ev.exception or {}
    etype = f.get("exception_type") or exc.get("type") or "An exception"
    message = f.get("message") or exc.get("message") or ""
    wrapped = _wrapped_site(message) if ev.failure is None else None
    if wrapped is not None:  # NOTE [An exception re-raised from a DataLoader worker]
        wfile, wline, where_, original = wrapped
        text = (f"Not a tensor or autograd error: line {wline} (`{source.code(wfile, wline)}`) raised {original} "
                f"{where_}; torch re-raised it at line {line} (`{source.code(file, line)}`).")
        fix = (f"Fix the {etype} at line {wline} (`{source.code(wfile, wline)}`), which ran {where_}: it comes "
               "from the program's own Python logic, so tensorscope has no tensor fix to offer. With "
               "`num_workers=0` it is raised in the main process, where a debugger can stop at it.")
        return diagnosis(KIND, explanation=text, fix=fix, culprit=where(wfile, wline),
                         evidence=[f"exception: {etype}: {message[:300]}"])
    code = source.code(file, line)
    lib = f.get("library")
    raised = exc.get("raised_in") if ev.failure is None and line else None
    inside = f" inside {_called(raised)}" if raised else ""
    text = f"Line {line} (`{code}`) raised {etype}{inside}: {message}" if line \
        else f"The program raised {etype}: {message}"
    if lib:
        text += f" (inside {lib})"
    if ev.failure is None and not (ev.parsed is not None and ev.parsed.fields.get("reason")):
        # no tensor op raised it and PyTorch's wording is not in it: say so instead of inventing a tensor fix
        text = f"Not a tensor or autograd error: {text[0].lower() + text[1:]}"
    fix = _other_fix(message, file, line, ev)
    return diagnosis(KIND, explanation=text, fix=fix, culprit=where(file, line, alias=f.get("alias")),
                     evidence=[f"exception: {etype}: {message[:300]}"])


def _other_fix(message: str, file, line, ev: Evidence) -> str:
    m = re.search(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", message)
    if m:
        return (f"The input has {m[2]} features but the layer expects {m[3]}: make the last dimension of the input "
                f"{m[3]}, or build the layer as `nn.Linear({m[2]}, {m[4]})`.")
    m = re.search(r"target size \(torch\.Size\(\[([\d, ]*)\]\)\) that is different to the input size "
                  r"\(torch\.Size\(\[([\d, ]*)\]\)\)", message)
    if m:
        return (f"The target has shape [{m[1]}] and the prediction [{m[2]}]: make them equal, e.g. "
                "`target.unsqueeze(1)` / `target.view_as(pred)` or `pred.squeeze(1)`.")
    fields = ev.parsed.fields if ev.parsed is not None else {}
    if fields.get("reason") == "expand-size-mismatch":
        return ("expand() can only stretch dimensions of size 1: reshape the tensor first, or use `repeat` for "
                "real copies.")
    if fields.get("reason") == "as-strided-out-of-bounds":
        return ("The sizes and strides given to as_strided() reach past the end of the storage: choose sizes and "
                "strides within it.")
    if fields.get("reason") == "inference-tensor-inplace":
        return "Clone the tensor created under torch.inference_mode() before writing into it (`t = t.clone()`)."
    if ev.failure is None:
        where_ = f" at line {line} (`{source.code(file, line)}`)" if line else ""
        etype = ev.exception.get('type') if ev.exception else 'exception'
        raised = (ev.exception or {}).get("raised_in") if line else None
        if raised:  # NOTE [An exception a library raised at the program's line] in session.py
            return (f"Not a tensor or autograd error: the {etype}{where_} was raised inside {_called(raised)}, "
                    "which that line calls: the library refused what the program gave it. Do what its message "
                    "above asks (the arguments, the file or the setting it names); tensorscope has no tensor fix "
                    "to offer.")
        return (f"Not a tensor or autograd error: the {etype}"
                f"{where_} comes from the program's own Python logic, so tensorscope has no tensor fix to offer; "
                "fix it as a plain Python error.")
    return (f"PyTorch refused the op at line {line} (`{source.code(file, line)}`): give it the arguments its message "
            "above asks for (shapes, dtypes, devices).") if line else "Read the message above."


def _called(raised: dict) -> str:
    """``torch.load`` (torch.serialization.load, raised at torch/serialization.py:1609): the library call of an
    exception's ``raised_in`` (NOTE [An exception a library raised at the program's line] in session.py)."""
    call, function = raised.get("call"), raised.get("function")
    at = f"raised at {raised.get('file')}:{raised.get('line')}"
    if call and function and function != call:
        return f"`{call}` ({function}, {at})"
    return f"`{call or function}` ({at})"


def explain(ev):
    """The diagnosis of this kind from the evidence, opening with what it is not."""

    reason = fields(ev).get("reason")
    if reason in _AUTOGRAD_MISUSE:

        at = opening(ev)
        if at is not None:
            file, line, f, code = at
            title, what, fix = _AUTOGRAD_MISUSE[reason]
            return diagnosis(KIND, title=title, explanation=f"Line {line} (`{code}`) {what}.", fix=fix,
                             culprit=where(file, line, alias=f.get("alias")),
                             evidence=[f"an autograd misuse no failure kind covers ({reason})"])
    d = _explain_line(ev)
    text = (d or {}).get("explanation") or ""
    if d is not None and not text.startswith("Not a tensor or autograd") and fields(ev).get("reason") in _NOT_AUTOGRAD:
        d["explanation"] = "Not an autograd failure: " + text[:1].lower() + text[1:]
    return d
