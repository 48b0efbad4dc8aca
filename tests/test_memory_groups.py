"""NOTE [Memory groups] (report.py) against its definition, on many random sets of storages.

The report numbers its memory groups with one sort per device and a running union (NOTE [Memory groups
without a tuple a storage]); the definition is plain: storages on one device whose byte ranges overlap
share a group, transitively; a storage of unknown (or zero) address or size is a group of its own; groups
are numbered in the order of their first storage. Here the groups are made from that definition, pair by
pair, and compared on random spans that overlap, touch, nest and repeat.
"""

import random

from tensorscope.report import memory_ids, memory_numbers


def _by_definition(spans):
    n = len(spans)
    group = list(range(n))

    def root(i):
        while group[i] != i:
            i = group[i]
        return i

    for i in range(n):
        for j in range(i):
            (di, si, ni), (dj, sj, nj) = spans[i][:3], spans[j][:3]
            if not (si and ni and sj and nj) or (di or "") != (dj or ""):
                continue
            if si < sj + nj and sj < si + ni:  # [start, end) ranges overlap (touching ones do not)
                group[root(i)] = root(j)
    numbers, out = {}, []
    for i in range(n):
        out.append(numbers.setdefault(root(i), len(numbers) + 1))
    return out


def test_memory_groups_match_their_definition():
    rng = random.Random(22)
    for _ in range(500):
        n = rng.randint(0, 25)
        spans = [(rng.choice(["cpu", "cuda:0", None]), rng.choice([None, 0] + [rng.randint(1, 120)] * 6),
                  rng.choice([None, 0] + [rng.randint(1, 40)] * 6), "s") for _ in range(n)]
        want = _by_definition(spans)
        assert memory_numbers(spans) == want, spans
        assert memory_ids(spans) == [f"m{k}" for k in want]
