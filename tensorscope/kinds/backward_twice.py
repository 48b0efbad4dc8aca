"""The `backward-twice` kind: backward() ran a second time through a graph whose saved tensors were already freed."""

from __future__ import annotations

from tensorscope.kinds._base import Kind, Pattern, w

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


def explain(ev):
    """The diagnosis of this kind from the evidence (analysis/backward_twice.py)."""
    from tensorscope.analysis import backward_twice

    return backward_twice.explain(ev)
