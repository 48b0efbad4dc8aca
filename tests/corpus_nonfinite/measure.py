"""Measure, with plain torch, where a corpus program's first non-finite value appears (the truth its header states).

    python tests/corpus_nonfinite/measure.py PROG.py [PROG.py ...]

Independent of tensorscope: the forward side is a line tracer that, after each line of the
program's file, looks for a tensor among the frame's locals that holds a NaN/Inf and was not
non-finite before (a line that writes an infinity on purpose, ``masked_fill(mask, float("-inf"))``,
is passed over: the NaN a softmax then makes of an all-masked row is born at the softmax); the
backward side turns on anomaly mode (for each node's forward traceback, ``check_nan`` off) and hooks
every node of the graph given to backward(): the first node whose gradient outputs are non-finite
while the gradients it received are finite, at the forward line anomaly mode recorded for it; or,
seen by a pre hook, a node whose input (the engine's sum of its uses' gradients, each finite) is not
finite, or a leaf's ``.grad`` that a finite gradient makes non-finite across backward calls: the
first use's forward line, with every use's line (``summed=``). Prints
``PROG: line=N phase=forward|backward node=NAME`` for the first of the two in time, or ``PROG: clean``.

    python tests/corpus_nonfinite/measure.py --sinks PROG.py [PROG.py ...]

The sinks a plain ``tensorscope run`` checks, measured the same way: after the program's own lines call
``backward()`` (the loss given to it), after backward returns (the ``.grad`` of every leaf its graph
reached) and after each optimizer ``step()`` (every parameter of the optimizer). Prints
``PROG: sink=loss|grad|parameter line=N step=K`` for the first that held a NaN or Inf, where a gradient
counts only if the step after it did not leave the parameters finite (the program skipped or repaired
it, as a loss scaler does), or ``PROG: clean``. Run one program per process: a program may leave torch's
global state changed (grad mode, default dtype) for the next.

    python tests/corpus_nonfinite/measure.py --truth PROG.py [PROG.py ...]

Both, as ``truth(path)`` gives them to score.py, in one process (torch's global state put back after each
program): the fields a header states that the running torch can tell (``kind``, ``line``, ``phase``, ``node``
for a backward origin, ``summed``, ``sink``, ``sink_line``, ``sink_step``), ``{}`` for a program in which
torch made no NaN or Inf, or made one that reached no sink and that the program did not raise on (handled on
purpose). The kind is ``non-finite-value`` when the program raised, ``silent-non-finite-value`` when it went
on. The headers were measured on torch 2.13; a release whose own ops make no NaN where 2.13's did (``acos``
at exactly 1 on 2.15) is told apart by this measure, not by tensorscope.
"""

from __future__ import annotations

import functools
import io
import linecache
import os
import re
import runpy
import sys

import torch


# a line that writes an infinity on purpose (a mask before a softmax): its -inf is not where a NaN was born
_WRITES_INF = re.compile(r"\b(masked_fill_?|fill_|full|full_like|new_full|where)\(.*\binf\b")


def _bad(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and t.numel() > 0 \
        and not bool(torch.isfinite(t.detach()).all())


def measure(path: str, raised: list | None = None) -> str:
    path = os.path.abspath(path)
    found: list = []
    seen_bad: set = set()
    last_line: dict = {}

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != path:
            return tracer
        if event in ("line", "return") and not found:
            line = last_line.get(id(frame), frame.f_lineno)
            for name, v in list(frame.f_locals.items()):
                if _bad(v) and id(v) not in seen_bad:
                    seen_bad.add(id(v))
                    if not _WRITES_INF.search(linecache.getline(path, line)):
                        found.append(("forward", line, None, None))
                        break
        last_line[id(frame)] = frame.f_lineno
        return tracer

    real_backward = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        stack = [r.grad_fn for r in roots if r.grad_fn is not None]
        seen: dict = {}  # the nodes kept: a node's Python object dies with its last reference, and its id is reused
        producers: dict = {}  # id(node) -> the nodes whose gradients the engine adds up as its input, one per edge
        handles = []
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen[id(node)] = node

            def hook(grad_inputs, grad_outputs, node=node):
                if found:
                    return
                if any(_bad(g) for g in grad_inputs if g is not None) and \
                        not any(_bad(g) for g in grad_outputs if g is not None):
                    line = _forward_line(node.metadata.get("traceback_") or [], path)
                    found.append(("backward", line, node.name(), None))
            try:
                handles.append(node.register_hook(hook))
            except Exception:
                pass
            for n, _ in node.next_functions:
                if n is not None:
                    producers.setdefault(id(n), []).append(node)
                    stack.append(n)
        for key, node in seen.items():
            made_by = producers.get(key, [])
            if len(made_by) >= 2 or (made_by and hasattr(node, "variable")):
                handles.append(node.register_prehook(functools.partial(_summed, node, made_by, found, path)))
        try:
            return real_backward(tensors, *args, **kwargs)
        finally:
            for h in handles:
                h.remove()

    torch.autograd.backward = backward
    torch.autograd.set_detect_anomaly(True, check_nan=False)
    sys.settrace(tracer)
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:
        if raised is not None:
            raised.append(True)
    finally:
        sys.settrace(None)
        torch.autograd.backward = real_backward
    if not found:
        return "clean"
    phase, line, node, summed = found[0]
    return f"line={line} phase={phase}" + (f" node={node}" if node else "") \
        + (f" summed={','.join(map(str, summed))}" if summed else "")


def _summed(node, made_by, found, path, grad_outputs):
    """A node's pre hook: the gradient it received is the engine's sum of its producers' (each checked finite by
    its own hook first); a leaf's ``.grad`` also adds it to what earlier backward calls left there."""
    if found:
        return
    got = [g for g in grad_outputs if g is not None]
    first = min(made_by, key=lambda n: n._sequence_nr())  # the use made first in the forward pass
    lines = sorted({_forward_line(n.metadata.get("traceback_") or [], path) for n in made_by} - {None})
    line = _forward_line(first.metadata.get("traceback_") or [], path)
    if any(_bad(g) for g in got):
        if len(made_by) >= 2:  # finite contributions, a non-finite sum: the engine's addition made it
            found.append(("backward", line, node.name(), lines))
    elif hasattr(node, "variable"):
        old = node.variable.grad
        if old is not None and not _bad(old) and any(_bad(old + g) for g in got):
            found.append(("backward", line, node.name(), lines))  # accumulated into .grad across backward calls


def _forward_line(tb_text, path):
    line = None
    for chunk in tb_text if isinstance(tb_text, list) else [tb_text]:
        for raw in str(chunk).splitlines():
            raw = raw.strip()
            if raw.startswith(f'File "{path}", line '):
                line = int(raw.split("line ")[1].split(",")[0])
    return line


def _caller_line(path):
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename != path:
        f = f.f_back
    return f.f_lineno if f is not None else None


def _leaves(roots):
    out, seen, stack = [], {}, [r.grad_fn for r in roots if r.grad_fn is not None]
    out += [r for r in roots if r.grad_fn is None and r.requires_grad]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node  # kept, so that no other node reuses its id (see measure)
        v = getattr(node, "variable", None)
        if v is not None:
            out.append(v)
        stack.extend(n for n, _ in node.next_functions if n is not None)
    return out


def sinks(path: str) -> str:
    path = os.path.abspath(path)
    found: list = []
    pending: list = []  # a non-finite gradient, kept until a step settles it
    counts = {"backward": 0, "step": 0}
    real_backward = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        line = _caller_line(path)
        if not found and any(_bad(r) for r in roots):
            found.append(("loss", line, counts["backward"]))
        try:
            return real_backward(tensors, *args, **kwargs)
        finally:
            counts["backward"] += 1
            if not found:
                grads = [v.grad for v in _leaves(roots) if v.grad is not None]
                if any(_bad(g) for g in grads):
                    if not pending:
                        pending.append(("grad", line, counts["backward"] - 1))
                else:
                    pending.clear()  # later gradients finite: the program recovered

    def post_step(optimizer, args, kwargs):
        counts["step"] += 1
        if found:
            return
        params = [p for g in optimizer.param_groups for p in g["params"]]
        if any(_bad(p) for p in params):  # the gradients it applied, when they were not finite, came first
            found.append(pending[0] if pending else ("parameter", _caller_line(path), counts["step"] - 1))
        else:
            pending.clear()  # the step left the parameters finite: the gradients were handled

    from torch.optim.optimizer import register_optimizer_step_post_hook
    handle = register_optimizer_step_post_hook(post_step)
    torch.autograd.backward = backward
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:
        pass
    finally:
        torch.autograd.backward = real_backward
        handle.remove()
    first = found[0] if found else pending[0] if pending else None
    if first is None:
        return "clean"
    return f"sink={first[0]} line={first[1]} step={first[2]}"


def _fields(text: str) -> dict:
    return {} if text == "clean" else dict(part.split("=", 1) for part in text.split())


def _isolated(fn, *args):
    """``fn(*args)`` with torch's global state (grad mode, default dtype, anomaly mode) and the process's
    output put back after it: one program must not change the next one's truth."""
    grad, dtype, anomaly = torch.is_grad_enabled(), torch.get_default_dtype(), torch.is_anomaly_enabled()
    out, err = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = io.StringIO()
    try:
        return fn(*args)
    finally:
        sys.stdout, sys.stderr = out, err
        torch.set_grad_enabled(grad)
        torch.set_default_dtype(dtype)
        torch.autograd.set_detect_anomaly(anomaly)


def truth(path: str) -> dict:
    """What the running torch says of the program: the header's fields it can measure (see the module's doc)."""
    raised: list = []
    origin = _fields(_isolated(measure, path, raised))
    if not origin:
        return {}
    sink = _fields(_isolated(sinks, path))
    if not sink and not raised:  # made and dropped on purpose (a mask's -inf under a softmax): no finding
        return {}
    out = {"kind": "non-finite-value" if raised else "silent-non-finite-value", "line": origin["line"],
           "phase": origin["phase"]}
    if "node" in origin:
        out["node"] = origin["node"]
    if "summed" in origin:
        out["summed"] = origin["summed"]
    if sink:
        out.update(sink=sink["sink"], sink_line=sink["line"], sink_step=sink["step"])
    else:
        out["sink"] = "none"
    return out


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--truth":
        for p in args[1:]:
            t = truth(p)
            print(f"{os.path.basename(p)}: " + (" ".join(f"{k}={v}" for k, v in t.items()) or "clean"), flush=True)
        sys.exit(0)
    fn = sinks if args and args[0] == "--sinks" else measure
    for p in args[1:] if fn is sinks else args:
        print(f"{os.path.basename(p)}: {fn(p)}", flush=True)
