"""The `device-mismatch` kind: tensors on different devices met in one op, or CUDA was asked for on a build without it."""

from __future__ import annotations

from tensorscope.kinds._base import Kind

KIND = Kind(
    code='device-mismatch',
    title='Tensors on different devices met in one op, or CUDA was asked for on a build without it.',
    explanation=(
        'Every tensor an op reads must be on the same device; PyTorch never moves them implicitly. A '
        'CPU-only build of PyTorch cannot create CUDA tensors at all.'
    ),
    causes=(
        (
            'The model was moved with `.to(device)` but an input, target or new tensor '
            '(`torch.zeros(...)`, `torch.tensor(...)`) stayed on the CPU.'
        ),
        'A tensor created inside `forward` without `device=`.',
        "`device='cuda'` or `.cuda()` on a PyTorch build without CUDA.",
    ),
    fixes=(
        "Move every input to the model's device: `x = x.to(next(model.parameters()).device)`.",
        'Create new tensors on the right device: `torch.zeros(n, device=x.device)`.',
        "Choose the device once: `device = 'cuda' if torch.cuda.is_available() else 'cpu'`.",
    ),
)


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/device_mismatch.py)."""
    from tensorscope.analysis import device_mismatch

    return device_mismatch.explain(ev)
