"""The `ctx-attribute-changed` kind: a custom Function kept a tensor as a ctx attribute (not `save_for_backward`) and it was written in place before backward, so the gradient used the new values.

The instrumentation records the tensors a Function's ctx holds as attributes after ``apply``, the
writes into their memory, and checks at the node's backward (a pre-hook) whether one was written (see
NOTE [Shared state] in instrument/sharedstate.py).
"""

from __future__ import annotations

from tensorscope.kinds._base import Evidence, Kind, diagnosis, where
from tensorscope.source import code_at

KIND = Kind(
    code="ctx-attribute-changed",
    title="A tensor a custom Function kept as a ctx attribute was written in place before backward, so its gradient is wrong.",
    explanation=(
        "`ctx.save_for_backward(x)` records `x`'s version and backward raises if `x` was modified in place "
        "since. A tensor stored as a plain attribute (`ctx.x = x`) has no such check: a later in-place write "
        "(`x.mul_(2)`, `x.data.clamp_()`, the optimizer step) changes what backward reads, and the gradient "
        "is computed from the new values without any error."
    ),
    causes=(
        "`ctx.x = x` in a custom `torch.autograd.Function.forward`, then `x` written in place before backward.",
    ),
    fixes=(
        "Save tensors with `ctx.save_for_backward(x)` and read `ctx.saved_tensors` (a write then raises).",
        "Or keep a copy: `ctx.x = x.detach().clone()`.",
    ),
    hazard=True,
)


def explain(ev: Evidence, hazard: dict):
    kept = hazard.get("kept") or {}
    writes = hazard.get("writes") or []
    if not writes:
        return None
    first = writes[0]
    kfile, kline = kept.get("file"), kept.get("line")
    attr, fn = hazard.get("attr") or "ctx attribute", hazard.get("function") or "a custom Function"
    wfile, wline = first.get("file"), first.get("line")
    back = hazard.get("backward") or {}
    tid = hazard.get("tensor")
    by = f" ({first['library']})" if first.get("library") else ""
    explanation = (
        f"`{fn}.forward`, called at line {kline} (`{code_at(kfile, kline)}`), kept a tensor as `{attr}` instead "
        f"of `ctx.save_for_backward`. Line {wline} (`{code_at(wfile, wline)}`{by}) then wrote into its memory in "
        f"place, and backward" + (f" (line {back.get('line')})" if back.get("line") else "")
        + f" read the new values through `{attr}`: no version counter is checked for an attribute, so the "
        "gradient is computed from values the forward never saw, and nothing raised."
    )
    name = attr.split(".", 1)[-1].split("[")[0]
    return diagnosis(
        KIND,
        explanation=explanation,
        fix=(f"In `{fn}.forward`, save it with `ctx.save_for_backward(...)` and read `ctx.saved_tensors` in "
             f"backward (a later in-place write then raises), or keep a copy: `ctx.{name} = {name}.detach().clone()`."),
        culprit=where(wfile, wline, alias=first.get("alias")),
        backward=where(back.get("file"), back.get("line")),
        tensor={"id": tid, "names": ev.tensor_names(tid), "version_at_save": None, "version_now": None},
        alias_chain=[d for d in (where(kfile, kline, what=f"kept as `{attr}` by `{fn}.apply`: no version check"),) if d],
        evidence=[f"`{attr}` of {hazard.get('node') or fn} written at line {wline} after forward (line {kline}) "
                  "and read by its backward"],
    ) | {"kept_at": where(kfile, kline, how="ctx attribute")}
