"""The `backward-twice` kind: backward() ran a second time through a graph whose saved tensors were already freed."""

from __future__ import annotations

import ast
import re

from tensorscope import source
from tensorscope.kinds import _retention
from tensorscope.kinds._base import Evidence, Kind, Pattern, diagnosis, w, where

KIND = Kind(
    code='backward-twice',
    title='backward() ran a second time through a graph whose saved tensors were already freed.',
    explanation=(
        'To save memory, autograd frees the tensors saved in a graph as soon as backward() or '
        'autograd.grad() has gone through it. A second backward through any part of the same graph, '
        "or reading a node's saved tensors afterwards, finds them gone."
    ),
    causes=(
        (
            'Calling `loss.backward()` twice on the same loss, or on two losses that share part of one '
            'graph.'
        ),
        (
            'A tensor carried across loop iterations (an RNN hidden state, a running statistic) that '
            'still links each new graph to the previous, already-freed one.'
        ),
        'Reading `grad_fn._saved_*` after backward().',
    ),
    fixes=(
        'Run a fresh forward pass for each backward().',
        'Detach the carried hidden state at the start of each iteration: `h = h.detach()`.',
        'Sum the losses and call backward() once: `(loss_a + loss_b).backward()`.',
        (
            'Pass `retain_graph=True` to every backward() but the last, only when going through the same '
            'graph twice is really intended.'
        ),
    ),
)


_SAVED = r"\s+(?:tensors|variables)\s+"  # "variables" before 1.10
PATTERNS = (Pattern(
    w("Trying to backward through the graph a second time")
    + r"(?:\s+\(" + w("or directly access saved") + _SAVED + w("after they have already been freed).")
    + r"|,\s+" + w("but the saved intermediate results have already been freed.") + r")?"
    + r"(?:\s+" + w("Saved intermediate values of the graph are freed when you call .backward() or "
                    "autograd.grad().") + r")?"
    + r"(?:\s+" + w("Specify retain_graph=True") + r"\s+(?:"
    + w("if you need to backward through the graph a second time or if you need to access saved")
    + _SAVED + w("after calling backward.")
    + r"|" + w("when calling backward the first time.")
    + r"|" + w("when calling .backward() or autograd.grad() the first time.") + r"))?"
),)


def _old_freed(graph: dict, earlier: list[dict]) -> list[dict]:
    """Freed nodes created before the last earlier backward (the failing one frees its own as it goes)."""
    if not earlier:
        return []
    freed = graph.get("freed") or []
    known = [n for n in freed if n.get("freed_by") is not None]
    if known:  # an earlier backward's roots are still alive: we know which nodes it went through
        return known
    horizon = max(b.get("seq_now") or 0 for b in earlier)
    return [n for n in graph.get("freed") or [] if n["seq"] < horizon]


def _freeing_backward(earlier: list[dict], node: dict | None) -> dict | None:
    """The first earlier backward, without retain_graph, that ran after ``node`` was built."""
    if node is not None and node.get("freed_by") is not None and node["freed_by"] < len(earlier):
        return earlier[node["freed_by"]]
    seq = node["seq"] if node else None
    freeing = [b for b in earlier if not b.get("retain_graph")]
    if seq is not None:
        after = [b for b in freeing if (b.get("seq_now") or 0) > seq]
        if after:
            return after[0]
    return freeing[-1] if freeing else (earlier[-1] if earlier else None)


def _carried(f: dict, graph: dict, culprit: dict | None, prefer: str | None = None,
             prefer_line: int | None = None) -> tuple[str | None, str, int | None]:
    """The tensor that links the failing graph to the freed one: (name, how, line of the link).

    how: "same" (backward on the very same tensor), "carried" (a variable updated from itself in a
    loop, e.g. an RNN hidden state or a running sum), "shared" (an intermediate both losses use).
    ``prefer``: the name the retention walk found holding the freed graph; its own update is the carry
    (a loop's other self-updates are read from the source and may sit in a branch that never ran:
    ``output = output.view(...)`` in word_language_model's Transformer branch). ``prefer_line``: the
    line that walk found storing it; of the name's self-updates that one is the link, not an earlier
    one in a branch that did not run (``hidden = repackage_hidden(hidden)`` under an ``if``).
    """
    horizon = (culprit or {}).get("seq_now") or 0
    local = graph.get("locals") or []
    root_names = [n for r in f.get("roots") or [] for n in r.get("names") or []]
    def earlier(loc):  # in the graph an earlier backward went through (by seq nr when its roots are gone)
        known = loc.get("in_earlier_graph")
        return known if known is not None else loc["seq"] < horizon

    for loc in local:
        if loc["name"] in root_names and earlier(loc):
            return loc["name"], "same", None
    linked = [loc for loc in local if loc.get("reaches_freed")]
    stmt = source.statement_at(f.get("file"), f.get("line"))
    loop = source.loop_of(stmt) if stmt is not None else None
    if loop is not None:
        updates = source.self_updates(source.scope_statements(loop))
        names = {loc["name"] for loc in linked}
        if prefer and any(u[0] == prefer for u in updates):  # a tuple (h, c) is no tensor local: the walk saw it
            names = {prefer}
        names &= source.carried_names(loop)  # `output = output.view(...)` updates this iteration's own value
        found = [(name, s) for name, s in updates if name in names]
        if found:
            name, s = next(((n, s) for n, s in found if s.lineno == prefer_line), found[0])
            return name, "carried", s.lineno
    shared = [loc for loc in local if loc.get("in_failing_graph") and earlier(loc)]
    if shared:
        best = max(shared, key=lambda loc: loc["seq"])
        return best["name"], "shared", None
    return None, "", None


def _carried_link(f: dict, first: dict | None) -> dict | None:
    """The first link into the freed graph, when the freeing backward is this very backward call
    site run again (a loop): the new graph took in state kept from the previous iteration."""
    if not first or first.get("retain_graph"):
        return None
    if (first.get("file"), first.get("line")) != (f.get("file"), f.get("line")):
        return None
    return next((k for k in f.get("links") or [] if k.get("line")), None)


def _meeting(how: str | None, name: str | None, op: str, first: dict | None, f: dict, link_line) -> tuple:
    """(the sentence saying where the two backward calls meet, or None; the fix), by ``how`` (see _carried)."""
    bline, said = f.get("line"), None
    label = f"`{name}`" if name else None
    if how == "same":
        said = f"Both calls go through the graph of {label}."
        retain = "torch.autograd.grad(..., retain_graph=True)" if op != "backward()" else f"{name}.backward(retain_graph=True)"
        fix = (f"If both passes are intended, pass retain_graph=True to the first one at line {first['line'] if first else '?'} "
               f"(`{retain}`); otherwise run a fresh forward pass before the backward at line {bline}, "
               "or compute both results in one call.")
    elif how == "carried":
        said = (f"{label} is carried from one iteration to the next (line {link_line}: "
                f"`{source.code(f.get('file'), link_line)}`) without being detached, so each new graph "
                "still leads into the previous iteration's freed one.")
        if name in [n for r in f.get("roots") or [] for n in r.get("names") or []]:
            fix = (f"Accumulate a detached value (`{name} = {name} + loss.item()` or `loss.detach()`) and call "
                   f"backward() on each iteration's own loss; or detach it each iteration: `{name} = {name}.detach()`.")
        else:
            fix = (f"Detach the carried state at the start of each iteration: `{name} = {name}.detach()` "
                   "(truncated backpropagation through time); use retain_graph=True only if the backward really "
                   "must reach into earlier iterations.")
    elif how == "shared":
        said = f"{label} is shared by the graph of this backward and the one already freed."
        fix = ("Sum the losses and call backward() once (e.g. `(loss_a + loss_b).backward()`), or pass "
               f"retain_graph=True to the first backward at line {first['line'] if first else '?'}; "
               f"otherwise recompute {label} with a fresh forward pass.")
    else:
        fix = ("Run a fresh forward pass for each backward(), detach state carried between iterations "
               "(`h = h.detach()`), or pass retain_graph=True to the first backward if both are intended.")
    return said, fix


def explain(ev: Evidence) -> dict | None:
    """The diagnosis from the backward calls before the failing one and the freed nodes it reached."""
    f = ev.failure or {}
    if f.get("where") != "backward":
        return None
    graph = f.get("graph") or {}
    earlier = list(f.get("backwards_before") or [])
    old = _old_freed(graph, earlier)
    top = max(old, key=lambda n: n["seq"]) if old else None
    first = _freeing_backward(earlier, top)
    node_file, node_line = ev.node_lines.get(top["seq"], (None, None)) if top else (None, None)
    held_by = _held_into_freed(ev, f)
    held_line = held_by[1].lineno if held_by and held_by[0] == f.get("file") else None
    name, how, link_line = _carried(f, graph, first, prefer=held_by[2].split(".")[0] if held_by else None,
                                    prefer_line=held_line)
    bline = f.get("line")
    op = "torch.autograd.grad" if first and first.get("op") == "grad" else "backward()"
    parts = []
    if first:
        parts.append(f"Line {first['line']} (`{source.code(first['file'], first['line'])}`) ran {op} without "
                     "retain_graph=True, which freed the tensors saved in the graph it went through.")
    if top:
        parts.append(f"The backward at line {bline} reached {top['node']}"
                     + (f", built by line {node_line} (`{source.code(node_file, node_line)}`)," if node_line else "")
                     + " whose saved tensors were already gone.")
    said, fix = _meeting(how, name, op, first, f, link_line)
    if said:
        parts.append(said)
    tensor = None
    if name:
        tid = next((loc["tensor"] for loc in graph.get("locals") or [] if loc["name"] == name), None)
        tensor = {"id": tid, "names": [name], "version_at_save": None, "version_now": None}
    culprit = where(first["file"], first["line"], alias=name) if first else where(f.get("file"), bline, alias=name)
    chain = []
    once = _built_once(f, first, node_file, node_line) if not name and first and top and node_line else None
    # a freed graph built once outside any loop is the mistake even where this step's line takes in its tensor
    # (NOTE [A graph built by a statement that runs once]; torch 2.15's graph shows that link, 2.13's does not)
    link = _carried_link(f, first) if once is None else None
    if link is not None:
        # See NOTE [Links into a freed graph]: in a loop, the mistake is the carry, not the backward
        culprit = where(link["file"], link["line"], alias=name)
        parts.append(f"Line {link['line']} (`{source.code(link['file'], link['line'])}`) is where this graph takes in "
                     f"a tensor of the freed one ({link['node']} built on {link['from_node']} from before the "
                     "previous backward).")
        chain = [where(first["file"], first["line"],
                       what=f"{op} without retain_graph=True freed the graph built before it"),
                 where(link["file"], link["line"],
                       what=f"takes in a tensor of that freed graph ({link['from_node']})")]
        if how != "carried":
            fix = (f"Detach the state that line {link['line']} takes in from the previous iteration (`.detach()` it "
                   "before that line, once per iteration: truncated backpropagation through time), or build it "
                   "afresh each iteration; use retain_graph=True only if the backward really must reach into "
                   "earlier iterations.")
    held = _retained(held_by, first, op)
    if held is not None:  # the line that kept the freed graph reachable: See NOTE [The retaining line]
        said, culprit, chain, fix = held
        parts.append(said)
    elif how == "shared" and first and _before_loop(f, first, name) is not None:
        said, culprit, chain, fix = _before_loop(f, first, name)
        parts.append(said)
    elif how == "shared" and first:
        shared = _shared_part(ev, f, graph, name, first)
        if shared is not None:  # See NOTE [A part two losses share]
            said, culprit, chain, fix = shared
            parts.append(said)
    elif once is not None:  # See NOTE [A graph built by a statement that runs once]
        said, culprit, chain, fix = once
        parts.append(said)
    return diagnosis(
        KIND,
        explanation=" ".join(parts) or "An earlier backward freed the graph this backward needed.",
        fix=fix,
        culprit=culprit,
        saved_by=(where(node_file, node_line, node=top["node"]) if node_line
                  else ({"node": top["node"], "file": None, "line": None, "code": ""} if top else None)),
        backward=where(f.get("file"), bline),
        tensor=tensor,
        alias_chain=[c for c in chain if c],
        evidence=["earlier backward calls and their autograd sequence numbers",
                  "freed graph nodes probed at the failure"],
    )


# NOTE [A value computed once before the loop]
# A tensor computed once before a loop (`ctx = embed(tokens).mean(1)`, features of a fixed batch, a prompt's
# embedding) and read by every iteration's loss is shared by each iteration's graph: the first backward
# frees its part, and the second iteration's backward fails there. When the name the two graphs share is
# bound in the scope of the failing backward's loop before the loop and never inside it, and both backward
# calls are in that loop, the culprit is that binding line: the fix computes it inside the loop (a fresh
# forward each iteration), or detaches it there when its inputs need no gradient.


def _before_loop(f: dict, first: dict, name: str | None):
    """(sentence, culprit, chain, fix) when ``name`` is bound before the loop of both backward calls only."""
    if not name:
        return None
    file = f.get("file")
    stmt = source.statement_at(file, f.get("line"))
    loop = source.loop_of(stmt) if stmt is not None else None
    if loop is None or first.get("file") != file or not (loop.lineno <= (first.get("line") or 0) <= (loop.end_lineno or 0)):
        return None
    inner = [s for s in ast.walk(loop) if isinstance(s, ast.stmt)]
    if any(name in source.assigned(s)[0] for s in inner) or name in _loop_targets(loop):
        return None
    scope = source.scope_of(loop)
    binds = [s for s in source.scope_statements(scope) if s.lineno < loop.lineno and name in source.assigned(s)[0]] \
        if scope is not None else []
    if not binds:
        return None
    b = binds[-1]
    code = source.code(file, b.lineno)
    said = (f"`{name}` is computed once, at line {b.lineno} (`{code}`), before the loop, and every iteration's loss "
            "reads it: the first iteration's backward freed its part of the graph, so the next one cannot go through "
            "it again.")
    fix = (f"Compute `{name}` inside the loop, so each iteration has a graph of its own (move line {b.lineno} into "
           f"the loop); or, if what it is computed from needs no gradient, detach it at line {b.lineno} "
           f"(`{name} = ....detach()`).")
    chain = [where(file, b.lineno, what=f"`{name}` computed once, before the loop"),
             where(first["file"], first["line"], what="backward() without retain_graph=True freed its graph")]
    return said, where(file, b.lineno, alias=name), chain, fix


# NOTE [A graph built by a statement that runs once]
# ``penalty = sum(p.pow(2).sum() for p in model.parameters())`` written once, outside any loop (at module level,
# under ``if __name__ == "__main__":``), and read as a global by ``loss = ... + 1e-3 * penalty`` inside a
# ``train_step`` function that the loop calls: NOTE [A value computed once before the loop] does not see it (the
# backward's own frame neither binds nor holds the name, and its function has no loop), and no name of the frame
# reaches the freed graph once this iteration's own nodes are left out (the failing backward frees them as it goes,
# so only the nodes an earlier backward freed count: backward_calls._carried_holders). The facts that remain: the
# oldest freed node the failing backward reached was built by a statement that binds a name and sits in no loop of
# its scope, and the backward that freed it ran at the failing backward's own line (the same step, repeated). That
# statement is the culprit: its graph is built once and every step's backward goes through it. The fix builds it
# where each step builds its loss (a detach would drop the gradient the term is there to give).


def _built_once(f: dict, first: dict, file, line):
    """(sentence, culprit, chain, fix) when the freed node's statement runs once and the backward repeats (NOTE [A
    graph built by a statement that runs once]), or None."""
    if (first.get("file"), first.get("line")) != (f.get("file"), f.get("line")):
        return None
    stmt = source.statement_at(file, line)
    if stmt is None or source.loop_of(stmt) is not None:
        return None
    names = source.assigned(stmt)[0]
    if not names or isinstance(stmt, (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
        return None
    name = names[0]
    code = source.code(file, stmt.lineno)
    said = (f"`{name}` is computed once, at line {stmt.lineno} (`{code}`), outside any loop, and the backward at line "
            f"{f.get('line')}, which runs again for each step, goes through its graph: the first backward freed it.")
    fix = (f"Compute `{name}` where each step computes its loss (move line {stmt.lineno} into the loop, or into the "
           f"function of line {f.get('line')}), so each backward has a graph of its own; detach it only if what it is "
           "computed from needs no gradient.")
    chain = [where(file, stmt.lineno, what=f"`{name}` computed once, outside any loop"),
             where(first["file"], first["line"], what="backward() without retain_graph=True freed its graph")]
    return said, where(file, stmt.lineno, alias=name), chain, fix


def _loop_targets(loop) -> list[str]:
    target = getattr(loop, "target", None)
    return source.target_names(target) if target is not None else []


# NOTE [A part two losses share]
# Two losses whose graphs share a part (the tensor `fake` both a discriminator loss and a generator loss
# are computed from; a model's `output` used for two passes) fail at the second backward because the first
# freed the shared part. Summing the losses is the fix only when both passes mean to train through it.
# Two recorded facts tell the other cases apart:
# - the leaves the shared part was built from were written in place between the two backward calls
#   (`p.add_(e)` of a two-pass update such as SAM, an optimizer step): the shared graph is stale, and
#   retain_graph=True would fail with a version error instead. The fix is a fresh forward before the line
#   that reads the tensor again;
# - the first backward reached leaves that one optimizer owns (the discriminator's) and the shared part's
#   leaves belong to other optimizers only (the generator's): the first loss trains its own part, so the
#   shared tensor is to be detached where that loss reads it (`netD(fake.detach())`, pytorch/examples'
#   DCGAN; an actor-critic's critic; a DQN's target).
# Otherwise the advice stays "sum the losses or retain the graph".


def _reading_lines(file, first_line: int, last_line: int, name: str) -> list[int]:
    """Lines of the statements between two lines of one scope that read ``name`` (simple statements only)."""
    stmt = source.statement_at(file, last_line)
    scope = source.scope_of(stmt) if stmt is not None else None
    if scope is None:
        return []
    out = []
    for st in source.scope_statements(scope):
        if isinstance(st, (ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try,
                           ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if first_line <= st.lineno <= last_line and name in source.reads(st):
            out.append(st.lineno)
    return out


def _binding_line(file, before: int, name: str) -> int | None:
    """The last line before ``before``, in the scope of that line, that binds ``name``."""
    stmt = source.statement_at(file, before)
    scope = source.scope_of(stmt) if stmt is not None else None
    found = None
    for st in source.scope_statements(scope) if scope is not None else []:
        if st.lineno < before and name in source.assigned(st)[0]:
            found = st.lineno
    return found


def _backward_event_seqs(events: list, f: dict, first: dict) -> tuple[int | None, int | None]:
    """Event seqs of the freeing backward call and of the failing one (the last at their lines)."""
    bws = [e for e in events if e.get("kind") == "backward"]
    fail = next((e["seq"] for e in reversed(bws) if e.get("line") == f.get("line") and e.get("file") == f.get("file")), None)
    before = [e for e in bws if fail is None or e["seq"] < fail]
    b1 = next((e for e in reversed(before) if e.get("line") == first.get("line")), None)
    return (b1["seq"] if b1 else None), fail


def _shared_part(ev: Evidence, f: dict, graph: dict, name: str | None, first: dict):
    """(sentence, culprit, chain, fix) for a tensor two backward calls share, by what happened to its leaves."""
    loc = next((x for x in graph.get("locals") or [] if x["name"] == name), None)
    leaves = set((loc or {}).get("leaves") or [])
    file, bline = f.get("file"), f.get("line")
    if not leaves or first.get("file") != file or not name:
        return None
    events = ev.doc.get("events") or []
    b1, b2 = _backward_event_seqs(events, f, first)
    if b1 is None:
        return None
    between = [e for e in events if b1 < e.get("seq", 0) < (b2 if b2 is not None else float("inf"))]
    writes = [e for e in between if e.get("kind") == "write" and e.get("tensor") in leaves]
    writes += [e for e in between if leaves & set(e.get("written") or ())]
    first_bw = where(file, first["line"], what="backward() without retain_graph=True freed the shared part")
    if writes:
        w = min(writes, key=lambda e: e["seq"])
        again = _reading_lines(file, w.get("line") or 0, bline, name) if w.get("file") == file else []
        at = again[0] if again else bline
        made = _binding_line(file, first["line"], name)
        redo = f" (line {made}: `{source.code(file, made)}`)" if made else ""
        said = (f"Line {w['line']} (`{source.code(w.get('file'), w['line'])}`) changed in place the parameters "
                f"`{name}` was computed from, after the backward at line {first['line']} had freed `{name}`'s graph; "
                f"line {at} reads that stale `{name}` again.")
        fix = (f"Compute `{name}` again with a fresh forward pass after line {w['line']}{redo} and use the new value "
               f"at line {at}; retain_graph=True would not help: the graph saved the parameters before the write.")
        chain = [first_bw, where(w.get("file"), w["line"], what=f"changes the parameters `{name}` was computed from"),
                 where(file, at, what=f"reads the stale `{name}`")]
        return said, where(file, at, alias=name), [c for c in chain if c], fix
    b1_event = next((e for e in events if e.get("seq") == b1), {})
    reached = set(b1_event.get("leaves_with_grad") or ())
    owners = [(o.get("name") or "an optimizer", set(o.get("parameters") or ())) for o in ev.doc.get("optimizers") or []]
    own = reached - leaves
    trains = [n for n, ps in owners if ps & own and not ps & leaves]
    if not trains or not any(ps & leaves for _, ps in owners):
        return None
    made = _binding_line(file, first["line"], name)
    uses = _reading_lines(file, (made or 0) + 1, first["line"], name)
    if not uses:
        return None
    use = uses[0]
    code = source.code(file, use)
    detached = re.sub(rf"\b{re.escape(name)}\b(?!\s*=[^=])", f"{name}.detach()", code, count=1)
    said = (f"The loss of line {first['line']} trains `{trains[0]}`'s parameters, yet it also went through "
            f"`{name}`'s graph (line {use}: `{code}`), whose parameters only another optimizer updates; its "
            f"backward freed that part, which the backward at line {bline} needs.")
    fix = (f"Detach `{name}` where the first loss reads it: `{detached}`; the backward at line {first['line']} then "
           f"stops at `{name}` and the one at line {bline} still finds its graph.")
    chain = [where(file, use, what=f"the first loss reads `{name}` with its graph"), first_bw]
    return said, where(file, use, alias=name), [c for c in chain if c], fix


def _retained(held, first: dict | None, op: str):
    """(sentence, culprit, chain, fix) from the retention paths into the freed graph (``_held_into_freed``), or None."""
    if held is None:
        return None
    stmt_file, stmt, holder, steps = held
    line = stmt.lineno
    code = source.code(stmt_file, line)
    said = (f"`{holder}` still reaches the freed graph ({_retention.path_text(steps)}): line {line} (`{code}`) "
            "stored it where this iteration reads it, without detaching it.")
    chain = [c for c in [where(first["file"], first["line"], what=f"{op} without retain_graph=True freed the "
                               "graph built before it") if first else None,
                         where(stmt_file, line, what="keeps a tensor of that graph for the next iteration")] if c]
    fix = _cache_fix(stmt, holder) or _detach_fix(code, holder, steps)
    return said, where(stmt_file, line, alias=holder), chain, fix


# NOTE [A lazy cache with a graph]
# `if self.cached is None: self.cached = torch.outer(t, self.freqs)` (rotary-embedding-torch#18) keeps a value
# built once, at the first forward, from parameters that train. The second step's backward reaches its freed
# graph. Detaching what is kept makes the error go away, but then the parameters it was built from get no
# gradient at all (measured: `freqs.grad` None at every step). A storing line under an `if` that tests the
# holder itself is such a cache: the fix computes the value in each forward instead, or caches it only where
# nothing needs its gradient.


def _cache_fix(stmt, holder: str) -> str | None:
    """The fix for a lazy cache (NOTE [A lazy cache with a graph]), or None when the storing line is no cache."""
    last = holder.split(".")[-1]
    for a in source.ancestors(stmt):
        if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            return None
        if isinstance(a, ast.If) and any((isinstance(n, ast.Attribute) and n.attr == last)
                                          or (isinstance(n, ast.Name) and n.id == holder) for n in ast.walk(a.test)):
            return (f"`{holder}` caches a value computed from tensors that require grad, built once and reused by "
                    f"every later step: compute it in each forward instead of keeping it (drop the cache), or cache "
                    f"it only where nothing needs its gradient (under `torch.no_grad()`, or when its inputs do not "
                    f"require grad). Detaching it (`{holder} = {holder}.detach()`) also ends the error, but then "
                    "what it was computed from gets no gradient through it.")
    return None

def _held_into_freed(ev, f):
    """(file, statement, holder, path) of the line that stored what carries the freed graph into this backward."""
    holders = list(f.get("holders") or ())
    stmt = source.statement_at(f.get("file"), f.get("line"))
    loop = source.loop_of(stmt) if stmt is not None else None
    if loop is not None:  # the name the loop hands from one iteration to the next first (NOTE [The carried holder])
        carried = source.carried_names(loop)
        holders.sort(key=lambda h: str(h.get("holder")).split(".")[0] not in carried)
    for h in holders:
        file, stmt, _ = _retention.retaining_line(ev, {"path": h.get("path"), "holder": h.get("holder")})
        if stmt is not None:
            return file, stmt, _retention.holder_name(h.get("path")) or h.get("holder"), h.get("path")
    return None


# NOTE [The carried holder]
# At the failing backward every name that reaches the freed graph does so through this iteration's graph:
# word_language_model's new `output` and new `hidden` both do. The one that carried the old graph in is
# the one the loop reads before it binds it (`hidden` in `output, hidden = model(data, hidden)`);
# `output` is made afresh each iteration, and its self-update `output = output.view(...)` sits in a
# branch (the Transformer's) that never ran. So holders the loop carries (source.carried_names) come first.


def _detach_fix(code: str, holder: str, steps=()) -> str:
    """Detach what the retaining line stores: ``self.h = h`` -> ``self.h = h.detach()``."""
    try:
        stmt = ast.parse(code.strip()).body[0]
    except (SyntaxError, ValueError, IndexError):
        stmt = None
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and isinstance(stmt.targets[0], ast.Attribute):
        return (f"Detach what is kept for the next iteration: `{source.text(stmt.targets[0])} = {stmt.value.id}.detach()` "
                "(truncated backpropagation through time); use retain_graph=True only if backward really must "
                "reach into earlier iterations.")
    steps = list(steps or ())
    held_in = next((s.get("via") for s in steps[1:] if s.get("via") != "attr"), None)
    if held_in == "item":  # `hidden -> [0] -> .grad_fn ...`: an LSTM's (h, c) tuple
        how = f"`{holder} = tuple(h.detach() for h in {holder})`"
    elif steps:
        how = f"`{holder} = {holder}.detach()`"
    else:
        how = f"`{holder} = {holder}.detach()`, for a tuple `{holder} = tuple(h.detach() for h in {holder})`"
    return (f"Detach `{holder}` before the next iteration uses it, at this line or right before it "
            f"({how}): each iteration's graph then starts fresh.")
