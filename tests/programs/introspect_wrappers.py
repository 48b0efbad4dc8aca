"""Introspection of every attribute tensorscope replaces, printed; the same under python and tensorscope.

The list comes from tensorscope's own Patcher (a dry run that replaces nothing), so a new wrapper is
probed without being listed here. For each attribute, on the class or module and bound to an
instance: repr, type name and __class__, the inspect predicates, __name__/__qualname__/__module__/
__doc__, whether __wrapped__/__signature__ exist, inspect.signature, help() text, setting and deleting
an attribute on it, copy/deepcopy, and `del instance.name`. Facets that differ under tensorscope are printed too,
on lines that start with "known-difference" (README, Known limits), so nothing is skipped silently.
"""
import copy
import hashlib
import weakref
import inspect
import pydoc
import re
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tensorscope.instrument.patches import Patcher

_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def clean(value) -> str:
    return _ADDR.sub("0xADDR", str(value))


def outcome(fn):
    """What calling fn gives: its value, or the exception python raises (type and text)."""
    try:
        return clean(fn())
    except Exception as e:  # noqa: BLE001 - the exception itself is the fact
        return f"raises {type(e).__name__}: {clean(e)}"


def digest(text: str) -> str:
    return f"{len(text)} chars sha1 {hashlib.sha1(text.encode()).hexdigest()[:12]}"


def facets(obj) -> list:
    return [
        ("repr", outcome(lambda: repr(obj))),
        ("type name", type(obj).__name__),
        ("__class__", outcome(lambda: obj.__class__.__qualname__)),
        ("predicates", [f.__name__ for f in (inspect.isbuiltin, inspect.isfunction, inspect.ismethod,
                                            inspect.ismethoddescriptor, inspect.isdatadescriptor,
                                            inspect.isroutine, callable) if f(obj)]),
        ("__name__", outcome(lambda: obj.__name__)),
        ("__qualname__", outcome(lambda: obj.__qualname__)),
        ("__module__", outcome(lambda: obj.__module__)),
        ("__doc__", outcome(lambda: digest(obj.__doc__ or ""))),
        ("__wrapped__", hasattr(obj, "__wrapped__")),
        ("__signature__", hasattr(obj, "__signature__")),
        ("signature", outcome(lambda: inspect.signature(obj))),
        ("help", outcome(lambda: digest(pydoc.render_doc(obj, renderer=pydoc.plaintext)))),
        ("getdoc", outcome(lambda: digest(inspect.getdoc(obj) or ""))),
        ("copy", outcome(lambda: (copy.copy(obj) is obj, copy.deepcopy(obj) is obj))),
        ("set attribute", outcome(lambda: setattr(obj, "_probe_attr", 1))),
        ("del attribute", outcome(lambda: delattr(obj, "_probe_attr"))),
        ("weakref", outcome(lambda: weakref.ref(obj)() is obj)),
    ]


def instance_of(owner):
    """An instance to bind owner's attributes to (None for modules)."""
    if owner is torch.Tensor:
        return torch.ones(2, requires_grad=True)
    if owner is torch.set_grad_enabled:
        return torch.set_grad_enabled(True)
    if owner is TorchDispatchMode:
        return TorchDispatchMode()
    if isinstance(owner, type) and issubclass(owner, torch.distributions.Distribution):
        return owner.__new__(owner)  # its methods bind without the parameters a real one needs
    if isinstance(owner, type) and issubclass(owner, torch.optim.Optimizer):
        return torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)  # the base class needs params
    if owner is type(torch._VF):  # the class of the one module object torch._VF
        return torch._VF
    if isinstance(owner, type):
        return owner()
    return None


def where(owner) -> str:
    return getattr(owner, "__qualname__", None) or owner.__name__


targets = Patcher().plan()
print("attributes tensorscope replaces:", len(targets))
for owner, name in sorted(targets, key=lambda t: (where(t[0]), t[1])):
    label = f"{where(owner)}.{name}"
    attr = inspect.getattr_static(owner, name)
    got = getattr(owner, name)
    # type(x) itself (`type(x) is`), the wrapper's identity (`is`, `==`, hash), what pickle gives back
    # (the original) and where it is stored (vars(torch.Tensor), not vars(TensorBase)) are what a
    # wrapper cannot fake (README, Known limits)
    print(f"known-difference {label}: type identity, object identity, pickle, owner dict not compared")
    for facet, value in facets(got):
        print(f"{label} {facet}: {value}")
    print(f"{label} static type name: {type(attr).__name__}")
    inst = instance_of(owner)
    if inst is None:
        continue
    bound = getattr(inst, name)
    if isinstance(bound, torch.Tensor) or isinstance(bound, bool):  # a property's value
        print(f"{label} instance value: {type(bound).__name__}")
    else:
        for facet, value in facets(bound)[:14]:
            print(f"{label} bound {facet}: {value}")
        print(f"{label} bound equal: {bound == getattr(inst, name)} hash: {hash(bound) == hash(getattr(inst, name))}")
    print(f"{label} del instance.{name}: {outcome(lambda: delattr(inst, name))}")
    print(f"{label} set instance.{name}: {outcome(lambda: setattr(inst, name, getattr(inst, name)))}")
sys.stdout.flush()
