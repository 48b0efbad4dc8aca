"""The compiled storage key and version (NOTE [A storage key read in place] in tensorscope/instrument/speedups.py)
against torch's own reads, on every kind of tensor a program can hand a write or a step: the same key, or the same
exception; the same version, or no in-place read (torch's getter then)."""
import pytest
import torch

from tensorscope import compat
from tensorscope.instrument import recorder, speedups  # noqa: F401 (recorder sets the key up at import)

fast = speedups.storage_key()
_version_in_place = getattr(speedups._SPEEDUPS, "version_in_place", None)
pytestmark = [pytest.mark.skipif(fast is None, reason="the accelerator is not built (or its key not found)"),
              pytest.mark.filterwarnings("ignore::UserWarning")]  # beta/prototype/deprecation notes of torch's


def _same(t):
    """(kind of outcome, value) of both reads of ``t``, asserted equal; returns torch's outcome."""
    outcomes = []
    for read in (compat.storage_key, fast):
        try:
            outcomes.append(("key", read(t)))
        except Exception as e:  # torch's refusal must be the fast read's too
            outcomes.append(("raises", type(e)))
    assert outcomes[0] == outcomes[1], (t.__class__, outcomes)
    try:
        version = t._version
    except Exception:
        version = None  # an inference tensor: no counter, and no in-place read
    read = _version_in_place(t)
    assert read is None or read == version, (t.__class__, read, version)
    return outcomes[0]


def _kinds():
    base = torch.arange(12.0).reshape(3, 4)
    p = torch.nn.Parameter(torch.zeros(3))
    out = {
        "plain": base, "view": base[1:], "transposed": base.t(), "strided": base[:, ::2], "scalar": torch.zeros(()),
        "empty": torch.zeros(0), "int": torch.ones(3, dtype=torch.int64), "bool": torch.zeros(2, dtype=torch.bool),
        "half": torch.zeros(2, dtype=torch.float16), "parameter": p, "param_view": p[1:],
        "requires_grad": torch.zeros(2, requires_grad=True), "detached": p.detach(), "meta": torch.zeros(2, device="meta"),
        "complex": torch.zeros(2, dtype=torch.complex64), "real_view": torch.view_as_real(torch.zeros(2, dtype=torch.complex64)),
        "conj": torch.zeros(2, dtype=torch.complex64).conj(), "neg_view": torch.zeros(2, dtype=torch.complex64).conj().imag,
        "expanded": torch.zeros(1).expand(5), "numpy": torch.from_numpy(__import__("numpy").zeros(3)),
        "sparse_coo": torch.zeros(2, 2).to_sparse(), "sparse_csr": torch.eye(2).to_sparse_csr(),
        "nested": torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]),
        "quantized": torch.quantize_per_tensor(torch.zeros(2), 0.1, 0, torch.quint8),
    }
    try:
        out["mkldnn"] = torch.zeros(2, 2).to_mkldnn()
    except Exception:
        pass
    moved = torch.zeros(3)
    moved.data = torch.ones(5)  # the same TensorImpl, another storage
    out["data_set"] = moved
    s = torch.zeros(3)
    s.set_(torch.ones(4))
    out["set_"] = s
    bumped = torch.zeros(4)
    for _ in range(7):
        bumped.mul_(2)
    out["bumped"], out["bumped_view"] = bumped, bumped[2:]
    with torch.inference_mode():
        out["inference"] = torch.zeros(3)
    return out


def test_storage_key_in_place_equals_torchs():
    kinds = _kinds()
    outcomes = {name: _same(t) for name, t in kinds.items()}
    # the in-place version read applies to plain tensors (and reads what torch's getter reads, checked in _same)
    assert _version_in_place(kinds["bumped_view"]) == 7 and _version_in_place(kinds["inference"]) is None
    # the fast read was used where it applies (the keys torch gives) and torch's refusals stayed refusals
    assert outcomes["plain"] == outcomes["view"] == outcomes["transposed"]
    assert outcomes["parameter"] == outcomes["param_view"] == outcomes["detached"]
    assert outcomes["sparse_coo"][0] == "raises"


def test_storage_key_inside_functorch_transforms():
    seen = []

    def f(x):
        seen.append(_same(x))
        y = x * 2
        seen.append(_same(y))
        return y.sum()

    x = torch.arange(6.0).reshape(2, 3)
    torch.vmap(f)(x)  # batched tensors
    torch.func.grad(f)(torch.ones(3))  # grad-wrapped tensors
    torch.func.functionalize(f)(torch.ones(3))  # functional tensors
    assert len(seen) == 6


def test_storage_key_of_a_subclass_is_torchs():
    class Sub(torch.Tensor):
        pass

    t = torch.zeros(3).as_subclass(Sub)
    assert _same(t) == ("key", compat.storage_key(torch.Tensor._make_subclass(torch.Tensor, t)))
