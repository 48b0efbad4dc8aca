"""Wrappers that read as the attributes they replace (see NOTE [Transparent wrappers]).

``patches.py`` decides what to wrap and what a wrapper records; this module dresses each
wrapper function as the original so that the program cannot tell them apart by ``repr``,
``help()``, ``inspect``, ``isinstance``, copying or ``del``.
"""

from __future__ import annotations

import copy
import sys
import types

# torch-free: exits.py and children.py dress their wrappers with ``named`` before the program has
# imported torch (NOTE [Instrumenting at the program's import of torch] in tensorscope/torch_import.py)


# NOTE [Transparent wrappers]
# A replaced attribute must look like the original to the program: ``repr``, ``help()``,
# ``inspect.signature``, ``__name__``/``__qualname__``/``__doc__``/``__module__``, no
# ``__wrapped__``, ``isinstance(torch.relu_, types.BuiltinFunctionType)``, pickling by name,
# ``del x.data``, ``weakref.ref``. A Python function cannot do that (its repr, type and
# attributes are its own), so each wrapper is an instance of a small class named as the
# original's type:
# - calling it runs the wrapper function directly: ``__call__`` is a slot holding that
#   function, and the interpreter calls what the slot's descriptor returns (no extra Python
#   frame, so ``sys._getframe(1)`` in a wrapper is still the caller's frame);
# - every attribute it does not define is read from, written to and deleted on the
#   original (its ``_orig`` slot), and ``__class__`` is the original's type (what
#   ``isinstance`` and ``inspect`` look at); it can be weakly referenced where the original can;
# - as a descriptor it binds as the original does: a C method gives a bound object that
#   reads like ``<built-in method add_ of Tensor object at 0x...>`` (its call stays in C: NOTE
#   [Bound wrappers are not partials]), a Python function gives a bound method, a builtin
#   function does not bind;
# - properties (``.data``, ``requires_grad``) are data descriptors whose getter, setter and
#   deleter are the recording ones and the original's (a class each: the interpreter looks
#   ``__get__`` and ``__set__`` up on the type).
# The wrappers of originals of one type and kind share one class (about 10 classes for 456
# wrappers): a class per wrapper made 13 objects each, 5,900 in all, and on a small program
# those set off a full pass of the cyclic collector over torch's heap (0.06 to 0.16 s).
# What remains different is ``type(...) is`` and object identity (README, Known limits).

# NOTE [A wrapper equals its original]
# A program's ``__torch_function__`` (a ``TorchFunctionMode``, a tensor subclass) gets as ``func`` what torch
# looks up by name on ``torch.Tensor`` (``Tensor.clone``, ``Tensor.data.__get__``): under tensorscope that is the
# wrapper. Code that compares ``func`` with the C class's own attribute (``func == torch._C.TensorBase.clone``,
# as torch 2.2's ``FakeCopyMode`` does when dynamo copies a compiled module's parameters to fake tensors), or
# looks it up in a dict keyed by the originals (``HANDLED_FUNCTIONS[func]``), must find it: a wrapper is equal
# to its original and hashes as it does, so either one finds the other in a dict or set. ``is`` still tells
# them apart. A property's recording getter and setter are named ``__get__`` and ``__set__``, as the getset
# descriptor's method-wrappers are (``func.__name__`` in a logging mode).

_FunctionType = type(lambda: None)
_MethodType = type((lambda: None).__get__(0))


def _forward(name):
    def get(self):
        return getattr(self._orig, name)

    return property(get)


def _own_class(self):
    return type(self._orig)


# shared by every wrapper class
_DOC = _forward("__doc__")
_MODULE = _forward("__module__")
_CLASS = property(_own_class)


class Transparent:
    """Base class of every wrapper tensorscope installs (see NOTE [Transparent wrappers]).

    This base does not bind, as a builtin function does not: ``inspect.ismethoddescriptor``
    is false for it, as for the original.
    """

    __slots__ = ("_orig",)
    _binds = "builtin"

    def __repr__(self):
        return repr(self._orig)

    # equal to the original, and hashed as it is (see NOTE [A wrapper equals its original])
    def __eq__(self, other):
        orig = self._orig
        if isinstance(other, Transparent):
            other = other._orig
        return orig == other

    def __hash__(self):
        return hash(self._orig)

    def __getattr__(self, name):
        return getattr(self._orig, name)

    def __setattr__(self, name, value):
        setattr(self._orig, name, value)

    def __delattr__(self, name):
        delattr(self._orig, name)

    def __dir__(self):
        return dir(self._orig)

    def __reduce_ex__(self, protocol):
        if self._binds == "function":  # by name, as pickle saves a function: finds this wrapper
            return self._orig.__qualname__
        return self._orig.__reduce_ex__(protocol)  # e.g. (getattr, (TensorBase, "add_"))

    def __reduce__(self):
        return self.__reduce_ex__(2)

    def __copy__(self):  # as the original copies: functions to themselves, a getset descriptor raises
        orig = self._orig
        out = copy.copy(orig)
        return self if out is orig else out

    def __deepcopy__(self, memo):
        orig = self._orig
        out = copy.deepcopy(orig, memo)
        return self if out is orig else out


class _TransparentCallable(Transparent):
    """A wrapped callable: ``__call__`` is a slot holding the wrapper function (see the NOTE)."""

    __slots__ = ("__call__",)


class _TransparentFunction(_TransparentCallable):
    """A wrapped Python function: binds to an instance as a bound method of the wrapper."""

    __slots__ = ()
    _binds = "function"

    def __get__(self, obj, cls=None):
        return self if obj is None else _MethodType(self, obj)


class _TransparentMethod(_TransparentCallable):
    """A wrapped C method (``TensorBase.add_``, a slot wrapper): binds like it (see ``_BoundBuiltin``)."""

    __slots__ = ()
    _binds = "method"
    _bound_cls = None

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        out = _NEW(self._bound_cls)
        _SET_BOUND(out, _MethodType(self, obj))
        return out


class _TransparentClassMethod(_TransparentCallable):
    """A wrapped C classmethod (``Function.apply`` from torch 2.15, NOTE [Function.apply written in C from
    torch 2.15] in compat.py): binds to the class, from the class or an instance, as the original does."""

    __slots__ = ()
    _binds = "classmethod"

    def __get__(self, obj, cls=None):
        return _bind(_BoundToClass, self, cls if cls is not None else type(obj))


class _BoundBuiltin:
    """``x.add_`` under tensorscope: calls the wrapper with ``x``, reads like the original's bound method.

    Its ``__call__`` slot holds ``MethodType(wrapper, x)`` (see NOTE [Bound wrappers are not partials]).
    """

    __slots__ = ("__call__",)

    def _bound(self):
        method = self.__call__
        return method.__func__._orig.__get__(method.__self__)

    def __repr__(self):
        return repr(self._bound())

    def __getattr__(self, name):
        return getattr(self._bound(), name)

    def __eq__(self, other):
        if isinstance(other, _BoundBuiltin):
            return self.__call__ == other.__call__  # the same wrapper bound to the same object (`is`)
        return NotImplemented

    def __hash__(self):
        return hash(self.__call__)

    def __reduce_ex__(self, protocol):
        return self._bound().__reduce_ex__(protocol)

    def __copy__(self):  # as the original bound method copies: itself, or a new one (a method-wrapper)
        bound = self._bound()
        return self if copy.copy(bound) is bound else _bind(type(self), self.__call__.__func__, bound.__self__)

    def __deepcopy__(self, memo):  # a method-wrapper deep-copies its tensor: bind to the copy
        bound = self._bound()
        out = copy.deepcopy(bound, memo)
        return self if out is bound else _bind(type(self), self.__call__.__func__, out.__self__)

    __doc__ = property(lambda self: self._bound().__doc__)
    __module__ = property(lambda self: self._bound().__module__)
    __class__ = property(lambda self: type(self._bound()))


# NOTE [Bound wrappers are not partials]
# ``x.add_`` under tensorscope is an instance of a small class whose ``__call__`` slot holds
# ``MethodType(wrapper, x)``: the call stays in C (the interpreter calls what the slot holds, as for
# ``Transparent``) and the object is nothing but that, so ``inspect`` takes it for the original bound
# method on every Python. It was a ``functools.partial`` subclass, and Python 3.13's
# ``inspect._signature_from_callable`` tests ``isinstance(obj, functools.partial)`` (the real type)
# before ``_signature_is_builtin(obj)`` (3.10-3.12 the other way round): it then asked the signature
# of ``partial.func``, the unbound wrapper, and a C method with no ``__text_signature__`` raised
# "no signature found for builtin <method 'add_' of 'torch._C.TensorBase' objects>" where python
# names "<built-in method add_ of Tensor object at 0x...>". A partial also answered
# ``isinstance(x.add_, functools.partial)`` and ``x.add_.func``/``.args``, which the original does not.
_SET_BOUND = _BoundBuiltin.__call__.__set__
_NEW = object.__new__


def _bind(cls, wrapper, obj):
    out = _NEW(cls)
    _SET_BOUND(out, _MethodType(wrapper, obj))
    return out


class _BoundToClass(_BoundBuiltin):
    """``Fn.apply`` under tensorscope where ``apply`` is a C classmethod: reads like the original bound to ``Fn``."""

    __slots__ = ("__weakref__",)  # a builtin method can be weakly referenced

    def _bound(self):
        method = self.__call__
        return method.__func__._orig.__get__(None, method.__self__)

    def __setattr__(self, name, value):  # a builtin method has no __dict__: raise what it raises
        setattr(self._bound(), name, value)

    def __delattr__(self, name):
        delattr(self._bound(), name)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


_BoundToClass.__qualname__ = _BoundToClass.__name__ = "builtin_function_or_method"
_BoundToClass.__doc__ = vars(_BoundBuiltin)["__doc__"]  # the bound original's, as for _BoundBuiltin
_BoundToClass.__module__ = vars(_BoundBuiltin)["__module__"]


def _bound_class(bound):
    """A subclass of ``_BoundBuiltin`` named as the bound type ``bound``, weakly referable where it is."""
    own = vars(_BoundBuiltin)
    slots = ("__weakref__",) if bound.__weakrefoffset__ else ()
    return type(bound.__name__, (_BoundBuiltin,), {"__slots__": slots, "__qualname__": bound.__name__,
                                                   "__doc__": own["__doc__"], "__module__": own["__module__"]})


# the types of C methods bound to a tensor: `x.add_` (builtin_function_or_method) and `x.__setitem__`
# (method-wrapper)
# (a C method such as ``TensorBase.add_`` is a method_descriptor, a slot such as ``__setitem__`` a wrapper_descriptor)
_BOUND_CLASSES = {types.MethodDescriptorType: _bound_class(types.BuiltinMethodType),
                  types.WrapperDescriptorType: _bound_class(types.MethodWrapperType)}


def named(wrapper, orig):
    """The wrapper function ``wrapper`` dressed as ``orig`` (see NOTE [Transparent wrappers])."""
    if isinstance(orig, _FunctionType):
        base = _TransparentFunction
    elif isinstance(orig, types.ClassMethodDescriptorType):
        base = _TransparentClassMethod
    elif type(orig) in _BOUND_CLASSES:
        base = _TransparentMethod
    else:
        base = _TransparentCallable
    key = (base, type(orig))
    cls = _CLASSES.get(key)
    if cls is None:
        ns = {}
        if base is _TransparentMethod:
            ns["_bound_cls"] = _BOUND_CLASSES[type(orig)]
        cls = _CLASSES[key] = _dressed_class(base, orig, ns)
    out = object.__new__(cls)
    _SET_CALL(out, wrapper)
    _SET_ORIG(out, orig)
    return out


_CLASSES = {}  # (base, type of the original) -> the class its wrappers share
_SET_CALL = _TransparentCallable.__call__.__set__
_SET_ORIG = Transparent._orig.__set__


def _dressed_class(base, orig, ns):
    """A new subclass of ``base`` named as ``orig``'s type, weakly referable where that type is."""
    name = type(orig).__name__
    ns.update({"__slots__": ("__weakref__",) if type(orig).__weakrefoffset__ else (), "__qualname__": name,
               "__doc__": _DOC, "__module__": _MODULE, "__class__": _CLASS})
    cls = type(name, (base,), ns)
    if base is _TransparentMethod or base is _TransparentFunction:
        _called_unbound(cls)
    return cls


# NOTE [Wrapped methods are called without binding]
# ``b.mul_(2)`` compiles to a method load and a call. For a Python function or a C method the interpreter
# skips the binding: it sees the type of the attribute flagged Py_TPFLAGS_METHOD_DESCRIPTOR (PEP 590) and
# calls the attribute with ``b`` first. A wrapper class had no such flag, so each call of a wrapped method
# ran the wrapper's Python ``__get__``, made a bound object and a method object, and only then the wrapper
# (so did ``b[1:]``, ``b[0] = 1`` and ``b += 1``, whose slots look the method up the same way). The flag
# promises that ``descr.__get__(obj)(*args)`` is ``descr(obj, *args)``, which holds for the wrapper classes
# of C methods and Python functions (their ``__get__`` gives ``MethodType(wrapper, obj)``; a classmethod's
# binds to the class and is not flagged). Python has no way to set it but the type's ``tp_flags`` word,
# written once when the class is made, before any call; the word is written only where it reads as
# ``cls.__flags__`` (CPython's layout), else the class keeps binding as before. What a program sees is
# unchanged: ``b.mul_`` read as an attribute still goes through ``__get__``. Measured in process (a loop of
# 20,000, min of 5, loaded): ``b.mul_(1.0)`` with the recorder off 4.83 -> 4.06 us, ``b[1:]`` 2.71 -> 2.03 us,
# ``b.clone()`` 2.61 -> 2.01 us (plain: 3.25, 1.57, 1.55).
_METHOD_DESCRIPTOR = 1 << 17  # Py_TPFLAGS_METHOD_DESCRIPTOR (Python 3.8 and later)


def _called_unbound(cls) -> None:
    """Flag ``cls`` Py_TPFLAGS_METHOD_DESCRIPTOR (see NOTE [Wrapped methods are called without binding])."""
    if sys.implementation.name != "cpython":
        return
    try:
        import ctypes

        word = ctypes.sizeof(ctypes.c_void_p)
        # PyVarObject's head (3 words), then tp_name ... tp_as_buffer (18 words): tp_flags, an unsigned long
        flags = ctypes.c_ulong.from_address(id(cls) + 21 * word)
        if flags.value == cls.__flags__:
            flags.value |= _METHOD_DESCRIPTOR
    except Exception:
        pass


def transparent_property(orig, get, set_):
    """A data descriptor dressed as ``orig`` (a getset descriptor) whose getter and setter record.

    ``get(desc, obj, cls)`` and ``set_(desc, obj, value)`` are its ``__get__`` and ``__set__``
    themselves (called by the interpreter, so the caller's frame is ``sys._getframe(1)``);
    deleting goes to the original (``del x.data`` raises what torch raises).
    """
    def __delete__(self, obj):
        orig.__delete__(obj)

    for f, name in ((get, "__get__"), (set_, "__set__"), (__delete__, "__delete__")):  # NOTE [A wrapper equals its original]
        f.__name__ = name
        f.__qualname__ = f"{type(orig).__name__}.{name}"

    out = object.__new__(_dressed_class(Transparent, orig, {"__get__": get, "__set__": set_,
                                                            "__delete__": __delete__}))
    _SET_ORIG(out, orig)
    return out


def original(obj):
    """The original under one of tensorscope's wrappers (``obj`` itself when it is none)."""
    if isinstance(obj, Transparent):
        return obj._orig
    if isinstance(obj, _BoundBuiltin):
        return obj._bound()
    owner = getattr(obj, "__self__", None)  # ``Tensor.data.__set__`` of a replaced property
    if isinstance(owner, Transparent):
        func = getattr(obj, "__func__", None)
        for name in ("__get__", "__set__", "__delete__"):
            if func is not None and func is vars(type(owner)).get(name):
                return getattr(owner._orig, name)
    return obj
