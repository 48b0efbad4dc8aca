"""The failure kinds tensorscope explains: one small, torch-free unit per kind.

Each :class:`Kind` has a stable ``code`` (used in JSON and exit decisions), a
one-sentence ``title``, a short ``explanation`` of what autograd needed, the
usual ``causes`` named by their PyTorch construct, and generic ``fixes``.
Decoded facts about one failure turn the generic fixes into concrete ones
(see :func:`tensorscope.explain.messages.describe`).

Example::

    >>> from tensorscope.explain import kinds
    >>> kinds.get("backward-twice").title
    'backward() ran a second time through a graph whose saved tensors were already freed.'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One failure kind: what happened, why autograd cares, causes and fixes."""

    code: str
    title: str
    explanation: str
    causes: tuple[str, ...]
    fixes: tuple[str, ...]
    hazard: bool = False


_ALL = (
    Kind(
        code="inplace-modified-saved-tensor",
        title="A tensor saved for backward was modified in place before backward() used it.",
        explanation=(
            "Autograd saves some inputs and outputs of an op (for example the result of "
            "sigmoid, exp or tanh, or the operands of mm) to compute gradients later. "
            "Every in-place write bumps the tensor's version counter; at backward time the "
            "saved tensor's version no longer matched the version recorded when it was "
            "saved, so its gradient would have been computed from the wrong values."
        ),
        causes=(
            "An in-place op (`x.add_()`, `x += ...`, `x[i] = ...`, `x.zero_()`) on a tensor "
            "that an earlier op saved for backward.",
            "A write through an alias that shares the version counter: a view, a slice, or "
            "`.detach()` of the saved tensor.",
            "An activation module with `inplace=True` (`nn.ReLU(inplace=True)`, "
            "`nn.Dropout(inplace=True)`) overwriting a tensor the previous op saved.",
            "`optimizer.step()` updating parameters in place between the forward pass and a "
            "later backward() that still needs the old parameter values.",
        ),
        fixes=(
            "Clone before the write: `y = y.clone()` and modify the clone.",
            "Use the out-of-place op: `x = x + 1` instead of `x += 1` or `x.add_(1)`.",
            "Pass `inplace=False` to activation and dropout modules.",
            "Move `optimizer.step()` after the last backward() that uses the current graph.",
        ),
    ),
    Kind(
        code="backward-twice",
        title="backward() ran a second time through a graph whose saved tensors were already freed.",
        explanation=(
            "To save memory, autograd frees the tensors saved in a graph as soon as "
            "backward() or autograd.grad() has gone through it. A second backward through "
            "any part of the same graph, or reading a node's saved tensors afterwards, finds "
            "them gone."
        ),
        causes=(
            "Calling `loss.backward()` twice on the same loss, or on two losses that share "
            "part of one graph.",
            "A tensor carried across loop iterations (an RNN hidden state, a running "
            "statistic) that still links each new graph to the previous, already-freed one.",
            "Reading `grad_fn._saved_*` after backward().",
        ),
        fixes=(
            "Run a fresh forward pass for each backward().",
            "Detach the carried hidden state at the start of each iteration: `h = h.detach()`.",
            "Sum the losses and call backward() once: `(loss_a + loss_b).backward()`.",
            "Pass `retain_graph=True` to every backward() but the last, only when going "
            "through the same graph twice is really intended.",
        ),
    ),
    Kind(
        code="no-grad-fn",
        title="backward() was called on a tensor that does not require grad and has no grad_fn.",
        explanation=(
            "Autograd can only differentiate a tensor produced by ops it recorded. The tensor "
            "given to backward() or autograd.grad() has requires_grad=False and no grad_fn, "
            "so no graph leads from it to any leaf."
        ),
        causes=(
            "The forward pass ran under `torch.no_grad()`, `torch.inference_mode()` or "
            "`torch.set_grad_enabled(False)`.",
            "The graph was cut by `.detach()`, `.data`, `.item()`, `.numpy()` or by rebuilding "
            "the loss with `torch.tensor(...)`.",
            "No input or parameter has `requires_grad=True` (a frozen model, "
            "`requires_grad_(False)`).",
        ),
        fixes=(
            "Run the forward pass with grad mode enabled (outside `torch.no_grad()`).",
            "Keep the loss a tensor computed by torch ops: no `.item()`, `.detach()` or "
            "`torch.tensor(loss)` on the way.",
            "Make sure the parameters to train have `requires_grad=True`.",
        ),
    ),
    Kind(
        code="leaf-inplace",
        title="A leaf tensor that requires grad (or a view of it) was modified in place.",
        explanation=(
            "A leaf that requires grad, such as a parameter, is where gradients are "
            "accumulated; autograd has no node to record an in-place change to it. Writing "
            "to it, or to a view of it, in grad mode is therefore refused."
        ),
        causes=(
            "Initialising or updating a parameter in place in grad mode: `w.add_(...)`, "
            "`w[0] = ...`, `w.uniform_()`.",
            "A hand-written optimizer step `w -= lr * w.grad` outside `torch.no_grad()`.",
        ),
        fixes=(
            "Do the write under `with torch.no_grad():` when it is an update, not part of "
            "the model.",
            "Use the out-of-place op and a new name: `w2 = w * 2`.",
            "Clone first when the modified copy should be differentiable: `w2 = w.clone(); "
            "w2[0] = 0`.",
        ),
    ),
    Kind(
        code="view-inplace",
        title="A view was modified in place in a way autograd cannot record correctly.",
        explanation=(
            "When a view is written in place autograd rewrites the view's and its base's "
            "grad_fn. It cannot do so for a view that is one of several outputs of an op "
            "(unbind, split, chunk), for a view created in no_grad or inference mode and "
            "written with grad enabled, or for a view returned by a custom Function, so the "
            "write is refused."
        ),
        causes=(
            "Writing in place to an output of `unbind`, `split` or `chunk` (or to their base "
            "while such an output is still used).",
            "Taking a view under `torch.no_grad()` and writing to it, or its base, outside.",
            "Writing in place to a tensor returned by a custom `torch.autograd.Function` that "
            "returned a view of (or exactly) its input.",
        ),
        fixes=(
            "Replace the in-place op with the out-of-place one.",
            "Clone the view before writing: `v = v.clone()`.",
            "Take the view and do the write both inside, or both outside, the no_grad block.",
            "Clone the output of the custom Function (in its forward or right after apply).",
        ),
    ),
    Kind(
        code="overlapping-write",
        title="An in-place write targets a tensor whose elements share memory.",
        explanation=(
            "The written-to tensor has several elements at one memory location (an "
            "`expand`ed or stride-0 tensor), or it overlaps the input being read. The result "
            "would depend on the order of the writes, so PyTorch refuses the operation."
        ),
        causes=(
            "An in-place op on the result of `expand`, `expand_as` or a broadcast view.",
            "`out=` or `copy_` into a tensor that overlaps its own source, e.g. "
            "`a[1:].copy_(a[:-1])`.",
            "An `as_strided` view with a zero or too-small stride.",
        ),
        fixes=(
            "Clone (or `.contiguous()`) the expanded tensor before writing: "
            "`x = x.expand(3, 4).clone()`.",
            "Clone the source before copying: `a[1:].copy_(a[:-1].clone())`.",
            "Use the out-of-place op.",
        ),
    ),
    Kind(
        code="non-scalar-backward",
        title="backward() was called without a gradient on a tensor that is not a scalar.",
        explanation=(
            "backward() with no argument starts from a gradient of 1, which only makes sense "
            "for a real single-element output. For any other output autograd needs the "
            "gradient of the final objective with respect to it."
        ),
        causes=(
            "Calling `out.backward()` on a per-sample loss or a model output instead of a "
            "reduced loss.",
            "A loss built with `reduction='none'`.",
            "A complex-valued loss.",
        ),
        fixes=(
            "Reduce to a scalar first: `loss.sum().backward()` or `loss.mean().backward()`.",
            "Pass the gradient explicitly: `out.backward(gradient=torch.ones_like(out))`.",
        ),
    ),
    Kind(
        code="non-float-requires-grad",
        title="requires_grad was asked for on a tensor whose dtype is not floating point or complex.",
        explanation=(
            "Gradients are only defined for floating-point and complex tensors. An integer or "
            "bool tensor (indices, labels, masks) cannot require grad."
        ),
        causes=(
            "`torch.tensor([1, 2], requires_grad=True)`: integer literals give an int64 tensor.",
            "`requires_grad_()` or `requires_grad = True` on an index, label or mask tensor.",
            "`nn.Parameter` wrapping an integer tensor.",
        ),
        fixes=(
            "Create it as floating point: `torch.tensor([1., 2.], requires_grad=True)` or "
            "`dtype=torch.float32`.",
            "Convert first: `x = x.float().requires_grad_()`.",
            "Leave integer tensors (indices, labels, masks) without requires_grad.",
        ),
    ),
    Kind(
        code="numpy-requires-grad",
        title="numpy() was called on a tensor that requires grad.",
        explanation=(
            "A NumPy array made by `numpy()` shares memory with the tensor but is invisible to "
            "autograd. Writes through the array would silently corrupt the graph, so PyTorch "
            "refuses to hand out the memory of a tensor that requires grad."
        ),
        causes=(
            "Calling `.numpy()` on a model output, loss or parameter to log or plot it.",
            "Passing such a tensor to a NumPy, pandas or matplotlib function.",
        ),
        fixes=(
            "Detach first: `t.detach().cpu().numpy()`.",
            "Or ask for a copy explicitly: `t.numpy(force=True)`.",
        ),
    ),
    Kind(
        code="resize-requires-grad",
        title="resize_ was called on a tensor that requires grad.",
        explanation=(
            "`resize_` changes a tensor's shape and storage in place. Autograd has no backward "
            "for that, so it is refused for tensors that require grad."
        ),
        causes=(
            "`x.resize_(...)` or `x.resize_as_(...)` on a parameter or on a tensor computed "
            "from one.",
        ),
        fixes=(
            "Use an out-of-place op: `reshape`, `view`, `torch.cat`, `F.pad` or a new tensor.",
            "Resize only tensors that need no gradient, e.g. a buffer created under "
            "`torch.no_grad()`.",
        ),
    ),
    Kind(
        code="device-mismatch",
        title="Tensors on different devices met in one op, or CUDA was asked for on a build without it.",
        explanation=(
            "Every tensor an op reads must be on the same device; PyTorch never moves them "
            "implicitly. A CPU-only build of PyTorch cannot create CUDA tensors at all."
        ),
        causes=(
            "The model was moved with `.to(device)` but an input, target or new tensor "
            "(`torch.zeros(...)`, `torch.tensor(...)`) stayed on the CPU.",
            "A tensor created inside `forward` without `device=`.",
            "`device='cuda'` or `.cuda()` on a PyTorch build without CUDA.",
        ),
        fixes=(
            "Move every input to the model's device: `x = x.to(next(model.parameters()).device)`.",
            "Create new tensors on the right device: `torch.zeros(n, device=x.device)`.",
            "Choose the device once: `device = 'cuda' if torch.cuda.is_available() else 'cpu'`.",
        ),
    ),
    Kind(
        code="ddp-unused-parameters",
        title="DistributedDataParallel waited for gradients of parameters that the previous iteration did not use.",
        explanation=(
            "DDP's reducer expects a gradient for every parameter it reduces, in every iteration, "
            "and finishes the iteration's all-reduce when the last one arrives. Parameters that "
            "took no part in computing the loss got no gradient, so the previous iteration's "
            "reduction never finished and the next forward refused to start."
        ),
        causes=(
            "A submodule created in `__init__` but never called in `forward` (or called only on "
            "some iterations: a data-dependent branch).",
            "An output of `forward` that does not contribute to the loss.",
            "`static_graph=True` with a graph that changes between iterations.",
        ),
        fixes=(
            "Remove the unused submodule, or freeze it before wrapping: "
            "`module.requires_grad_(False)` (DDP skips parameters that do not require grad).",
            "Pass `find_unused_parameters=True` to `DistributedDataParallel` (it costs a graph "
            "traversal per iteration).",
            "Make every output of `forward` take part in the loss.",
        ),
    ),
    Kind(
        code="ddp-mark-ready-twice",
        title="DistributedDataParallel saw the gradient of one parameter become ready twice in one iteration.",
        explanation=(
            "DDP hooks every parameter's gradient accumulation and expects each to fire once per "
            "iteration. A second gradient for the same parameter in the same iteration comes from "
            "a second backward pass through it: a reentrant activation checkpoint re-running the "
            "layer inside backward, or the parameter used outside the DDP-wrapped forward."
        ),
        causes=(
            "`torch.utils.checkpoint.checkpoint(..., use_reentrant=True)` (or a model's "
            "`gradient_checkpointing_enable()` with reentrant checkpoints) under DDP, with "
            "`find_unused_parameters=True` or the same layers checkpointed twice.",
            "A parameter used twice: through `model.module` or in the loss itself, besides the "
            "DDP-wrapped `forward`.",
        ),
        fixes=(
            "Use non-reentrant checkpoints: `checkpoint(fn, x, use_reentrant=False)`.",
            "Call every use of the parameters through the DDP model's forward (compute auxiliary "
            "terms inside `forward` and return them).",
            "If the graph is the same every iteration, pass `static_graph=True` to "
            "`DistributedDataParallel`.",
        ),
    ),
    Kind(
        code="other",
        title="A known PyTorch error that is not one of the backward-failure kinds.",
        explanation=(
            "tensorscope recognises this error text, but it is not one of the backward-failure "
            "kinds. The decoded fields (`reason` first) say which error it is."
        ),
        causes=(
            "An `as_strided` view larger than its storage.",
            "`expand` of a dimension whose size is not 1.",
            "Inference-mode tensors used with autograd.",
        ),
        fixes=(
            "Read the decoded fields and fix the shapes or strides they name.",
        ),
    ),
    Kind(
        code="silent-saved-tensor-write",
        title="A tensor saved for backward changed without a version bump, so backward gives wrong gradients.",
        explanation=(
            "Autograd only notices in-place writes that bump the version counter. Writing "
            "through `.data`, replacing a tensor's data with `x.data = ...`, or `set_` on an "
            "alias with its own counter changes the values a node saved without any bump: "
            "backward() succeeds and silently computes gradients from the new values."
        ),
        causes=(
            "An in-place write through `x.data` (`x.data.zero_()`, `x.data.mul_(...)`).",
            "Assigning `x.data = y` on a tensor an op has saved.",
            "`set_` on a tensor that shares storage but not the version counter.",
        ),
        fixes=(
            "Write through `x.detach()` instead of `x.data`: autograd then reports the problem.",
            "Clone before the write: `x = x.clone()` and modify the clone.",
            "Do the write after the last backward() that needs the saved value.",
        ),
        hazard=True,
    ),
)

#: Every kind, keyed by its stable code.
KINDS: dict[str, Kind] = {kind.code: kind for kind in _ALL}


def get(code: str) -> Kind:
    """Return the :class:`Kind` for ``code``; raise ``KeyError`` naming the known codes."""
    try:
        return KINDS[code]
    except KeyError:
        raise KeyError(f"unknown kind {code!r}; known: {', '.join(KINDS)}") from None
