"""The failure kinds tensorscope explains: one module per kind, and the registry built from them.

Each module ``tensorscope/kinds/<code with underscores>.py`` holds its kind's code, title,
explanation, causes and fixes (``KIND``), the message patterns that recognise it in a
pasted error text (``PATTERNS``), the advice drawn from a message's decoded fields
(``advise``), and its explainer over the report's evidence (``explain``). Everything
here is torch-free. tests/test_kinds.py keeps the registry exhaustive.

Example::

    >>> from tensorscope import kinds
    >>> kinds.get("backward-twice").title
    'backward() ran a second time through a graph whose saved tensors were already freed.'
"""

from __future__ import annotations

import importlib

from tensorscope.kinds._base import Kind, Pattern

#: The kind modules, in the order their message patterns are tried (ties go to the first).
MODULES = (
    "inplace_modified_saved_tensor", "backward_twice", "no_grad_fn", "leaf_inplace", "view_inplace",
    "overlapping_write", "non_scalar_backward", "non_float_requires_grad", "numpy_requires_grad",
    "resize_requires_grad", "device_mismatch", "ddp_unused_parameters", "ddp_mark_ready_twice",
    "non_leaf_requires_grad", "inference_tensor_saved", "double_backward_unsupported", "gradient_shape_mismatch",
    "unused_input", "non_leaf_grad_none", "float_has_no_backward", "inplace_backward_unsupported",
    "saved_detached_inplace", "checkpoint_mismatch", "forward_ad", "invalid_gradient",
    "other", "silent_saved_tensor_write", "kept_value_changed", "duplicate_index_write",
)

_mods = [importlib.import_module(f"{__name__}.{name}") for name in MODULES]

#: Every kind, keyed by its stable code.
KINDS: dict[str, Kind] = {m.KIND.code: m.KIND for m in _mods}
#: code -> its module.
MODULE_OF = {m.KIND.code: m for m in _mods}
#: (code, Pattern) for every message pattern a kind module declares.
PATTERNS: tuple = tuple((m.KIND.code, p) for m in _mods for p in getattr(m, "PATTERNS", ()))
#: code -> advise(fields) -> (title or None, evidence, fixes).
ADVICE = {m.KIND.code: m.advise for m in _mods if hasattr(m, "advise")}
#: code -> explain(evidence) -> diagnosis dict or None.
EXPLAINERS = {m.KIND.code: m.explain for m in _mods if hasattr(m, "explain")}
#: code -> recognise(evidence) -> bool, for kinds seen in the evidence when no message names them.
RECOGNISERS = {m.KIND.code: m.recognise for m in _mods if hasattr(m, "recognise")}


def get(code: str) -> Kind:
    """Return the :class:`Kind` for ``code``; raise ``KeyError`` naming the known codes."""
    try:
        return KINDS[code]
    except KeyError:
        raise KeyError(f"unknown kind {code!r}; known: {', '.join(KINDS)}") from None


__all__ = ["ADVICE", "EXPLAINERS", "KINDS", "Kind", "MODULES", "MODULE_OF", "PATTERNS", "Pattern", "RECOGNISERS",
           "get"]
