"""A ``_foreach_`` write outside an optimizer step, recorded as one write record.

NOTE [A foreach write as one write record]
``torch.nn.utils.clip_grad_norm_`` scales every gradient with one ``torch._foreach_mul_`` call (52
tensors a step on the GPT benchmark), outside the optimizer's step, so NOTE [An optimizer step as one
write record] does not cover it; each of its tensors went through ``Tracker.pre_write`` and
``post_write``: a frame walk to the program's line, a per-line count and a log entry per tensor. Past
the line's first ``per_site`` writes such a write is only counted and logged, so the call is recorded
whole: one frame walk, the versions and storage keys read around the one call, one log entry per
tensor with the fields ``post_write`` would have logged (autograd's sequence number and grad mode are
the same for every tensor of one call) and the count added at once. The call goes tensor by tensor,
as before, when any of its writes needs more than a count and a log entry: while the line still has
detailed events, on a storage that a kept value, shared state or one of explain's saved tensors
watches, from BatchNorm's running-statistics code, or when the program's line or a storage cannot be
read.
"""

from __future__ import annotations

import torch

from tensorscope.instrument.frames import _LINES, line_of, user_frame
from tensorscope.instrument.recorder import add_count, count_aggregated, storage_key
from tensorscope.instrument.runningstats import CODES as _RUNNING_STATS_CODES

#: what ``write_many`` returns when the call goes tensor by tensor (nothing called then)
NOT_WHOLE = object()
_get_sequence_nr = torch._C._autograd._get_sequence_nr
_is_grad_enabled = torch.is_grad_enabled


def write_many(rec, orig, op, targets, args, kwargs, frame):
    """Call ``orig`` and record its writes into ``targets`` whole, or return ``NOT_WHOLE`` (see the NOTE).

    Never raises from tensorscope's own reads; the program's exception from ``orig`` propagates."""
    try:
        if not targets or id(frame.f_code) in _RUNNING_STATS_CODES:
            return NOT_WHOLE
        uf = user_frame(frame, rec.user)
        if uf is None:
            return NOT_WHOLE
        code = uf.f_code
        line = _LINES.get((id(code), uf.f_lasti))
        if line is None:
            line = line_of(uf)
        site = ("write", code.co_filename, line)
        counts = rec.site_counts
        before = counts.get(site, 0)
        if before < rec.per_site and len(rec.events) < rec.max_events:
            return NOT_WHOLE  # detailed events left at this line
        kept = rec.kept
        if kept.young:  # see NOTE [Young kept values] in kept.py
            kept.settle(rec)
        watched = (kept.keys, rec.shared.keys, rec.pending)
        keys = []
        versions = []
        for t in targets:
            key = storage_key(t)
            if key is None:  # no storage: the write-by-write path decides what it logs
                return NOT_WHOLE
            for table in watched:
                if table and key in table:
                    return NOT_WHOLE
            keys.append(key)
            versions.append(t._version)
        aseq = _get_sequence_nr()
        n = len(keys)  # counted before the call, as ``pre_write`` counts each (a call that raises too)
        add_count(counts, site, n)  # NOTE [Site counts from several threads] in recorder.py
        count_aggregated(rec, n)
        if before < rec.per_site:  # only the event cap made these writes plain (see Tracker.write_site)
            rec.log_full = True
    except Exception:
        return NOT_WHOLE
    out = orig(*args, **kwargs)
    try:
        grad_enabled = _is_grad_enabled()
        lasti, lib = uf.f_lasti, frame.f_code if frame is not uf else None
        log_write = rec.log_write
        for t, key, v0 in zip(targets, keys, versions):
            log_write(key, (aseq, v0, t._version, op, grad_enabled, code, lasti, line, lib, None))
    except Exception:
        pass
    return out
