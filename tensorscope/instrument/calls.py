"""The shape shared by the wrappers that record after a call returns (aliases, copies, creations,
``state_dict()``, graph cuts, distribution draws): call the original as the program asked, then record.

See NOTE [Hot path] and NOTE [Invisible frames] in patches.py.
"""

from __future__ import annotations

import sys
import threading
import weakref

from tensorscope.instrument import state
from tensorscope.instrument.frames import line_of, strip_for_reraise, strip_traceback
from tensorscope.instrument.quiet import function_modes as _function_modes, tf_off as _tf_off
from tensorscope.instrument.quiet import unseen_by_modes as _unseen
from tensorscope.instrument.recorder import _ONE_AGGREGATED, count_site
from tensorscope.instrument.speedups import counted_call
from tensorscope.instrument.transparent import named

_get_ident = threading.get_ident
_ref = weakref.ref
_PAUSED = state.PAUSED  # see NOTE [Pausing the recorder] in tracker.py


def target(args, kwargs):
    """The tensor a call acts on: its first argument, or ``input=``/``self=``."""
    if args:
        return args[0]
    return kwargs.get("input", kwargs.get("self"))


# NOTE [A counted line's calls]
# Past the first ``per_site`` events at a line (``Recorder.allow``), an alias, a copy or a creation there
# is only counted: ``after`` found the program's frame, read the types' verdicts, went into the recorder,
# and came back with a count of one more and ``aggregated`` one higher. What a later answer reads of such
# a call is that count, and for an alias the kept value it may be (NOTE [Kept values] in kept.py: every
# alias on a program line, counted or not). A wrapper given ``counted`` therefore remembers, per calling
# instruction (the code object and ``f_lasti`` of the frame that called it), the site ``allow`` counted
# there and the types of the call's input and output that led to it (``counted_site``, set by ``allow``
# when it counts a site past its cap). The next call from that instruction with the same types is the
# same decision: the count and ``aggregated`` are taken there, an alias is offered to the kept values
# (with the remembered site, whose file and line are the frame's: ``on_alias`` does not read the line again),
# and nothing else is done. A site past its cap stays past it, so the verdict never changes; a different
# code object at the same offset, a different type or another recorder goes the whole way and is
# remembered in its turn. ``counted_site`` is the recorder's, not the thread's: a site is remembered only
# when it is the call's own (its kind, file and line), so another thread's count in between cannot be
# taken for it (a site of the same kind, file and line is the same site). Such a wrapper records only the program's own calls (its ``after`` begins with
# that test), so a call from a frame whose file is known not to be the program's returns at once. Copies
# and creations that do more than count (``numpy``, ``from_numpy``, and the ops over outside memory: NOTE
# [A NumPy array is a kept value]) are not given ``counted``.


def after_call(orig, after, *, op=None, where=None, counted=False):
    """A wrapper dressed as ``orig`` (``transparent.named``) that, while a run records, calls ``orig``
    and then ``after(rec, args, kwargs, out, frame)``, ``frame`` being the caller's.

    An exception from ``orig`` passes through with tensorscope's frames taken out of its traceback;
    with ``where`` (the event kind, ``"alias"``) it is first recorded as the failure of ``op``
    (``Tracker.on_error``). With ``counted``, a call from an instruction whose events are only counted
    is counted without ``after`` (see NOTE [A counted line's calls]).

    Example::

        make = lambda orig: after_call(orig, lambda rec, args, kwargs, out, frame: ..., op="view", where="alias")
    """
    # f_lasti -> (code, recorder (weakly: a wrapper the program keeps outlives the run), type of input, type of
    # output, site)
    lines = {} if counted else None
    alias = where == "alias"

    def record(rec, args, kwargs, out, frame):
        """What ``call`` does once ``orig`` returned ``out`` (the compiled body's slow path too)."""
        if _function_modes():  # the whole record, unseen by the mode (see the NOTE in quiet.py)
            with _tf_off():
                after(rec, args, kwargs, out, frame)
            return
        if lines is None:
            after(rec, args, kwargs, out, frame)
            return
        verdict = rec.user._verdict.get(frame.f_code.co_filename)  # _programs in patches.py, read in place
        if verdict is not True and verdict is not None:  # torch's own frame: a counted wrapper records nothing
            return
        src = args[0] if args else kwargs.get("input", kwargs.get("self"))  # target(), inlined
        made = type(out)
        if made is tuple or made is list:  # split, unbind, tolist: the first one's type is what is read
            made = (made, type(out[0]) if out else None)
        hit = lines.get(frame.f_lasti)
        if (hit is not None and hit[0] is frame.f_code and hit[1]() is rec and hit[2] is type(src)
                and hit[3] == made and out is not src):
            try:
                count_site(rec.site_counts, (hit[4],))  # NOTE [Site counts from several threads] in recorder.py
                count_site(rec.aggregated_counts, _ONE_AGGREGATED)  # count_aggregated, inlined
                if alias:
                    rec.kept.on_alias(rec, op, src, out if isinstance(out, (list, tuple)) else (out,), frame, hit[4])
            except Exception:
                pass
            return
        rec.counted_site = None
        after(rec, args, kwargs, out, frame)
        site = rec.counted_site
        code = frame.f_code
        # the site is this call's own (another thread's ``allow`` may have set it since): see the NOTE
        if site is not None and site[0] == where and site[1] == code.co_filename and site[2] == line_of(frame):
            lines[frame.f_lasti] = (code, _ref(rec), type(src), made, site)

    def call(*args, **kwargs):
        rec = state.recorder
        if rec is None or not rec.active or _PAUSED and _get_ident() in _PAUSED:
            try:  # NOTE [Invisible frames] in patches.py
                return orig(*args, **kwargs)
            except BaseException as e:
                strip_for_reraise(e)
                del args, kwargs  # NOTE [A wrapper's frame behind a library's traceback entry] in runner.py
                raise
        try:
            out = orig(*args, **kwargs)
        except BaseException as e:
            if where is not None:
                with _unseen():  # NOTE [Our reads unseen by the program's torch-function modes] in quiet.py
                    rec.on_error(e, op, target(args, kwargs), sys._getframe(1), where)
            strip_for_reraise(e)
            del args, kwargs  # NOTE [A wrapper's frame behind a library's traceback entry] in runner.py
            raise
        record(rec, args, kwargs, out, sys._getframe(1))
        return out

    if counted:  # NOTE [A counted line's calls, compiled] in speedups.py
        def failed(rec, e, args, kwargs, frame):
            """The compiled body's ``except`` clause: the failure recorded, tensorscope's frames stripped."""
            if where is not None:
                with _unseen():
                    rec.on_error(e, op, target(args, kwargs or {}), frame, where)
            strip_traceback(e)

        body = counted_call(orig, call, record, failed, state, _PAUSED, _function_modes, lines, op, alias,
                            count_site, _ONE_AGGREGATED)
        if body is not None:
            return named(body, orig)
    return named(call, orig)
