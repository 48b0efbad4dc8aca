"""Tests for recognising pasted error texts (tensorscope.messages, the patterns of tensorscope/kinds/).

The torch 2.13 texts are raised live in this process, so they stay the real
wording; older and CUDA wordings are stored in tests/data/error_texts/.
"""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
import time
import traceback
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorscope import kinds
from tensorscope.messages import MAX_SCAN, ParsedMessage, describe, parse

try:
    import torch
except ImportError:  # the parser is torch-free; only the live texts need torch
    torch = None

HERE = pathlib.Path(__file__).parent
ERROR_TEXTS = HERE / "data" / "error_texts"
PKG = HERE.parent / "tensorscope"
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


# --------------------------------------------------------------------------
# Live torch texts: each case makes torch raise, then the text is parsed.


def _sigmoid_zeroed():
    a = torch.randn(3, requires_grad=True)
    out = a.sigmoid()
    out.detach().zero_()
    out.sum().backward()


def _saved_leaf_written():
    w = torch.randn(3, 3, requires_grad=True)
    x = torch.randn(3, 3)
    out = x.mm(w)
    x.add_(1)
    out.sum().backward()


def _exp_of(dtype, shape=(2,)):
    def run():
        a = torch.randn(shape, requires_grad=True, dtype=dtype)
        out = a.exp()
        out.detach().zero_()
        out.abs().sum().backward()
    return run


def _mask_flipped():
    x = torch.randn(3, requires_grad=True)
    m = x > 0
    z = x.masked_fill(m, 0)
    m.logical_not_()
    z.sum().backward()


def _index_bumped():
    x = torch.randn(4, requires_grad=True)
    idx = torch.tensor([0, 1])
    y = x.gather(0, idx)
    idx.add_(1)
    y.sum().backward()


def _sigmoid_zeroed_twice():
    a = torch.randn(3, requires_grad=True)
    out = a.sigmoid()
    out.detach().zero_()
    out.detach().zero_()
    out.sum().backward()


def _eigh_vectors_written():
    x = torch.randn(3, 3)
    x = (x + x.T).requires_grad_()
    values, vectors = torch.linalg.eigh(x)
    vectors.detach().add_(1)
    values.sum().backward()


def _copyslices_written():
    a = torch.randn(3, requires_grad=True)
    b = a * 1
    b[0] = 5
    o = b * b
    b.detach().add_(1)
    o.sum().backward()


def _view_written_through_base():
    w = torch.randn(3, 3, requires_grad=True)
    h = w * 2
    v = h[1:3]
    o = v * v
    h.detach().add_(1)
    o.sum().backward()


def _tracked_add():
    w = torch.randn(3, 3, requires_grad=True)
    h = w * 2
    out = h.mm(w)
    h.add_(1)
    out.sum().backward()


def _backward_twice():
    out = torch.randn(3, requires_grad=True).sigmoid().sum()
    out.backward()
    out.backward()


def _saved_after_free():
    out = torch.randn(3, requires_grad=True).sigmoid()
    out.sum().backward()
    out.grad_fn._saved_result


def _grad_second_output_constant():
    a = torch.randn(3, requires_grad=True)
    torch.autograd.grad([a.sum(), torch.randn(3).sum()], [a])


def _leaf_add_():
    torch.randn(3, requires_grad=True).add_(1)


def _leaf_setitem():
    a = torch.randn(3, requires_grad=True)
    a[0] = 1


def _unbind_written():
    x, _, _ = (torch.randn(3, 3, requires_grad=True) * 1).unbind()
    x.add_(1)


def _split_second_written():
    _, y = (torch.randn(4, requires_grad=True) * 1).split(2)
    y.mul_(2)


def _unbind_base_written():
    b = torch.randn(3, 3, requires_grad=True) * 1
    x, _, _ = b.unbind()
    b.add_(1)
    x.grad_fn


def _no_grad_view_written():
    b = torch.randn(3, requires_grad=True) * 1
    with torch.no_grad():
        v = b[0:2]
    v.mul_(2)


def _no_grad_view_base_written():
    b = torch.randn(3, requires_grad=True) * 1
    with torch.no_grad():
        v = b[:2]
    b.mul_(2)
    v.grad_fn


def _inference_view_written():
    b = torch.randn(3, requires_grad=True) * 1
    with torch.inference_mode():
        v = b[:2]
    v.mul_(2)


def _custom_view_written():
    class IdView(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, g):
            return g

    IdView.apply(torch.randn(3, requires_grad=True) * 1).mul_(2)


def _expanded_written():
    torch.randn(1).expand(3).add_(1)


def _overlapping_copy():
    a = torch.arange(6.0)
    a[1:5].copy_(a[:4])


def _non_scalar():
    (torch.randn(3, requires_grad=True) * 2).backward()


def _complex_scalar():
    (torch.randn(3, dtype=torch.cfloat, requires_grad=True) * 1).sum().backward()


def _int_setter():
    t = torch.zeros(3, dtype=torch.long)
    t.requires_grad = True


def _data_set_long():
    torch.randn(3, requires_grad=True).data = torch.zeros(3, dtype=torch.long)


def _inference_tensor_written():
    with torch.inference_mode():
        a = torch.randn(3)
    a.add_(1)


def _inference_tensor_saved():
    with torch.inference_mode():
        a = torch.randn(3)
    (torch.randn(3, requires_grad=True) * a).sum().backward()


def _non_leaf_requires_grad():
    h = torch.randn(3, requires_grad=True) * 2
    h.requires_grad = False


def _once_differentiable_twice():
    from torch.autograd.function import once_differentiable

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.randn(3, requires_grad=True)
    (g,) = torch.autograd.grad((Cube.apply(x) ** 2).sum(), x, create_graph=True)
    g.sum().backward()


def _unused_input():
    a, b = torch.randn(2, requires_grad=True), torch.randn(2, requires_grad=True)
    torch.autograd.grad(a.sum(), [a, b])


def _leaky_relu_inplace_negative():
    h = torch.randn(4, requires_grad=True) + 0
    torch.nn.functional.leaky_relu_(h, -0.5)
    h.sum().backward()


def _detached_in_place():
    h = torch.randn(3, requires_grad=True) + 1
    loss = (h * h).sum()
    h.detach_()
    loss.backward()


def _checkpoint_count():
    from torch.utils.checkpoint import checkpoint

    seen = []

    def block(x):
        seen.append(1)
        return torch.cos(x) * x if len(seen) == 1 else torch.cos(x)

    checkpoint(block, torch.randn(3, requires_grad=True), use_reentrant=False).sum().backward()


def _tangent_size():
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        fwAD.make_dual(torch.randn(2), torch.randn(5))


def _no_forward_formula():
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        torch.unique(fwAD.make_dual(torch.randn(3), torch.randn(3)))


def _invalid_gradient_shape():
    class Halve(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x / 2

        @staticmethod
        def backward(ctx, g):
            return g[:1]

    Halve.apply(torch.randn(3, requires_grad=True)).sum().backward()


def _checkpoint_metadata():
    from torch.utils.checkpoint import checkpoint

    seen = []

    def block(x):
        seen.append(1)
        return torch.cos(x) if len(seen) == 1 else torch.cos(x.reshape(3, 1))

    checkpoint(block, torch.randn(3, requires_grad=True), use_reentrant=False).sum().backward()


def _function_without_jvp():
    import torch.autograd.forward_ad as fwAD

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with fwAD.dual_level():
        Twice.apply(fwAD.make_dual(torch.randn(3), torch.randn(3)))


def _float_backward():
    loss = (torch.randn(3, requires_grad=True) ** 2).sum().item()
    loss.backward()


INPLACE = "inplace-modified-saved-tensor"
def _normal_loc_nan():
    torch.distributions.Normal(torch.tensor([0.0, float("nan")]), torch.ones(2))


def _normal_value_nan():
    torch.distributions.Normal(torch.zeros(2), torch.ones(2)).log_prob(torch.tensor([0.0, float("nan")]))


LIVE = [
    # torch.distributions' validate_args on a NaN (tensorscope's non-finite kind; a negative scale is not it)
    ("normal-loc-nan", _normal_loc_nan, "non-finite-value", dict(value="nan", param="loc", distribution="Normal")),
    ("normal-value-nan", _normal_value_nan, "non-finite-value", dict(value="nan", distribution="Normal",
                                                                    param="<missing>")),
    ("sigmoid", _sigmoid_zeroed, INPLACE, dict(
        tensor_type="torch.FloatTensor", dtype="float32", device="cpu", shape=[3], output_nr=0,
        op="Sigmoid", node="SigmoidBackward0", node_guessed=True, version=1, expected_version=0,
        bumps=1, is_leaf_saved=False, anomaly_enabled=False)),
    ("saved-leaf", _saved_leaf_written, INPLACE, dict(
        shape=[3, 3], is_leaf_saved=True, output_nr=None, op=None, node=None, bumps=1)),
    ("double-scalar", _exp_of(torch.float64, ()), INPLACE, dict(
        tensor_type="torch.DoubleTensor", dtype="float64", shape=[], op="Exp")),
    ("half", _exp_of(torch.float16), INPLACE, dict(tensor_type="torch.HalfTensor", dtype="float16")),
    ("bfloat16", _exp_of(torch.bfloat16, (2, 3)), INPLACE, dict(
        tensor_type="CPUBFloat16Type", dtype="bfloat16", device="cpu", shape=[2, 3])),
    ("complex64", _exp_of(torch.complex64), INPLACE, dict(tensor_type="CPUComplexFloatType", dtype="complex64")),
    ("bool-mask", _mask_flipped, INPLACE, dict(tensor_type="CPUBoolType", dtype="bool", is_leaf_saved=True)),
    ("long-index", _index_bumped, INPLACE, dict(tensor_type="torch.LongTensor", dtype="int64", shape=[2])),
    ("two-bumps", _sigmoid_zeroed_twice, INPLACE, dict(version=2, expected_version=0, bumps=2)),
    ("output-1", _eigh_vectors_written, INPLACE, dict(output_nr=1, op="LinalgEigh", node="LinalgEighBackward0")),
    ("copyslices", _copyslices_written, INPLACE, dict(
        output_of="torch::autograd::CopySlices", op="CopySlices", node="CopySlices", node_guessed=False,
        version=2, expected_version=1)),
    ("asstrided", _view_written_through_base, INPLACE, dict(op="AsStrided", shape=[2, 3])),
    ("tracked-add", _tracked_add, INPLACE, dict(op="Add", node="AddBackward0")),
    ("backward-twice", _backward_twice, "backward-twice", {}),
    ("saved-after-free", _saved_after_free, "backward-twice", {}),
    ("element-0", lambda: torch.randn(3).sum().backward(), "no-grad-fn", dict(index=0)),
    ("element-1", _grad_second_output_constant, "no-grad-fn", dict(index=1)),
    ("leaf", _leaf_add_, "leaf-inplace", dict(view_of_leaf=False)),
    ("view-of-leaf", lambda: torch.randn(3, requires_grad=True)[0].add_(1), "leaf-inplace", dict(view_of_leaf=True)),
    ("leaf-setitem", _leaf_setitem, "leaf-inplace", dict(view_of_leaf=True)),
    ("unbind", _unbind_written, "view-inplace", dict(
        reason="multiple-views", op="Unbind", node="UnbindBackward0", node_guessed=True, output_nr=0,
        base_modified=False)),
    ("split-1", _split_second_written, "view-inplace", dict(reason="multiple-views", op="Split", output_nr=1)),
    ("unbind-base", _unbind_base_written, "view-inplace", dict(reason="multiple-views", base_modified=True)),
    ("no-grad-view", _no_grad_view_written, "view-inplace", dict(reason="no-grad-view", op=None, base_modified=False)),
    ("no-grad-view-base", _no_grad_view_base_written, "view-inplace", dict(reason="no-grad-view", base_modified=True)),
    ("inference-view", _inference_view_written, "view-inplace", dict(reason="inference-mode-view")),
    ("custom-function", _custom_view_written, "view-inplace", dict(reason="custom-function", op="IdView", output_nr=0)),
    ("expanded", _expanded_written, "overlapping-write", dict(reason="internal-overlap")),
    ("overlapping-copy", _overlapping_copy, "overlapping-write", dict(reason="input-overlap")),
    ("non-scalar", _non_scalar, "non-scalar-backward", dict(dtype=None)),
    ("complex-scalar", _complex_scalar, "non-scalar-backward", dict(dtype="complex64")),
    ("tensor-int", lambda: torch.tensor([1, 2], requires_grad=True), "non-float-requires-grad",
     dict(via="factory", complex_allowed=True)),
    ("arange", lambda: torch.arange(3, requires_grad=True), "non-float-requires-grad", dict(via="factory")),
    ("parameter", lambda: torch.nn.Parameter(torch.zeros(3, dtype=torch.long)), "non-float-requires-grad",
     dict(via="factory")),
    ("requires-grad-", lambda: torch.zeros(3, dtype=torch.long).requires_grad_(), "non-float-requires-grad",
     dict(via="requires_grad_", complex_allowed=False)),
    ("setter", _int_setter, "non-float-requires-grad", dict(via="requires_grad-setter", complex_allowed=True)),
    ("data-setter", _data_set_long, "non-float-requires-grad", dict(via="data-setter")),
    ("numpy", lambda: torch.randn(3, requires_grad=True).numpy(), "numpy-requires-grad", {}),
    ("resize", lambda: torch.randn(3, requires_grad=True).resize_(5), "resize-requires-grad", {}),
    ("as-strided", lambda: torch.randn(3, 3, dtype=torch.float64).as_strided((5, 5), (0, 4)), "other", dict(
        reason="as-strided-out-of-bounds", sizes=[5, 5], strides=[0, 4], storage_offset=0, itemsize=8,
        required_nbytes=136, storage_nbytes=72)),
    ("expand", lambda: torch.randn(2, 3).expand(3, -1), "other", dict(
        reason="expand-size-mismatch", target_size=3, existing_size=2, dim=0, target_sizes=[3, -1], sizes=[2, 3])),
    ("inference-inplace", _inference_tensor_written, "other", dict(reason="inference-tensor-inplace")),
    ("inference-saved", _inference_tensor_saved, "inference-tensor-saved", {}),
    ("non-leaf-requires-grad", _non_leaf_requires_grad, "non-leaf-requires-grad", {}),
    ("once-differentiable", _once_differentiable_twice, "double-backward-unsupported", {}),
    ("gradient-shape", lambda: (torch.randn(2, 3, requires_grad=True) * 2).backward(torch.ones(3)),
     "gradient-shape-mismatch", dict(index=0, gradient_shape=[3], output_shape=[2, 3])),
    ("unused-input", _unused_input, "unused-input", dict(index=1)),
    ("float-backward", _float_backward, "float-has-no-backward", dict(type="float")),
    ("leaky-relu-inplace", _leaky_relu_inplace_negative, "inplace-backward-unsupported", dict(op="leaky_relu_")),
    ("detached-in-place", _detached_in_place, "saved-detached-inplace", {}),
    ("checkpoint-count", _checkpoint_count, "checkpoint-mismatch", dict(reason="count", saved_forward=3,
                                                                          saved_recompute=1)),
    ("checkpoint-metadata", _checkpoint_metadata, "checkpoint-mismatch", dict(reason="metadata", position=0)),
    ("no-jvp", _function_without_jvp, "forward-ad", dict(reason="no-jvp")),
    ("tangent-size", _tangent_size, "forward-ad", dict(reason="tangent-size", primal_shape=[2], tangent_shape=[5])),
    ("no-forward-formula", _no_forward_formula, "forward-ad", dict(reason="no-formula", op="_unique2")),
    ("invalid-gradient", _invalid_gradient_shape, "invalid-gradient", dict(node="HalveBackward", index=0,
                                                                           reason="shape")),
]
NO_CUDA = [
    ("zeros-cuda", lambda: torch.zeros(3, device="cuda")),
    ("dot-cuda", lambda: torch.zeros(3).cuda()),
]


def _raised(fn) -> tuple[BaseException, str]:
    """Run ``fn`` (which must raise) and return the exception and its formatted traceback."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - every error text is wanted here
            return e, traceback.format_exc()
    raise AssertionError("torch did not raise")


def _check(parsed: ParsedMessage | None, kind: str, expected: dict) -> None:
    assert parsed is not None
    assert parsed.kind == kind
    assert parsed.kind in kinds.KINDS
    for key, value in expected.items():
        assert parsed.fields.get(key, "<missing>") == value, key


def _as_worded(expected: dict, text: str) -> dict:
    """The expectations above are 2.13's; older releases' own wording carries other facts (measured,
    tests/data/error_texts/*__torch2.*): 2.2 to 2.11 name the backward node ("output 0 of
    SigmoidBackward0", nothing to guess), and before 2.13 "One of the differentiated Tensors" names no index."""
    expected = dict(expected)
    node = expected.get("node")
    if expected.get("node_guessed") and node and re.search(rf"\bof {re.escape(node)}\b", text):
        expected["node_guessed"] = False
    if "index" in expected and "One of the differentiated Tensors" in text:
        expected["index"] = None
    return expected


@needs_torch
@pytest.mark.parametrize("name,fn,kind,expected", LIVE, ids=[c[0] for c in LIVE])
def test_live_message(name, fn, kind, expected):
    exc, tb = _raised(fn)
    expected = _as_worded(expected, str(exc))
    bare = parse(f"{type(exc).__name__}: {exc}")
    _check(bare, kind, expected)
    assert bare.exception_type == type(exc).__name__
    # the whole logical message, hint and tails included (a multi-line one joined into one line)
    assert bare.message == (" ".join(str(exc).split()) if "\n" in str(exc) else str(exc))
    assert bare.frames == []
    assert parse(str(exc)).exception_type is None

    full = parse(tb)
    _check(full, kind, expected)
    assert full.fields == bare.fields
    assert full.message == bare.message
    assert full.frames, "the traceback's frames are decoded"
    assert full.frames[-1]["file"] == __file__
    assert all("site-packages/torch" not in (f["file"] or "") for f in full.frames)


@needs_torch
@pytest.mark.skipif(torch is not None and torch.cuda.is_available(), reason="CUDA is available here")
@pytest.mark.parametrize("name,fn", NO_CUDA, ids=[c[0] for c in NO_CUDA])
def test_live_no_cuda(name, fn):
    # a CPU-only build says "Torch not compiled with CUDA enabled"; a CUDA build on a machine without a
    # driver "Found no NVIDIA driver on your system" (NOTE [CUDA asked for where there is none])
    exc, tb = _raised(fn)
    parsed = parse(tb)
    _check(parsed, "device-mismatch", dict(reason="no-gpu" if torch.backends.cuda.is_built() else "no-cuda",
                                           backend="CUDA"))
    assert parsed.exception_type == type(exc).__name__
    assert parsed.message == " ".join(str(exc).split())
    assert parsed.frames[-1]["file"] == __file__ and "cuda" in parsed.frames[-1]["code"]


@needs_torch
def test_a_distribution_argument_out_of_its_constraint_with_finite_values_is_not_a_nan():
    exc, tb = _raised(lambda: torch.distributions.Normal(torch.zeros(2), torch.tensor([-0.5, 1.0])))
    parsed = parse(tb)
    assert parsed is None or parsed.kind != "non-finite-value"


@needs_torch
def test_live_frames_name_the_backward_line():
    exc, tb = _raised(_sigmoid_zeroed)
    frames = parse(tb).frames
    assert frames[-1] == {"file": __file__, "line": frames[-1]["line"], "function": "_sigmoid_zeroed",
                          "code": "out.sum().backward()"}
    assert frames[0]["function"] == "_raised"


@needs_torch
def test_live_anomaly_block():
    """The anomaly-mode warning names the node that saved the tensor and its forward call."""
    caught = []

    def run():
        with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            try:
                _sigmoid_zeroed()
            finally:
                caught.extend(ws)

    _, tb = _raised(run)
    shown = "".join(warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in caught)
    assert "Error detected in SigmoidBackward0" in shown
    parsed = parse(shown + tb)
    _check(parsed, INPLACE, dict(anomaly_node="SigmoidBackward0", saved_by="SigmoidBackward0",
                                 node="SigmoidBackward0", node_guessed=False, anomaly_enabled=True))
    assert parsed.message.endswith("Good luck!")
    forward = parsed.fields["forward_frames"]
    assert forward[-1]["code"] == "out = a.sigmoid()"
    assert forward[-1]["function"] == "_sigmoid_zeroed"
    assert parsed.frames[-1]["code"] == "out.sum().backward()"


@needs_torch
def test_live_chain_during_handling_picks_the_last_exception():
    def run():
        try:
            _sigmoid_zeroed()
        except RuntimeError:
            torch.randn(3).sum().backward()

    _, tb = _raised(run)
    assert "During handling of the above exception" in tb
    parsed = parse(tb)
    _check(parsed, "no-grad-fn", dict(index=0))
    assert parsed.frames[-1]["code"] == "torch.randn(3).sum().backward()"


@needs_torch
def test_live_chain_unknown_wrapper_keeps_the_known_cause():
    def run():
        try:
            _sigmoid_zeroed()
        except RuntimeError as e:
            raise ValueError("training step failed") from e

    _, tb = _raised(run)
    assert "The above exception was the direct cause" in tb
    parsed = parse(tb)
    _check(parsed, INPLACE, dict(op="Sigmoid"))
    assert parsed.exception_type == "RuntimeError"
    assert parsed.frames[-1]["code"] == "out.sum().backward()"


# --------------------------------------------------------------------------
# Stored texts: older releases, CUDA machines, IPython, Windows.

FIXTURE_FIELDS = {
    # torchrun, 2 ranks on gloo: both ranks' tracebacks, each line prefixed "[rankN]: "
    "ddp-unused-parameters__torchrun-gloo-2.13": dict(indices=[4, 5], rank=0, names=[], reason="unused-parameters"),
    "ddp-mark-ready-twice__reentrant-checkpoint-2.13": dict(index=1, name="block.bias"),
    "inplace-modified-saved-tensor__older-sigmoidbackward": dict(
        op="Sigmoid", node="SigmoidBackward", node_guessed=False, output_of="SigmoidBackward", shape=[3]),
    "inplace-modified-saved-tensor__older-sigmoidbackward0": dict(
        op="Sigmoid", node="SigmoidBackward0", node_guessed=False),
    "inplace-modified-saved-tensor__older-viewbackward": dict(
        op="View", node="ViewBackward", shape=[4, 512, 16, 16], version=2, bumps=2),
    "inplace-modified-saved-tensor__cuda-wrapped-leakyrelubackward1": dict(
        dtype="float32", device="cuda", shape=[8, 64, 40, 40], op="LeakyRelu", node="LeakyReluBackward1",
        version=2, expected_version=1, bumps=1),
    "inplace-modified-saved-tensor__cuda-wrapped-leaf": dict(
        device="cuda", shape=[32], is_leaf_saved=True, version=3, expected_version=2),
    "inplace-modified-saved-tensor__cuda-asstridedbackward0-good-luck": dict(
        device="cuda", shape=[27, 4, 606, 8], op="AsStrided", version=19, expected_version=18,
        anomaly_enabled=True),
    "inplace-modified-saved-tensor__cuda-leaf-two-bumps": dict(is_leaf_saved=True, bumps=2, shape=[2, 1, 1, 363]),
    "inplace-modified-saved-tensor__cuda-half-2.13": dict(
        tensor_type="torch.cuda.HalfTensor", dtype="float16", device="cuda", op="Relu", node_guessed=True),
    "inplace-modified-saved-tensor__cuda-bfloat16-2.13": dict(
        tensor_type="CUDABFloat16Type", dtype="bfloat16", device="cuda", shape=[2, 1024], op="Mm"),
    "inplace-modified-saved-tensor__legacy-bfloat16tensor": dict(dtype="bfloat16", device="cpu", op="Tanh"),
    "inplace-modified-saved-tensor__legacy-complexfloattensor": dict(
        dtype="complex64", output_nr=1, op="LinalgEigh", node="LinalgEighBackward0"),
    "inplace-modified-saved-tensor__long-index": dict(dtype="int64", is_leaf_saved=True, shape=[64]),
    "inplace-modified-saved-tensor__oldest-bare": dict(shape=None, version=None, op=None),
    "inplace-modified-saved-tensor__ipython8-traceback": dict(op="Sigmoid", shape=[3]),
    "inplace-modified-saved-tensor__ipython8-ansi-crlf": dict(op="Sigmoid", shape=[3]),
    "inplace-modified-saved-tensor__ipython7-older": dict(op="Sigmoid", node="SigmoidBackward"),
    "inplace-modified-saved-tensor__older-anomaly-block": dict(
        anomaly_node="SigmoidBackward", saved_by="SigmoidBackward", node="SigmoidBackward", shape=[4, 1]),
    "device-mismatch__windows-crlf-prompt": dict(reason="no-cuda"),
    "device-mismatch__torch2.2.2-2.15.0-no-driver": dict(reason="no-gpu", backend="CUDA"),
    "device-mismatch__no-gpu-visible": dict(reason="no-gpu", backend="CUDA"),
    "device-mismatch__cuda-two-devices-2.13": dict(
        reason="two-devices", devices=["cuda:0", "cpu"], argument=None, method=None),
    "device-mismatch__older-when-checking-argument": dict(
        devices=["cuda:0", "cpu"], argument="mat2", method="wrapper_CUDA_mm", op="mm"),
    "device-mismatch__older-addmm-mat1": dict(
        devices=["cpu", "cuda:0"], argument="mat1", method="wrapper_CUDA_addmm", op="addmm"),
    "device-mismatch__but-got-index": dict(
        devices=["cpu", "cuda:0"], argument="index", method="wrapper_CUDA__index_select", op="index_select"),
    "device-mismatch__addmm-expected-cpu-2.13": dict(
        devices=["cpu", "cuda:0"], argument="mat2", method=None, op="addmm"),
    "device-mismatch__input-weight": dict(reason="input-weight", devices=["cpu", "cuda"]),
    "view-inplace__older-unbindbackward0": dict(
        reason="multiple-views", op="Unbind", node="UnbindBackward0", node_guessed=False, output_nr=0),
    "view-inplace__older-selectbackward": dict(reason="multiple-views", op="Select", node="SelectBackward"),
    "view-inplace__custom-function-2.0": dict(reason="custom-function", op="BackwardHookFunction"),
    "view-inplace__deprecation-warning-1.7": dict(reason="multiple-views", op="SplitWithSizes"),
    "leaf-inplace__older-has-been-used": dict(view_of_leaf=False),
}
FIXTURE_FRAMES = {
    "inplace-modified-saved-tensor__ipython8-traceback": [
        {"file": "Cell In[4]", "line": 4, "function": "<module>", "code": "out.sum().backward()"}],
    "inplace-modified-saved-tensor__ipython8-ansi-crlf": [
        {"file": "Cell In[4]", "line": 4, "function": "<module>", "code": "out.sum().backward()"}],
    "inplace-modified-saved-tensor__ipython7-older": [
        {"file": "<ipython-input-5-2d2b8ba6b0a1>", "line": 3, "function": "<module>",
         "code": "out.sum().backward()"}],
    "inplace-modified-saved-tensor__older-anomaly-block": [
        {"file": "train.py", "line": 15, "function": "<module>", "code": "loss.backward()"}],
    "device-mismatch__windows-crlf-prompt": [
        {"file": "C:\\Users\\me\\proj\\train.py", "line": 5, "function": "<module>",
         "code": 'x = torch.zeros(3, device="cuda")'}],
    "device-mismatch__cuda-two-devices-2.13": [
        {"file": "/home/me/proj/train.py", "line": 21, "function": "<module>",
         "code": "loss = criterion(model(x), y)"},
        {"file": "/home/me/proj/model.py", "line": 9, "function": "forward",
         "code": "return self.head(h) + self.bias"}],
    "leaf-inplace__older-has-been-used": [
        {"file": "/path/to/dev/proml/tutorial/autograd.py", "line": 125, "function": "<module>",
         "code": "w.add_(1)"}],
}
# A frame line without ", in FUNC" and with trailing blanks (Python 2-era pastes, hand edits).
FRAME_WITHOUT_FUNCTION = 'Traceback (most recent call last):\n  File "<string>", line 1   \n    x\nRuntimeError: ' \
    "cannot resize variables that require grad"
FIXTURES = sorted(ERROR_TEXTS.glob("*.txt"))


def test_fixture_expectations_name_real_files():
    names = {p.stem for p in FIXTURES}
    assert set(FIXTURE_FIELDS) <= names and set(FIXTURE_FRAMES) <= names
    assert {p.stem.split("__")[0] for p in FIXTURES} <= set(kinds.KINDS) | {"none"}


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_stored_text(path):
    text = path.read_bytes().decode("utf-8", errors="replace")
    expected_kind = path.stem.split("__")[0]
    parsed = parse(text)
    if expected_kind == "none":
        assert parsed is None
        return
    _check(parsed, expected_kind, FIXTURE_FIELDS.get(path.stem, {}))
    assert "\n" not in parsed.message and "\x1b" not in parsed.message
    if path.stem in FIXTURE_FRAMES:
        assert parsed.frames == FIXTURE_FRAMES[path.stem]


def test_frame_without_function():
    assert parse(FRAME_WITHOUT_FUNCTION).frames == [
        {"file": "<string>", "line": 1, "function": "<module>", "code": "x"}]


def test_wrapped_message_is_one_logical_message():
    parsed = parse((ERROR_TEXTS / "inplace-modified-saved-tensor__cuda-wrapped-leaf.txt").read_text())
    assert parsed.message == (
        "one of the variables needed for gradient computation has been modified by an inplace operation: "
        "[torch.cuda.FloatTensor [32]] is at version 3; expected version 2 instead. Hint: enable anomaly "
        "detection to find the operation that failed to compute its gradient, with "
        "torch.autograd.set_detect_anomaly(True).")
    assert parsed.exception_type == "RuntimeError"


def test_ipython_arrow_alone_and_prompt_noise():
    text = (">>> out.sum().backward()\n----> 1 out.sum().backward()\n\n"
            "RuntimeError: grad can be implicitly created only for scalar outputs\n>>> ")
    parsed = parse(text)
    assert parsed.kind == "non-scalar-backward"
    assert parsed.frames == [{"file": None, "line": 1, "function": None, "code": "out.sum().backward()"}]


def test_pytest_style_prefix_and_previous_line_type():
    parsed = parse("E       RuntimeError: cannot resize variables that require grad")
    assert (parsed.kind, parsed.exception_type) == ("resize-requires-grad", "RuntimeError")
    parsed = parse("RuntimeError:\n  cannot resize variables that require grad")
    assert parsed.exception_type == "RuntimeError"


def test_previous_calculation_nodes_are_listed():
    text = ("UserWarning: Error detected in MulBackward0. Traceback of forward call that caused the error:\n"
            '  File "t.py", line 4, in <module>\n    y = x * w\n'
            "UserWarning: Previous calculation was induced by PowBackward0. Traceback of forward call that "
            "induced the previous calculation:\n"
            "RuntimeError: one of the variables needed for gradient computation has been modified by an "
            "inplace operation: [torch.FloatTensor [3]], which is output 0 of Mul, is at version 1; expected "
            "version 0 instead. Hint: the backtrace further above shows the operation that failed to compute "
            "its gradient. The variable in question was changed in there or anywhere later. Good luck!")
    parsed = parse(text)
    assert parsed.fields["anomaly_node"] == "MulBackward0"
    assert parsed.fields["anomaly_induced_by"] == ["PowBackward0"]
    assert parsed.fields["node"] == "MulBackward0" and parsed.fields["node_guessed"] is False
    assert parsed.fields["forward_frames"] == [{"file": "t.py", "line": 4, "function": "<module>",
                                                "code": "y = x * w"}]


def test_torchrun_rank_prefixes_are_dropped():
    text = ("[rank0]: Traceback (most recent call last):\n"
            '[rank0]:   File "/x/train.py", line 10, in <module>\n'
            "[rank0]:     loss.backward()\n"
            "[rank0]: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn\n")
    parsed = parse(text)
    assert parsed.kind == "no-grad-fn" and parsed.exception_type == "RuntimeError"
    assert parsed.frames == [{"file": "/x/train.py", "line": 10, "function": "<module>", "code": "loss.backward()"}]


def test_anomaly_frame_without_source_line():
    text = ("UserWarning: Error detected in ExpBackward0. Traceback of forward call that caused the error:\n"
            '  File "<stdin>", line 1, in <module>\n'
            " (Triggered internally at /pytorch/torch/csrc/autograd/python_anomaly_mode.cpp:122.)\n"
            "RuntimeError: one of the variables needed for gradient computation has been modified by an "
            "inplace operation: [torch.FloatTensor [3]], which is output 0 of Exp, is at version 1; expected "
            "version 0 instead. Hint: the backtrace further above shows the operation that failed to compute "
            "its gradient. The variable in question was changed in there or anywhere later. Good luck!\n")
    parsed = parse(text)
    assert parsed.fields["forward_frames"] == [{"file": "<stdin>", "line": 1, "function": "<module>", "code": None}]
    assert parsed.fields["node"] == "ExpBackward0" and parsed.fields["node_guessed"] is False


def test_unknown_texts_are_none():
    for text in ["", "RuntimeError: something else", "hello", "Traceback (most recent call last):\n",
                 "CUDA out of memory. Tried to allocate 2.00 GiB", "element x of tensors"]:
        assert parse(text) is None, text
    assert parse(None) is None  # type: ignore[arg-type]


def test_bytes_are_decoded():
    assert parse(b"RuntimeError: cannot resize variables that require grad\xff").kind == "resize-requires-grad"


# --------------------------------------------------------------------------
# describe(): the Kind's text, with fixes made concrete.

SIGMOID_TEXT = (
    "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace "
    "operation: [torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 1; expected version 0 "
    "instead. Hint: enable anomaly detection to find the operation that failed to compute its gradient, with "
    "torch.autograd.set_detect_anomaly(True, check_nan=False).")


def test_describe_inplace_is_concrete():
    d = describe(parse(SIGMOID_TEXT))
    assert set(d) >= {"kind", "title", "explanation", "causes", "fixes", "fields"}
    assert d["kind"] == INPLACE and d["title"] == kinds.get(INPLACE).title
    assert "output 0 of Sigmoid" in d["fixes"][0] and "sigmoid's output" in d["fixes"][0]
    assert "out.clone()" in d["fixes"][0]
    assert any("version 1" in e and "version 0" in e for e in d["evidence"])
    assert set(kinds.get(INPLACE).fixes) <= set(d["fixes"])


@pytest.mark.parametrize("path", [p for p in FIXTURES if not p.stem.startswith("none__")],
                         ids=lambda p: p.stem)
def test_describe_every_stored_text(path):
    parsed = parse(path.read_bytes().decode("utf-8", errors="replace"))
    d = describe(parsed)
    assert d["kind"] == parsed.kind and d["fields"] == parsed.fields
    assert d["title"] and d["explanation"] and d["causes"] and d["fixes"]
    assert all(isinstance(s, str) and s for s in d["fixes"] + d["causes"] + d["evidence"])


def test_describe_device_and_other_use_fields():
    d = describe(parse((ERROR_TEXTS / "device-mismatch__older-when-checking-argument.txt").read_text()))
    assert "`mat2` to cuda:0" in d["fixes"][0]
    d = describe(parse("RuntimeError: The expanded size of the tensor (3) must match the existing size (2) at "
                       "non-singleton dimension 0.  Target sizes: [3, -1].  Tensor sizes: [2, 3]"))
    assert d["title"].startswith("expand") and "Dimension 0 has size 2" in d["evidence"][0]


# --------------------------------------------------------------------------
# The knowledge base.

# The hazard kinds: wrong results or memory held, nothing raised.
HAZARDS = {"silent-saved-tensor-write", "silent-non-finite-value", "graph-kept-alive", "view-pins-storage",
           "hook-holds-tensors", "container-grows", "kept-value-changed", "duplicate-index-write", "shared-state",
           "running-stats-updated-twice", "ctx-attribute-changed"}
REQUIRED = {"inplace-modified-saved-tensor", "backward-twice", "no-grad-fn", "leaf-inplace", "view-inplace",
            "overlapping-write", "non-scalar-backward", "non-float-requires-grad", "numpy-requires-grad",
            "resize-requires-grad", "device-mismatch", "other", "silent-saved-tensor-write",
            "ddp-unused-parameters", "ddp-mark-ready-twice", "non-leaf-requires-grad", "inference-tensor-saved",
            "double-backward-unsupported", "gradient-shape-mismatch", "unused-input", "non-leaf-grad-none",
            "float-has-no-backward", "inplace-backward-unsupported", "saved-detached-inplace", "checkpoint-mismatch",
            "forward-ad", "invalid-gradient", "vmap-inplace", "functorch-transform", "non-finite-value"} | HAZARDS


def test_kinds_are_complete_and_well_formed():
    assert set(kinds.KINDS) == REQUIRED
    assert {k.code for k in kinds.KINDS.values() if k.hazard} == HAZARDS
    for code, kind in kinds.KINDS.items():
        assert kinds.get(code) is kind and kind.code == code
        assert kind.title.endswith(".") and ". " not in kind.title, code
        sentences = re.split(r"(?<=[.!?])\s+(?=[A-Z`])", kind.explanation)
        assert 2 <= len(sentences) <= 4, code
        assert kind.causes and kind.fixes
    with pytest.raises(KeyError, match="unknown kind"):
        kinds.get("nope")
    with pytest.raises(Exception):
        kinds.get("other").title = "x"  # frozen


def test_parse_only_answers_known_codes():
    codes = set()
    for path in FIXTURES:
        parsed = parse(path.read_bytes().decode("utf-8", errors="replace"))
        if parsed:
            codes.add(parsed.kind)
    assert codes <= set(kinds.KINDS) - {"silent-saved-tensor-write"}


def test_modules_are_torch_free_and_never_evaluate_text():
    # the patterns and their decoders live in the kind modules: they are held to the same rule
    kind_modules = sorted((PKG / "kinds").glob("*.py"))
    assert kind_modules
    for path in (PKG / "messages.py", *kind_modules):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(a.name.split(".")[0] == "torch" for a in node.names), path
            if isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in {"torch", "subprocess", "os"}, path
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"eval", "exec", "compile", "__import__"}, path
    code = "import sys, tensorscope.messages; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=HERE.parent)


# --------------------------------------------------------------------------
# Robustness: arbitrary input, noise around a message, adversarial sizes.

EMBEDDED = [
    SIGMOID_TEXT,
    "RuntimeError: element 3 of tensors does not require grad and does not have a grad_fn",
    "RuntimeError: a view of a leaf Variable that requires grad is being used in an in-place operation.",
    "RuntimeError: Output 1 of Split is a view and is being modified inplace. This view is the output of a "
    "function that returns multiple views. Such functions do not allow the output views to be modified "
    "inplace. You should replace the inplace operation by an out-of-place one.",
    (ERROR_TEXTS / "device-mismatch__older-when-checking-argument.txt").read_text().strip(),
    "RuntimeError: setStorage: sizes [5, 5], strides [0, 4], storage offset 0, and itemsize 8 requiring a "
    "storage size of 136 are out of bounds for storage of size 72",
]
FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.text(max_size=3000))
def test_parse_never_raises_on_text(text):
    started = time.process_time()
    result = parse(text)
    assert result is None or result.kind in kinds.KINDS
    assert time.process_time() - started < 0.5


@FUZZ
@given(st.binary(max_size=3000))
def test_parse_never_raises_on_bytes(data):
    started = time.process_time()
    result = parse(data.decode("utf-8", errors="replace"))
    if result is not None:
        describe(result)
    assert time.process_time() - started < 0.5


@FUZZ
@given(st.sampled_from(EMBEDDED), st.text(max_size=400), st.text(max_size=400))
def test_message_in_noise_is_recognised(message, before, after):
    alone = parse(message)
    parsed = parse(before + "\n" + message + "\n" + after)
    assert parsed is not None
    assert (parsed.kind, parsed.fields, parsed.message) == (alone.kind, alone.fields, alone.message)


@FUZZ
@given(st.sampled_from(EMBEDDED), st.lists(st.sampled_from(["\x1b[0;31m", "\x1b[0m", "\r\n", "\n", "  "]),
                                             max_size=5))
def test_message_with_terminal_codes_before(message, codes):
    parsed = parse("".join(codes) + message.replace(" ", " " + "".join(c for c in codes if "\x1b" in c), 3))
    assert parsed is not None and parsed.kind == parse(message).kind


MB = 1_000_000
ADVERSARIAL = {
    "inplace-heads": ("one of the variables needed for gradient computation has been modified by an inplace "
                      "operation: [torch.FloatTensor [" + "1, " * 100) * (MB // 400),
    "output-of-name": "Output 0 of " + "A" * MB,
    "view-heads": "Output 0 of Unbind is a view and " * (MB // 33),
    "whitespace": "one" + " " * MB + "x",
    "ansi": "\x1b[" + "0" * MB,
    "osc": "\x1b]" + "a" * MB,
    "file-quotes": 'File "' * (MB // 6),
    "frames": "Traceback (most recent call last)\n" + '  File "x.py", line 1, in f\n    y\n' * (MB // 32)
              + "RuntimeError: cannot resize variables that require grad",
    "ipython-arrows": "----> 1 x\n" * (MB // 10) + "cannot resize variables that require grad",
    "old-ipython": ("a" * 200 + " in f(\n      1 x\n") * (MB // 220) + "cannot resize variables that require grad",
    "old-ipython-many-in": "Traceback (most recent call last)\n" + ("x in f(" * 1100 + "\n      1 x\n") * (MB // 7700)
                           + "cannot resize variables that require grad",
    "exception-prefix": "RuntimeError" * (MB // 12) + ": cannot resize variables that require grad",
    "anomaly": "Error detected in " * (MB // 18),
    "digits": "element " + "9" * MB,
    "a-spaces": "a " * (MB // 2),
    "rank-prefixes": "[rank0]: " * (MB // 9),
    "devices": "Expected all tensors to be on the same device, but found at least two devices, " * (MB // 80),
}


# Time limits below are CPU time, so a busy machine does not make them flaky.
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_megabyte_is_fast(name):
    started = time.process_time()
    parse(ADVERSARIAL[name])
    assert time.process_time() - started < 1.0, name


def test_huge_input_scans_the_tail_only():
    noise = "x" * (MAX_SCAN + 500_000)
    started = time.process_time()
    assert parse(noise + "\n" + SIGMOID_TEXT).fields["op"] == "Sigmoid"
    assert parse(SIGMOID_TEXT + "\n" + noise) is None  # beyond the scanned tail
    assert time.process_time() - started < 2.0


# --------------------------------------------------------------------------
# One document shape for the three forms of `explain --json` (the real CLI).

SHAPE_PROGRAM = """import torch
a = torch.randn(3, requires_grad=True)
out = a.sigmoid()
out.detach().zero_()
out.sum().backward()
"""


@needs_torch
def test_explain_json_has_one_shape_for_program_stdin_and_message(tmp_path):
    from _cli import run_cli, run_python, validate_against_schema

    prog = tmp_path / "sig.py"
    prog.write_text(SHAPE_PROGRAM)
    rc_py, _, traceback_text = run_python(prog, fresh=False)
    assert rc_py == 1 and "modified by an inplace operation" in traceback_text
    message = traceback_text.strip().splitlines()[-1]
    docs = {
        "program": run_cli("explain", "--json", str(prog)),
        "stdin": run_cli("explain", "--json", "-", stdin=traceback_text),
        "message": run_cli("explain", "--message", message, "--json"),
    }
    for form, (rc, out, err, doc) in docs.items():
        assert rc == 1 and doc is not None, (form, rc, out[:300], err[-300:])
        assert validate_against_schema(doc), "the schema file is missing"
        assert doc["command"] == "explain" and doc["schema_version"] == 4, form
        assert doc["diagnosis"]["kind"] == INPLACE, (form, doc["diagnosis"])
        assert doc["diagnosis"]["title"] and doc["diagnosis"]["fix"], form
    keys = {form: set(d[3]) - {"message"} for form, d in docs.items()}
    assert keys["stdin"] == keys["message"] == keys["program"], keys
    assert docs["program"][3]["program"]["exit_status"] == 1
    for form in ("stdin", "message"):
        doc = docs[form][3]
        assert doc["program"] is None and doc["tensors"] == [] and doc["hazards"] == []
        assert doc["message"]["exception_type"] == "RuntimeError", doc["message"]
        assert doc["diagnosis"]["fix"] == doc["diagnosis"]["fixes"][0]
    assert docs["stdin"][3]["message"]["pinpoint"] == f"tensorscope explain {prog}"

    rc, out, err, doc = run_cli("explain", "--message", "hello world", "--json")
    assert rc == 3 and doc is not None and validate_against_schema(doc), (rc, out, err)
    assert doc["diagnosis"] is None and doc["program"] is None and doc["message"] is None
