"""Measure, with plain torch, where a corpus program's first non-finite value appears (the truth its header states).

    python tests/corpus_nonfinite/measure.py PROG.py [PROG.py ...]

Independent of tensorscope: the forward side is a line tracer that, after each line of the
program's file, looks for a tensor among the frame's locals that holds a NaN/Inf and was not
non-finite before; the backward side turns on anomaly mode (for each node's forward traceback,
``check_nan`` off) and hooks every node of the graph given to backward(): the first node whose
gradient outputs are non-finite while the gradients it received are finite, at the forward line
anomaly mode recorded for it. Prints ``PROG: line=N phase=forward|backward node=NAME`` for the
first of the two in time, or ``PROG: clean``.

    python tests/corpus_nonfinite/measure.py --sinks PROG.py [PROG.py ...]

The sinks a plain ``tensorscope run`` checks, measured the same way: after the program's own lines call
``backward()`` (the loss given to it), after backward returns (the ``.grad`` of every leaf its graph
reached) and after each optimizer ``step()`` (every parameter of the optimizer). Prints
``PROG: sink=loss|grad|parameter line=N step=K`` for the first that held a NaN or Inf, where a gradient
counts only if the step after it did not leave the parameters finite (the program skipped or repaired
it, as a loss scaler does), or ``PROG: clean``. Run one program per process: a program may leave torch's
global state changed (grad mode, default dtype) for the next.
"""

from __future__ import annotations

import os
import runpy
import sys

import torch


def _bad(t) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) and t.numel() > 0 \
        and not bool(torch.isfinite(t.detach()).all())


def measure(path: str) -> str:
    path = os.path.abspath(path)
    found: list = []
    seen_bad: set = set()
    last_line: dict = {}

    def tracer(frame, event, arg):
        if frame.f_code.co_filename != path:
            return tracer
        if event in ("line", "return") and not found:
            for name, v in list(frame.f_locals.items()):
                if _bad(v) and id(v) not in seen_bad:
                    seen_bad.add(id(v))
                    found.append(("forward", last_line.get(id(frame), frame.f_lineno), None))
                    break
        last_line[id(frame)] = frame.f_lineno
        return tracer

    real_backward = torch.autograd.backward

    def backward(tensors, *args, **kwargs):
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        stack = [r.grad_fn for r in roots if r.grad_fn is not None]
        seen = set()
        while stack:
            node = stack.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))

            def hook(grad_inputs, grad_outputs, node=node):
                if found:
                    return
                if any(_bad(g) for g in grad_inputs if g is not None) and \
                        not any(_bad(g) for g in grad_outputs if g is not None):
                    line = _forward_line(node.metadata.get("traceback_") or [], path)
                    found.append(("backward", line, node.name()))
            try:
                node.register_hook(hook)
            except Exception:
                pass
            stack.extend(n for n, _ in node.next_functions if n is not None)
        return real_backward(tensors, *args, **kwargs)

    torch.autograd.backward = backward
    torch.autograd.set_detect_anomaly(True, check_nan=False)
    sys.settrace(tracer)
    try:
        runpy.run_path(path, run_name="__main__")
    except BaseException:
        pass
    finally:
        sys.settrace(None)
        torch.autograd.backward = real_backward
    if not found:
        return "clean"
    phase, line, node = found[0]
    return f"line={line} phase={phase}" + (f" node={node}" if node else "")


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
    out, seen, stack = [], set(), [r.grad_fn for r in roots if r.grad_fn is not None]
    out += [r for r in roots if r.grad_fn is None and r.requires_grad]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
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


if __name__ == "__main__":
    args = sys.argv[1:]
    fn = sinks if args and args[0] == "--sinks" else measure
    for p in args[1:] if fn is sinks else args:
        print(f"{os.path.basename(p)}: {fn(p)}", flush=True)
