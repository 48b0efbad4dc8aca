"""Measure, with plain torch, where a corpus program's first non-finite value appears (the truth its header states).

    python tests/corpus_nonfinite/measure.py PROG.py [PROG.py ...]

Independent of tensorscope: the forward side is a line tracer that, after each line of the
program's file, looks for a tensor among the frame's locals that holds a NaN/Inf and was not
non-finite before; the backward side turns on anomaly mode (for each node's forward traceback,
``check_nan`` off) and hooks every node of the graph given to backward(): the first node whose
gradient outputs are non-finite while the gradients it received are finite, at the forward line
anomaly mode recorded for it. Prints ``PROG: line=N phase=forward|backward node=NAME`` for the
first of the two in time, or ``PROG: clean``.
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


if __name__ == "__main__":
    for p in sys.argv[1:]:
        print(f"{os.path.basename(p)}: {measure(p)}", flush=True)
