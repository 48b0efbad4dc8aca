"""The `non-finite-value` kind: the program raised on a NaN or Inf; where that value was first made.

The facts come from instrument/nonfinite.py (NOTE [Checking values at the sinks], NOTE [Origin of a
non-finite value]); everything here is torch-free. ``finding`` builds the diagnosis (this kind) and
the hazard (``silent-non-finite-value``, a NaN that only flowed on) from the same facts.

NOTE [Non-finite values handled on purpose]
A NaN or Inf is reported only when it reaches a *sink*: the loss given to backward(), the gradients
that backward left on the leaves when no later backward left them finite again (a GradScaler that
skips the step recovers at the next step), the parameters after an optimizer step, or the exception
that ended the program (a loss check, an assertion, anomaly mode's error). A value the program made
non-finite on purpose and then removed never reaches one: ``masked_fill(mask, -inf)`` before a
softmax over rows that keep a finite entry (the softmax's output is finite), ``nan_to_num``, the
double-``where`` trick (the unselected branch sees a safe input, so backward makes no NaN),
filtering with ``x[torch.isfinite(x)]``, and ``GradScaler``'s finite check that skips the step (the
parameters stay finite and the next step's gradients are finite). tests/test_nonfinite.py runs one
program of each.
"""

from __future__ import annotations

import ast
import os
import re

from tensorscope import source
from tensorscope.kinds._base import Kind, Pattern, diagnosis, statement, w, where
from tensorscope.source import display_path

KIND = Kind(
    code="non-finite-value",
    title="The program stopped on a NaN or Inf; the first non-finite value was made earlier, at the origin line.",
    explanation=(
        "A NaN or Inf spreads through every op that reads it, so the line that raises (a loss check, an "
        "assertion, anomaly mode's \"returned nan values\") is rarely the one that made it. The origin is "
        "the first op whose output was non-finite while its inputs were finite: log or division at 0, sqrt "
        "or acos at the boundary of its domain in backward, a softmax over a row that is all -inf, a "
        "float16 overflow, an optimizer step that diverged, or a NaN already in the data."
    ),
    causes=(
        "`log`, division or `rsqrt` of a value that is 0 (or negative) for some element.",
        "`sqrt`, `pow(x, 0.5)`, `acos`/`asin` whose backward is infinite at the edge of the domain.",
        "A softmax over a row whose every entry is masked with -inf.",
        "A float16/bfloat16 op whose result exceeds the dtype's range.",
        "A learning rate that makes the parameters diverge after some steps.",
        "NaN in the input data.",
    ),
    fixes=(
        "Keep the op's input inside its domain: `eps` in a division or norm, `clamp` before `log`/`sqrt`/`acos`.",
        "Use the double-`where` trick when a branch that `torch.where` does not select is non-finite at the input.",
        "Compute in float32 where float16 overflows (or let autocast and GradScaler do it).",
        "Lower the learning rate or clip the gradient norm.",
        "Clean the data where it is loaded (`torch.nan_to_num`, or drop the rows that are not finite).",
    ),
)

HAZARD = Kind(
    code="silent-non-finite-value",
    title="A NaN or Inf reached the loss, the gradients or the parameters, and the program went on.",
    explanation=KIND.explanation,
    causes=KIND.causes,
    fixes=KIND.fixes,
    hazard=True,
)


def _node_op(m) -> dict:
    return {"node": m.group("node"), "value": m.group("value")}


_PAREN = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # a parenthesis, two levels of nesting inside


def _dist_param(m):
    """torch.distributions' argument validation: only a NaN or an Inf among the values shown is this kind (a
    negative scale, a probability past 1 are out of the constraint with finite values)."""
    shown = m.group("shown")
    value = "nan" if re.search(r"\bnan\b", shown) else "inf" if re.search(r"\binf\b", shown) else None
    if value is None:
        return None
    out = {"value": value, "distribution": m.group("dist")}
    if m.group("param"):
        out["param"] = m.group("param")
    return out


PATTERNS = (
    # torch/csrc/autograd/engine.cpp, anomaly mode with check_nan
    Pattern(w("Function '") + r"(?P<node>\w+)'\s+returned\s+(?P<value>nan|inf)\s+values\s+in\s+its\s+\d+(?:st|nd|rd|th)\s+output",
            _node_op),
    # torch/distributions/distribution.py, validate_args (on by default): a parameter or a value holding NaN
    Pattern(r"Expected\s+(?:parameter\s+(?P<param>\w+)|value\s+argument)\s+" + _PAREN + r"\s+(?:of|to\s+be\s+within"
            r"\s+the\s+support\s+" + _PAREN + r"\s+of)\s+(?:the\s+)?distribution\s+(?P<dist>\w+)\([\s\S]{0,2000}?but\s+found"
            r"\s+invalid\s+values:?(?P<shown>[\s\S]{0,600})", _dist_param),
)

# forward op -> backward node names seen in torch 2.x
_NODE_OP = re.compile(r"^(?:Linalg)?(?P<op>[A-Z][A-Za-z0-9]*?)(?:Backward\d*|Backward)$")

_LOG = {"log", "log2", "log10", "log1p", "xlogy", "logit", "digamma", "lgamma", "polygamma"}
_SQRT = {"sqrt", "rsqrt", "pow", "vector_norm", "norm", "linalg_vector_norm", "cdist", "dist", "frobenius_norm"}
_TRIG = {"acos", "asin", "atanh", "acosh", "arccos", "arcsin"}
_DIV = {"div", "true_divide", "reciprocal", "remainder", "fmod", "floor_divide"}
_SOFTMAX = {"_softmax", "softmax", "_log_softmax", "log_softmax", "logsumexp"}
_VAR = {"std", "var", "std_mean", "var_mean"}
_NLL = {"nll_loss", "nll_loss_forward", "nll_loss2d", "nll_loss2d_forward", "nll_loss_nd", "cross_entropy",
        "cross_entropy_loss"}
_NORMS = {"native_layer_norm", "layer_norm", "native_group_norm", "group_norm", "native_batch_norm", "batch_norm",
          "rms_norm", "_fused_rms_norm"}
_FMAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308, "bfloat16": 3.3895313892515355e38}
_LOW = ("float16", "bfloat16")
# the statement keeps some entries of a call's result by an index or a mask: ``torch.log1p(a)[keep]``
_SELECTED_AFTER = re.compile(r"\)\s*\[[^\]]+\]|masked_select\(")


def base_op(origin: dict) -> str:
    """The op's short name in lower case: ``aten.log`` -> ``log``; a backward node -> its forward op."""
    node = origin.get("node")
    if node and origin.get("custom_function") and origin.get("op"):
        return origin["op"].split(".")[-1]  # the program's class names no op: the op inside its backward does
    if node:
        m = _NODE_OP.match(node)
        if m:
            return _snake(m.group("op"))
    return (origin.get("op") or "").split(".")[-1]


def _snake(name: str) -> str:
    """``LogSoftmax`` -> ``log_softmax``; a capital after a digit starts no word (``Log1P`` -> ``log1p``,
    ``MaxPool2DWithIndices`` -> ``max_pool2d_with_indices``)."""
    return re.sub(r"(?<!^)(?<![0-9])(?=[A-Z])", "_", name).lower()


def fix_for(origin: dict, code: str, data_code: str = "") -> str:
    """A fix in words fitted to the origin op (torch-free)."""
    op = base_op(origin)
    aten = (origin.get("op") or "").split(".")[-1]
    line = origin.get("line")
    at = f" at line {line}" if line else ""
    inputs = origin.get("inputs") or []
    zeros = any((i.get("zeros") or 0) > 0 for i in inputs)
    negs = any((i.get("negatives") or 0) > 0 for i in inputs)
    dtype = origin.get("dtype") or (inputs[0].get("dtype") if inputs else "")
    if origin.get("phase") == "optimizer" and origin.get("optimizer"):
        return (f"The {origin['optimizer']} step{at} made a parameter non-finite from finite gradients: lower the "
                "learning rate (or warm it up), clip the gradients (`torch.nn.utils.clip_grad_norm_`), and keep the "
                "optimizer's `eps` above 0 (1e-8 underflows to 0 in float16).")
    if origin.get("data"):
        where_ = f"line {origin.get('data_line')} (`{data_code}`)" if origin.get("data_line") and data_code else \
            f"the data read{at}"
        return (f"The non-finite value came in with the input made at {where_}: clean it where it is loaded "
                "(`x = torch.nan_to_num(x)`, or drop the rows where `~torch.isfinite(x).all(dim=1)`), and check "
                "it once with `assert torch.isfinite(x).all()`.")
    if origin.get("sum"):
        return _sum_fix(origin, dtype)
    if origin.get("phase") == "optimizer":
        return ("The optimizer step made the parameters non-finite: the updates diverged. Lower the learning "
                "rate, clip the gradients before `step()` with `torch.nn.utils.clip_grad_norm_(model.parameters(), "
                "1.0)`, or add a warm-up.")
    if origin.get("phase") == "backward" and "where(" in (code or "") and op not in _SOFTMAX:
        return (f"`torch.where` at line {line} selects the other branch where `{op}` is not finite, but backward "
                "still multiplies that branch's infinite local gradient by 0, which is NaN. Use the double-`where` "
                f"trick: feed the `{op}` a safe value where it is not selected, e.g. "
                f"`torch.where(mask, torch.{op}(torch.where(mask, x, 1.0)), 0.0)`.")
    if origin.get("phase") == "backward" and op not in _SOFTMAX and _SELECTED_AFTER.search(code or "") \
            and re.search(rf"\b{re.escape(op)}\(", code or ""):
        return (f"`{op}` at line {line} runs on every entry and an index or mask then drops the entries where it is "
                "not finite, but backward still multiplies their infinite local gradient by 0, which is NaN: select "
                f"first and apply `{op}` to the kept entries only (`torch.{op}(x[keep])`), or feed it a safe value "
                f"where it is dropped (`torch.{op}(torch.where(keep, x, 1.0))[keep]`).")
    if op in _LOG and origin.get("phase") == "backward" and not origin.get("custom_function") \
            and op in ("log", "log2", "log10"):
        # the backward divides the incoming gradient by the forward input: a tiny positive input overflows 1/x
        # (the gradient's own sign says nothing about the input's domain)
        pos = [i.get("min") for i in inputs if isinstance(i.get("min"), (int, float)) and i.get("min") >= 0]
        near = f" (the smallest input here is {min(pos):.3g})" if pos and min(pos) > 0 else ""
        return (f"`{op}`'s gradient (1/x) is not finite where its input is 0 or close to it{near}{at}: clamp its "
                f"input first, e.g. `torch.{op}(x.clamp_min(1e-8))`, or add an eps (`x + 1e-8`); for a loss on "
                "probabilities use the logits form (`F.binary_cross_entropy_with_logits`, `F.cross_entropy`, "
                "`F.log_softmax`).")
    if op in _LOG and origin.get("phase") == "forward" and re.search(r"softmax|logsumexp", origin.get("read_by") or ""):
        return (f"`{op}` of 0 is -inf{at}, and a softmax over a row whose every entry is -inf is NaN: a 0/1 mask added "
                "as `x + torch.log(mask)` with a row all 0 does that. Mask with a large finite value instead, "
                "`x.masked_fill(mask == 0, torch.finfo(x.dtype).min)` (or `x + (1 - mask) * torch.finfo(x.dtype).min`), "
                "and keep one unmasked entry per row or zero the fully masked rows afterwards.")
    if op in _LOG:
        what = "0" if zeros and not negs else "negative values" if negs and not zeros else "0 or negative values"
        return (f"`{op}` of {what} is not finite{at}: clamp its input first, e.g. `torch.{op}(x.clamp_min(1e-8))`, "
                "or add an eps (`x + 1e-8`); for a loss on probabilities use the logits form "
                "(`F.binary_cross_entropy_with_logits`, `F.cross_entropy`, `F.log_softmax`).")
    if op in _TRIG:
        return (f"`{op}` has an infinite derivative at the edge of its domain ([-1, 1]){at}: clamp inside it, "
                f"e.g. `torch.{op}(x.clamp(-1 + 1e-7, 1 - 1e-7))`.")
    if op == "pow" and origin.get("phase") == "forward" and negs and origin.get("value") == "nan":
        return (f"`pow` of a negative value with a fractional exponent is NaN{at}: for an odd root keep the sign "
                "apart (`x.sign() * x.abs().pow(e)`), else make the base non-negative first (`x.clamp_min(0)`, "
                "`x.abs()`).")
    if op in ("sqrt", "rsqrt") and origin.get("phase") == "forward" and not origin.get("custom_function"):
        if origin.get("value") == "nan":
            return (f"`{op}` of a negative value is NaN{at}. A variance computed as `E[x**2] - E[x]**2` cancels to a "
                    "small negative number in float32 when the values are large and nearly equal: use `x.var(dim, "
                    f"unbiased=False)` (two passes), or clamp first (`torch.{op}(v.clamp_min(0) + 1e-12)`).")
        if op == "rsqrt" and origin.get("value") in ("inf", "-inf"):
            return (f"`rsqrt` of 0 is inf{at}, and 0 * inf is NaN: a row that is all 0 (a padding embedding, a blank "
                    "input) has a mean square of 0. Add an eps inside, as `nn.RMSNorm`/`nn.LayerNorm` do: "
                    "`torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)`.")
    if op in _SQRT:
        if op in ("vector_norm", "norm", "linalg_vector_norm", "frobenius_norm", "cdist", "dist"):
            return (f"The norm's gradient is 0/0 where the vector is 0{at}: add an eps inside, e.g. "
                    "`torch.sqrt((x ** 2).sum(dim) + 1e-12)`, or use `F.normalize(x, eps=1e-12)` for `x / x.norm()`.")
        if origin.get("custom_function"):  # run inside the program's backward: its value, not its gradient
            return (f"`{op}` made a non-finite value from a 0 or a negative input{at}, in the custom Function's "
                    f"backward: clamp its input, e.g. `x.clamp_min(1e-12).{op}()`, and compare the backward with "
                    "`torch.autograd.gradcheck` on small inputs.")
        return (f"`{op}` of 0 has an infinite gradient (and of a negative value is NaN){at}: clamp its input, e.g. "
                "`torch.sqrt(x.clamp_min(1e-12))`, or add an eps inside (`torch.sqrt(x + 1e-12)`).")
    if op in ("ctc_loss", "_ctc_loss"):
        return (f"`ctc_loss`{at} is inf for a sample whose input is too short for its target (an input of length T "
                "aligns at most T labels, fewer when a label repeats, since a blank must separate the repeats): "
                "pass `zero_infinity=True` (`nn.CTCLoss(zero_infinity=True)`), or drop such samples "
                "(input length < target length + repeats) where the batches are made.")
    if op in ("eigh", "eig", "svd", "symeig", "eigvalsh", "linalg_eigh", "linalg_svd"):
        return (f"The gradient through `{op}`'s vectors{at} divides by the gaps between eigenvalues (singular "
                "values), infinite where two are equal (a degenerate matrix: a covariance of whitened features, an "
                "identity). Use only the values where that is enough (`torch.linalg.eigvalsh`, `svdvals`), or make "
                "them distinct (a small jitter on the diagonal: `A + 1e-4 * torch.diag(torch.arange(n))`).")
    if op in ("logdet", "det") and origin.get("value") in ("nan", None):
        return (f"`logdet` of a matrix with a negative determinant is NaN{at}: use `torch.linalg.slogdet(A)` "
                "(its `logabsdet`, with the sign apart), or build the matrix positive definite (`L @ L.T + eps * I`, "
                "a Cholesky factor with a positive diagonal).")
    if op in ("sub", "add", "rsub") and origin.get("phase") == "forward" and origin.get("value") in ("nan", None):
        return (f"`{op}`{at} met two infinities of opposite sign (inf - inf is NaN): a row that a mask filled with "
                "-inf in every entry, less its own maximum (-inf), as in a softmax written by hand over an all-padded "
                "sequence. Mask with a large finite value (`torch.finfo(x.dtype).min`) instead of -inf, keep one "
                "unmasked entry per row, or use `torch.softmax` and zero the fully masked rows afterwards.")
    if op == "mul" and origin.get("phase") == "forward" and origin.get("value") == "nan":
        return (f"`mul`{at} multiplied 0 by an infinity (0 * inf is NaN): find where the infinity was made (a "
                "division or `rsqrt` of 0, an overflow) and add an eps there, or mask with a finite value.")
    if op in ("amax", "max") and origin.get("phase") == "forward" and origin.get("value") == "-inf":
        return (f"The maximum of a row that is -inf in every entry (all masked){at} is -inf, and the `x - max` of a "
                "softmax written by hand is then -inf - -inf = NaN: mask with a large finite value "
                "(`torch.finfo(x.dtype).min`) instead of -inf, keep one unmasked entry per row, or use "
                "`torch.softmax` and zero the fully masked rows afterwards.")
    if op in _SOFTMAX:
        return (f"A row given to `{op}`{at} is -inf in every entry (all masked), so its softmax is 0/0 = NaN: keep "
                "at least one unmasked entry per row, mask with a large finite value "
                "(`torch.finfo(x.dtype).min`) instead of -inf, or zero the fully masked rows afterwards "
                "(`torch.nan_to_num(p)` / `p.masked_fill(all_masked[..., None], 0)`).")
    if op in _VAR:
        return (f"`{op}` with the default unbiased correction divides by n - 1, which is 0 for a single element{at}: "
                "pass `correction=0` (`unbiased=False`) or reduce over more than one element.")
    if (op in _NLL or aten in _NLL) and origin.get("phase") == "forward" \
            and not any(i.get("nonfinite") for i in inputs):
        # finite log-probabilities and a NaN loss: the mean divided 0 by a total weight of 0 (pytorch#70348)
        targets = [i for i in inputs if str(i.get("dtype") or "").startswith(("int", "uint"))]
        same = targets and targets[0].get("numel") and targets[0].get("min") == targets[0].get("max")
        said = f" (every target here is {targets[0]['min']:g})" if same else ""
        return (f"No target given to `{op}`{at} counts{said}: each equals `ignore_index` or has a class weight of 0, "
                "so reduction='mean' divides 0 by 0. Skip such a batch (`if (y != ignore_index).any():`), or "
                "average yourself: `F.cross_entropy(x, y, ignore_index=i, reduction='sum') / (y != i).sum()."
                "clamp_min(1)`.")
    if dtype in _LOW and origin.get("value") in ("inf", "-inf", "nan"):
        return (f"`{op}`{at} overflowed {dtype} (largest finite value 65504 for float16): compute it in float32 "
                "(`x.float()`, or under `torch.autocast`, which keeps such ops in float32), scale the values down, "
                "and use `torch.amp.GradScaler` for float16 training.")
    den = inputs[-1] if inputs else {}
    if (op in _DIV or aten in _DIV) and origin.get("phase") == "backward" and den.get("zeros") == 0 \
            and den.get("negatives") == 0 and isinstance(den.get("min"), (int, float)) and den["min"] > 0 \
            and origin.get("value") in ("inf", "-inf"):
        return (f"The gradient of a division (a / b**2 for the denominator) overflowed {dtype or 'its dtype'}{at}: "
                f"the denominator is not 0 but tiny (its smallest value here is {den['min']:.3g}). Keep it away from "
                "0 (`b.clamp_min(1e-6)`); for a softmax written by hand, subtract the maximum before `exp` or use "
                "`torch.softmax`.")
    if op in _DIV or aten in _DIV:
        return (f"A division by 0{at}: add an eps to the denominator (`a / (b + 1e-8)`, or `b.clamp_min(1e-8)`); "
                "for `x / x.norm(...)` use `F.normalize(x, eps=1e-12)`.")
    big = max((max(abs(i.get("min") or 0), abs(i.get("max") or 0)) for i in inputs), default=0.0)
    fmax = _FMAX.get(dtype)
    if origin.get("phase") == "backward" and not origin.get("custom_function") and fmax and big >= fmax ** 0.5 \
            and origin.get("value") in ("inf", "-inf", "nan"):
        norm = (" A normalisation over a row of equal values (a padded position, a constant input) multiplies the "
                "gradient by up to 1/sqrt(eps) at each layer (316 for eps=1e-5): leave such positions out of the "
                "loss (`ignore_index=PAD`, or a mask) or out of the normalisation.") if op in _NORMS else ""
        return (f"The gradient overflowed {dtype} in `{op}`'s backward{at}: it received a gradient of {big:.3g} "
                f"already (the largest finite value is {fmax:.3g}), grown layer after layer on the way back from the "
                f"loss.{norm} To see where it grows, print `g.abs().max()` from a `register_hook` on each layer's "
                "output; the usual causes are an initialisation that is too large, inputs that are not normalised, "
                "and a loss scale that is too high.")
    if op in ("exp", "expm1", "sinh", "cosh", "pow"):
        return (f"`{op}`{at} overflowed {dtype or 'its dtype'}: subtract the maximum before `exp` "
                "(`torch.logsumexp`, `F.softplus`, `F.log_softmax` do it for you), or scale the inputs down.")
    if op in ("mul", "matmul", "mm", "bmm", "addmm", "sum", "cumprod", "prod"):
        return (f"`{op}`{at} overflowed {dtype or 'its dtype'}: scale its inputs down (normalise the data, a smaller "
                "initialisation); a hand-made loss scale must come down when the loss or the gradients overflow "
                "(`torch.amp.GradScaler` checks for that and skips the step).")
    if origin.get("custom_function"):
        return (f"The custom Function's backward made it{at}: guard its divisions and logs (eps, clamp) as for the "
                "forward ops, and compare it with `torch.autograd.gradcheck` on small inputs.")
    return (f"Guard the inputs of `{op}`{at}: clamp them into its domain, or check them with "
            "`torch.isfinite(x).all()` where they are made.")


def _sum_fix(origin: dict, dtype: str) -> str:
    """The fix for a gradient that backward's own sum made non-finite (NOTE [Gradients the engine adds up] in
    instrument/grad_sums.py)."""
    fmax = "65504" if dtype == "float16" else f"{_FMAX[dtype]:.3g}" if dtype in _FMAX else "its largest value"
    if origin.get("sum") == "accumulated":
        return (f"Each backward's gradient was finite; their running sum in `.grad` passed {dtype or 'the dtype'}'s "
                f"range ({fmax}): divide each micro-batch's loss by the number of micro-batches before backward "
                "(`(loss / accum_steps).backward()`), keep the parameters in float32 (under `torch.autocast` their "
                "`.grad` is float32), or lower the loss scale (`torch.amp.GradScaler` checks the accumulated "
                "gradients before the step and skips it when they overflowed).")
    return (f"Each use's gradient was finite; their sum, which backward adds up itself, passed "
            f"{dtype or 'the dtype'}'s range ({fmax}): lower the loss scale (`torch.amp.GradScaler` lowers it by "
            "itself and skips the steps whose gradients overflowed), or keep the tensor and its gradient in float32 "
            "(float32 parameters under `torch.autocast`).")


def advise(fields: dict):
    """Advice from a pasted message (anomaly mode names the backward node)."""
    node = fields.get("node")
    value = fields.get("value") or "nan"
    if fields.get("distribution"):
        what = f"parameter `{fields['param']}`" if fields.get("param") else "value given to `log_prob`"
        return (f"The {what} of a `{fields['distribution']}` held {value}: torch.distributions' argument check "
                "raised on it, but the value was made earlier, where the network's output or the data first went "
                "non-finite."), [f"{fields['distribution']}'s {what} held {value}"], [
            "Run the program under `tensorscope explain`: it names the first op that made the non-finite value "
            "(often a division by a standard deviation of 0 in an observation normaliser, `(x - mean) / (std + "
            "1e-8)` is the fix, or a policy whose weights diverged: lower the learning rate, clip the gradients).",
            "Check the inputs where they are made (`assert torch.isfinite(obs).all()`); `validate_args=False` hides "
            "the error, not the NaN."]
    if not node:
        return None, [f"the message reports a {value} value"], [
            "Run the program under `tensorscope explain` (or `run --check-values`): it names the first op that "
            "made a non-finite value, its line, phase and input statistics."]
    origin = {"node": node, "phase": "backward", "value": value}
    op = base_op(origin)
    title = (f"Backward node {node} (the gradient of `{op}`) returned {value}: the forward op `{op}` saw inputs where "
             "its derivative is not finite.")
    return title, [f"backward node {node} returned {value} values (anomaly mode)"], [
        fix_for(origin, ""),
        "Anomaly mode checks only the outputs of backward nodes: `tensorscope explain PROG.py` also checks forward "
        "ops and the data, and names the first non-finite value's line, op, step and input statistics."]


# errors about a tensor's structure, which no value can cause (NOTE [An op that raised on a non-finite input])
_STRUCTURE = re.compile(r"(?i)\b(shapes?|sizes?|dimensions?|dims?|dtypes?|scalar type|devices?|cuda|cpu|"
                        r"broadcast\w*|out of (?:range|bounds)|index)\b")
_NANISH = re.compile(r"(?i)\b(nan|inf|infinite|non-?finite|isfinite|isnan|isinf|diverg\w*)\b")


def related(ev) -> bool:
    """Whether the exception that ended the program is about a non-finite value."""
    exc = ev.exception or {}
    nf = ev.nonfinite or {}
    if not nf:
        return False
    if exc.get("type") in (None, "KeyboardInterrupt", "SystemExit"):
        return False
    code = source.code(exc.get("file"), exc.get("line")) if exc.get("line") else ""
    if _NANISH.search(exc.get("message") or "") or _NANISH.search(code or ""):
        return True
    tested = nf.get("tested") or {}
    if tested.get("raised_on") and _STRUCTURE.search(exc.get("message") or ""):
        return False  # a shape, dtype or device error on a line that read a NaN: not caused by the value
    return bool(tested.get("line") and exc.get("line") and tested.get("file") == _abs(ev, exc.get("file"))
                and 0 <= exc["line"] - tested["line"] <= 3)


def _abs(ev, file):
    return os.path.abspath(file) if file else file


def recognise(ev) -> bool:
    return related(ev)


def origin_of(nf: dict) -> dict | None:
    """The birth the sink (or the program's test) carries; else, for a program that raised, the last birth in
    backward (anomaly mode raises there), else the first."""
    if nf.get("origin"):
        return nf["origin"]
    births = nf.get("births") or []
    back = [b for b in births if b.get("phase") == "backward"]
    return back[-1] if back else (births[0] if births else None)


_SINKS = {"loss": "the loss given to backward()", "grad": "a gradient left by backward()",
          "parameter": "a parameter after the optimizer step"}


def finding(ev, hazard: bool) -> dict | None:
    """The diagnosis (``hazard`` False) or the hazard built from ``ev.nonfinite``."""

    nf = ev.nonfinite or {}
    sink = nf.get("sink")
    origin = origin_of(nf) if (sink or not hazard) else None
    if hazard and not sink:
        return None
    loop = (nf.get("backward_calls") or 0) > 1 or (nf.get("optimizer_steps") or 0) > 1
    parts = []
    if sink:
        label = _label(ev, sink.get("tensor"), sink)
        st = f", step {sink['step']}" if loop and sink.get("step") is not None else ""
        parts.append(f"{label} held {sink.get('value', 'a non-finite value')} at line {sink.get('line')} "
                     f"({_SINKS.get(sink['what'], sink['what'])}{st}).")
    elif ev.exception:
        exc = ev.exception
        message = (exc.get('message') or '')[:200].rstrip()
        parts.append(f"The program raised {exc.get('type')} at line {exc.get('line')}: {message}"
                     + ("" if message.endswith(".") else "."))
        read = (nf.get("tested") or {}).get("raised_on")
        if read:  # NOTE [An op that raised on a non-finite input] (instrument/nonfinite.py)
            names = ", ".join(f"`{n}`" for n in read)
            parts.append(f"That line read {names}, which {'was' if len(read) == 1 else 'were'} not finite: "
                         "the error is a consequence of a non-finite value.")
    culprit = None
    backward = None
    nonfinite = {"op": None, "aten": None, "node": None, "phase": None, "step": None, "tensor": None, "inputs": [],
                 "value": None, "data": False, "summed": None,
                 "checked": nf.get("checked"), "sink": _sink_view(sink)}
    if origin:
        code = source.code(origin.get("file"), origin.get("line")) if origin.get("line") else ""
        data_code = source.code(origin.get("data_file"), origin.get("data_line")) if origin.get("data_line") else ""
        name = _label(ev, origin.get("tensor"), origin, code)
        how = origin.get("data_how") or ""
        if how.startswith("computed without autograd by ") and not ev.tensor_names(origin.get("tensor")):
            call, _, at = how[len("computed without autograd by "):].partition(", called at ")
            name = f"the value `{call}` returned" + (f" (called at {at})" if at else "")  # NOTE [A value a function
            # returned, unnamed] in instrument/origin_walk.py
        what = origin.get("node") or origin.get("op")
        st = f", step {origin['step']}" if loop and origin.get("step") is not None else ""
        ins = "; ".join(_input_text(ev, i) for i in origin.get("inputs") or [])
        if origin.get("data"):
            at = origin.get("data_line") or origin.get("line")
            parts.append(f"The first non-finite value came in with the data: {name} already held "
                         f"{origin.get('value')} when {what} read it at line {origin.get('line')}"
                         + (f" (made at line {origin['data_line']}, `{data_code}`)" if origin.get("data_line") else "")
                         + ".")
            culprit = where(origin.get("data_file") or origin.get("file"), at)
        elif origin.get("sum"):
            parts.append(_sum_text(ev, origin, st, ins))
            culprit = where(origin.get("file"), origin.get("line"))
        else:
            phase = origin.get("phase")
            how = f"{what} ({phase}{st})"
            if phase == "backward" and origin.get("node"):
                op = f"{origin['op']}, " if origin.get("op") else ""
                how = f"{origin['node']} ({op}in backward{st})"
            inside = ""
            fline = origin.get("forward_line")
            if origin.get("custom_function") and fline and fline != origin.get("line"):
                fcode = source.code(origin.get("forward_file"), fline)
                inside = f", in the backward of the Function called at line {fline}" \
                    + (f" (`{fcode}`)" if fcode else "")
            at = f"at line {origin['line']} (`{code}`)" if origin.get("line") else \
                "at a line tensorscope did not record (as for an op run in a thread other than the main one)"
            parts.append(f"The first non-finite value" + (f" ({origin['value']})" if origin.get("value") else "")
                         + f" was made by {how} {at}{inside}, computing {name}"
                         + (f"; its inputs: {ins}." if ins else "."))
            later = _pinned_later(sink, origin) if loop else None
            if later:  # NOTE [Gradients that may overflow]: a backward hooked at every node after the one that failed
                parts.append(f"It was pinned at step {later[1]}; first seen at step {later[0]}, whose backward had no "
                             "hook on the node that made it: the same overflow recurred in the next backward, where "
                             "every node was checked.")
            culprit = where(origin.get("file"), origin.get("line"))
            if culprit is None and sink and sink.get("line"):  # the origin's line unknown: the sink's is the one known
                culprit = where(sink.get("file"), sink.get("line"))
        if origin.get("backward_line"):
            backward = where(origin.get("backward_file"), origin.get("backward_line"))
        fix = fix_for(origin, code, data_code)
        nonfinite.update(op=what, aten=origin.get("op"), node=origin.get("node"), phase=origin.get("phase"),
                         step=origin.get("step") if loop else None,
                         tensor={"id": origin.get("tensor"), "names": ev.tensor_names(origin.get("tensor"))},
                         inputs=[_input_view(ev, i) for i in origin.get("inputs") or []], value=origin.get("value"),
                         data=bool(origin.get("data")),
                         summed=[{"file": display_path(u.get("file")), "line": u.get("line")}
                                 for u in origin["summed"]] if origin.get("summed") is not None else None)
    else:
        if nf.get("checked") == "sinks":
            parts.append("Run `tensorscope explain` (or `tensorscope run --check-values`) to name the op and line that "
                         "made it: plain `run` checks only the loss, the gradients and the parameters.")
        if nf.get("checked") == "sinks":
            fix = ("Find the first non-finite value with `tensorscope explain PROG.py`; then keep that op's input "
                   "inside its domain (eps in a division or norm, clamp before log/sqrt/acos).")
        else:  # the origins were looked for and none was pinned (docs/kinds.md, "Non-finite values")
            parts.append("No op was pinned as its origin (the known cases: a float32 gradient, or a sum of "
                         "gradients, that overflowed within one later backward where not every node is hooked (a loss "
                         "that cancels, the gradients then applied), "
                         "backward on a GPU, and a graph built in a thread other than the main one, where explain's "
                         "saved-tensor hooks do not act).")
            fix = ("Walk back from the value named above: a `register_hook` printing `g.abs().max()` on each layer's "
                   "output shows where gradients grow, and `torch.autograd.detect_anomaly(check_nan=True)` names "
                   "the backward node of a NaN. Then keep that op's input inside its domain (eps in a division or "
                   "norm, clamp before log/sqrt/acos) or its size down (normalised inputs, a smaller loss scale).")
        if sink:
            nonfinite.update(value=sink.get("value"), step=sink.get("step") if loop else None,
                             tensor={"id": sink.get("tensor"), "names": ev.tensor_names(sink.get("tensor"))})
        if sink and sink.get("line"):
            culprit = where(sink.get("file"), sink.get("line"))
        elif ev.exception:
            culprit = where(ev.exception.get("file"), ev.exception.get("line"))
    d = diagnosis(HAZARD if hazard else KIND, explanation=" ".join(parts), fix=fix, culprit=culprit, backward=backward,
                  tensor=nonfinite["tensor"] and {**nonfinite["tensor"], "version_at_save": None, "version_now": None},
                  evidence=[f"non-finite {nonfinite.get('value') or ''} first made by {nonfinite['op']}"
                            if nonfinite["op"] else "non-finite value at a sink"])
    d["nonfinite"] = nonfinite
    return d


def _sum_text(ev, origin: dict, st: str, ins: str) -> str:
    """The sentence for a gradient that backward's own sum made non-finite."""
    fline = origin.get("forward_line")
    fcode = source.code(origin.get("forward_file"), fline) if fline else ""
    name = _label(ev, origin.get("tensor"), {}, fcode)
    made = f" (made at line {fline}, `{fcode}`)" if fline and fcode else ""
    lines = [u.get("line") for u in origin.get("summed") or [] if u.get("line") is not None]
    at = (f"line {lines[0]}" if len(lines) == 1 else
          "lines " + ", ".join(str(n) for n in lines[:-1]) + f" and {lines[-1]}") if lines else "its uses"
    value = origin.get("value") or "a non-finite value"
    when = f" ({st[2:]})" if st else ""
    if origin.get("sum") == "accumulated":
        return (f"The first non-finite value ({value}) was made when backward{when} added the gradient of {name}, "
                f"from its use at {at}, to its `.grad`: the new gradient was finite" + (f" ({ins})" if ins else "")
                + f", but its sum with what earlier backward calls had left in `.grad` passed "
                f"{origin.get('dtype')}'s range (gradient accumulation).")
    return (f"The first non-finite value ({value}) was made by backward's own sum{when}: the gradient of {name}{made} "
            f"is the sum of the gradients of its uses at {at}" + (f" (each finite: {ins})" if ins else "")
            + f", and the engine's addition passed {origin.get('dtype')}'s range before {origin.get('node')} "
            "received it.")


def _pinned_later(sink, origin):
    """(first seen, pinned): the steps of a gradient sink whose own backward pinned no node and of the backward
    origin found in a later one, or None."""
    if not sink or sink.get("what") != "grad" or origin.get("phase") != "backward":
        return None
    first, pinned = sink.get("step"), origin.get("step")
    if isinstance(first, int) and isinstance(pinned, int) and pinned > first:
        return first, pinned
    return None


def _sink_view(sink):
    if not sink:
        return None
    return {"what": sink.get("what"), "file": display_path(sink.get("file")), "line": sink.get("line"),
            "step": sink.get("step"), "value": sink.get("value"), "tensor": sink.get("tensor")}


def _label(ev, tid, facts, code: str = "") -> str:
    names = ev.tensor_names(tid)
    if names:
        return f"`{names[0]}`"
    target = _target(code)
    if target:
        return f"`{target}`"
    if facts.get("what") == "loss":
        return "the loss"
    if facts.get("what") == "grad":
        return "a gradient"
    if facts.get("what") == "parameter":
        return "a parameter"
    return f"tensor {tid}" if tid else "a tensor"


def _target(code: str) -> str | None:
    node = statement(code or "")
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    return None


def _input_view(ev, i: dict) -> dict:
    keys = ("dtype", "shape", "min", "max", "zeros", "negatives", "nonfinite", "numel")
    out = {k: i.get(k) for k in keys}
    out["tensor"] = i.get("tensor")
    out["names"] = ev.tensor_names(i.get("tensor"))
    return out


def _input_text(ev, i: dict) -> str:
    names = ev.tensor_names(i.get("tensor"))
    label = f"`{names[0]}` " if names else ""
    shape = "x".join(str(s) for s in i.get("shape") or []) or "scalar"
    return (f"{label}{i.get('dtype')}[{shape}] min {_num(i.get('min'))} max {_num(i.get('max'))}, "
            f"{i.get('zeros')} zeros, {i.get('negatives')} negative, {i.get('nonfinite')} non-finite")


def _num(v) -> str:
    return "-" if v is None else f"{v:.4g}"


def explain(ev):
    """The diagnosis of a program that raised on a non-finite value (None: the generic one)."""
    if not ev.nonfinite:
        return None
    return finding(ev, hazard=False)


def explain_hazard(ev, hazard: dict):
    """The hazard of a NaN that reached a sink while the program went on (None: the diagnosis explains it)."""
    d = (ev.doc or {}).get("diagnosis")
    if d is not None and d.get("kind") == KIND.code:
        return None
    return finding(ev, hazard=True)
