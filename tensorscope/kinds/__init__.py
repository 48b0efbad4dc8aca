"""The failure kinds tensorscope explains: one module per kind, and the registry built from them.

Each module ``tensorscope/kinds/<code with underscores>.py`` holds everything about its kind:
its code, title, explanation, causes and fixes (``KIND``), the message patterns that recognise
it in a pasted error text (``PATTERNS``), the advice drawn from a message's decoded fields
(``advise``), and its explainer over the report's evidence (``explain``). Everything here is
torch-free and imports nothing from instrument/. tests/test_kinds.py keeps the registry exhaustive.

NOTE [Adding a kind]
Adding a kind is one file and two lines:

1. ``tensorscope/kinds/<code with underscores>.py`` with ``KIND`` and ``explain(ev)`` (a
   diagnosis dict from :func:`tensorscope.kinds._base.diagnosis`, or None for the generic
   one), and ``PATTERNS``/``advise``/``recognise`` when the kind has a message of its own;
2. its name in ``MODULES`` below (the order message patterns are tried in);
3. one row in docs/errors.md (tests/test_kinds.py checks the table against the registry).

A hazard (wrong results, no error) is added the same way, with ``Kind(..., hazard=True)`` and
``explain(ev, hazard)`` over one recorded hazard fact, which names its kind under ``"kind"``
(the recorder's silent-write facts, which predate hazard kinds, name none: ``SILENT_WRITE``).
tensorscope/verdict.py finds both through ``EXPLAINERS`` and ``HAZARD_EXPLAINERS``, never by name.

What several kinds share lives beside them in small named modules: ``_base`` (what a kind
module holds, ``Evidence``, ``site``, ``where``, ``diagnosis``), ``_fixes`` (out-of-place
rewrites and clones), ``_message`` (PyTorch's message wording), ``_provenance`` (where a
graph was cut) and ``_ddp`` (DistributedDataParallel's models and broadcasts). A shared
module never imports a kind module; reading the program's source is tensorscope/source.py.

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
    "saved_detached_inplace", "checkpoint_mismatch", "forward_ad", "invalid_gradient", "vmap_inplace",
    "functorch_transform", "non_finite_value",
    "other", "silent_saved_tensor_write", "silent_non_finite_value",
    "graph_kept_alive", "view_pins_storage", "hook_holds_tensors", "container_grows",
    "kept_value_changed", "duplicate_index_write", "shared_state", "running_stats_updated_twice",
    "ctx_attribute_changed",
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
#: code -> explain(evidence) -> diagnosis dict or None, for the failure kinds.
EXPLAINERS = {m.KIND.code: m.explain for m in _mods if hasattr(m, "explain") and not m.KIND.hazard}
#: code -> explain(evidence, hazard) -> diagnosis dict, for the hazard kinds.
HAZARD_EXPLAINERS = {m.KIND.code: m.explain for m in _mods if m.KIND.hazard}
#: The kind of a recorded hazard that names none (the recorder's silent writes).
SILENT_WRITE = "silent-saved-tensor-write"
#: code -> recognise(evidence) -> bool, for kinds seen in the evidence when no message names them.
RECOGNISERS = {m.KIND.code: m.recognise for m in _mods if hasattr(m, "recognise")}


def get(code: str) -> Kind:
    """Return the :class:`Kind` for ``code``; raise ``KeyError`` naming the known codes."""
    try:
        return KINDS[code]
    except KeyError:
        raise KeyError(f"unknown kind {code!r}; known: {', '.join(KINDS)}") from None


__all__ = ["ADVICE", "EXPLAINERS", "HAZARD_EXPLAINERS", "KINDS", "Kind", "MODULES", "MODULE_OF", "PATTERNS", "Pattern",
           "RECOGNISERS", "SILENT_WRITE", "get"]
