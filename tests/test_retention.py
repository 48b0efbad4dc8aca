"""Retention: memory held, growth per step, retention paths, backward-twice culprits (docs/retention.md).

The corpus (tests/corpus_retention/) holds leak programs, each a rewrite of a public report, with its
retaining line marked ``# CULPRIT`` and the ablation that fixes it as ``FIX: ...``; the twin is the
program with that fix applied (tests/retention_truth.py measures both with torch's profiler). The CLI
is scored on each: the expected kind with the culprit at the marked line on the leak, and no retention
finding (nor the failure) on the twin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from tensorscope import holder_path

from _browser import WINDOW, load, needs_browser, png_facts
from _cli import REPO, line_of, run_cli, run_many, run_python, validate_against_schema
from _sample import ci_sample
from retention_truth import culprit_line, expected_kind, twin_source

# Each program costs two tensorscope runs (the leak and its twin): CI runs a fixed sample of them
# (tests/_sample.py); TENSORSCOPE_CORPUS_FULL=1 runs every one.
ALL = sorted((REPO / "tests" / "corpus_retention").glob("*.py"))
CORPUS = ci_sample(ALL, 8)
RETENTION_KINDS = {"graph-kept-alive", "view-pins-storage", "hook-holds-tensors", "container-grows"}


def _findings(doc: dict) -> list[dict]:
    out = [h for h in doc.get("hazards") or [] if h["kind"] in RETENTION_KINDS]
    d = doc.get("diagnosis")
    if d is not None:
        out.append(d)
    return out


def _run(path: Path) -> dict:
    rc, out, err, doc = run_cli("run", "--json", str(path))
    assert doc is not None, err[-2000:]
    assert validate_against_schema(doc)
    return doc


@pytest.fixture(scope="module")
def scored(tmp_path_factory) -> dict:
    """Each sampled program and its fixed twin under `run --json`, all from one torch import (run_many)."""
    folder = tmp_path_factory.mktemp("twins")
    jobs = []
    for prog in CORPUS:
        twin = folder / prog.name
        twin.write_text(twin_source(prog.read_text()))
        jobs += [("tensorscope", "run", "--json", str(prog)), ("tensorscope", "run", "--json", str(twin))]
    runs = run_many(jobs)
    return {prog.stem: (runs[2 * i], runs[2 * i + 1]) for i, prog in enumerate(CORPUS)}


def _scored_doc(run) -> dict:
    rc, out, err, doc = run
    assert doc is not None, err[-2000:]
    assert validate_against_schema(doc)
    return doc


@pytest.mark.parametrize("prog", CORPUS, ids=[p.stem for p in CORPUS])
def test_leak_is_found_at_its_retaining_line(prog, scored):
    text = prog.read_text()
    kind, line = expected_kind(text), culprit_line(text)
    doc = _scored_doc(scored[prog.stem][0])
    found = [(f["kind"], (f.get("culprit") or {}).get("line")) for f in _findings(doc)]
    assert (kind, line) in found, found


@pytest.mark.parametrize("prog", CORPUS, ids=[p.stem for p in CORPUS])
def test_fixed_twin_raises_no_alarm(prog, scored):
    doc = _scored_doc(scored[prog.stem][1])
    assert not [f["kind"] for f in _findings(doc)], _findings(doc)


def test_short_epochs_accumulator_is_found(tmp_path):
    """NOTE [Growth inside a short loop]: `total_loss += loss` reset at the top of each 4-step epoch. torch
    (a line tracer over train(), in the program's header): 0, 11, 18, 25 graph nodes at steps 1-4 of every
    epoch, +7 per step. Power-of-two samples alone (8, 16, 32) all fall on the same step of an epoch."""
    prog = REPO / "tests" / "corpus_retention" / "total_loss_short_epoch.py"
    twin = tmp_path / prog.name
    twin.write_text(twin_source(prog.read_text()))
    (_, _, err, leak), (_, _, terr, fixed) = run_many([("tensorscope", "run", "--json", str(prog)),
                                                        ("tensorscope", "run", "--json", str(twin))])
    assert leak is not None and fixed is not None, (err + terr)[-2000:]
    (f,) = [f for f in _findings(leak) if f["kind"] == "graph-kept-alive"]
    assert f["culprit"]["line"] == culprit_line(prog.read_text()) and "7 graph nodes per step" in f["explanation"]
    assert ".item()" in f["fix"]
    steps = leak["memory"]["sampled_steps"]
    assert 17 in steps and 18 in steps  # the window after 16
    assert not _findings(fixed)
    assert [s for s in fixed["memory"]["sampled_steps"] if s > 6] == [8, 9, 16, 17, 32, 33]  # two walks a window


def test_an_lbfgs_history_is_not_a_growing_container(tmp_path):
    """NOTE [An optimizer's own history]: LBFGS keeps up to history_size (100) curvature pairs, so a run of 80
    iterations grows `opt` at every sample. torch (the program prints it): len(old_dirs) is min(iterations, 100)
    with the fix or without; the leak is the closure's `losses` list alone."""
    prog = REPO / "tests" / "corpus_retention" / "lbfgs_closure_losses.py"
    twin = tmp_path / prog.name
    twin.write_text(twin_source(prog.read_text()))
    (_, out, err, leak), (_, tout, terr, fixed) = run_many([("tensorscope", "run", "--json", str(prog)),
                                                              ("tensorscope", "run", "--json", str(twin))])
    assert leak is not None and fixed is not None, (err + terr)[-2000:]
    assert "LBFGS history 79" in err and "LBFGS history 79" in terr  # --json: the program's stdout is on stderr
    assert [(f["kind"], f["culprit"]["line"]) for f in _findings(leak)] == [("graph-kept-alive",
                                                                           culprit_line(prog.read_text()))]
    assert not _findings(fixed)
    held = {h["name"]: h for h in fixed["memory"]["holders"]}
    assert held["opt"]["bytes"] > 79 * 2 * 4 * sum(p.numel() for p in torch.nn.Sequential(
        torch.nn.Linear(8, 2048), torch.nn.Linear(2048, 1)).parameters())  # the history is still counted as held


def test_backward_twice_fixes_for_a_shared_part_and_a_lazy_cache():
    """NOTE [A part two losses share]: a DCGAN whose discriminator loss reads `fake` with its graph
    (pytorch/examples#116) and a SAM step whose second pass reuses the first pass's `output` after the
    parameters moved (davda54/sam#45). torch (each program's header): both raise at the second backward;
    the fix at the marked line runs all steps, and for SAM retain_graph=True raises the version error."""
    progs = [REPO / "tests" / "corpus_retention" / f"{n}.py"
             for n in ("gan_fake_not_detached", "sam_second_pass_reuses_output", "rotary_cached_freqs")]
    (_, _, err, gan), (_, _, err2, sam), (_, _, err3, rot) = run_many([("tensorscope", "run", "--json", str(p))
                                                                       for p in progs])
    assert gan is not None and sam is not None and rot is not None, (err + err2 + err3)[-2000:]
    d = gan["diagnosis"]
    assert d["kind"] == "backward-twice" and d["culprit"]["line"] == culprit_line(progs[0].read_text())
    assert "`out_fake = netD(fake.detach())`" in d["fix"] and "optD" in d["explanation"], d
    d = sam["diagnosis"]
    assert d["kind"] == "backward-twice" and d["culprit"]["line"] == culprit_line(progs[1].read_text())
    assert "`output = model(images)`" in d["fix"] and "retain_graph=True would not help" in d["fix"], d
    assert "`p.add_(e)`" in d["explanation"], d
    # NOTE [A lazy cache with a graph]: learned rotary frequencies cached at the first forward
    # (rotary-embedding-torch#18); torch: with the cache detached, `freqs.grad` stays None at every step
    d = rot["diagnosis"]
    assert d["kind"] == "backward-twice" and d["culprit"]["line"] == culprit_line(progs[2].read_text())
    assert "compute it in each forward" in d["fix"] and "`rot.cached`" in d["fix"], d


def test_a_growing_step_graph_freed_after_the_step_is_not_kept(tmp_path):
    """NOTE [A graph kept across steps holds an older node]: REINFORCE keeps an episode's log-probabilities until
    after the optimizer step and the episodes grow, so the graph alive when each backward returns grows too. torch
    (tests/retention_truth.py, the header): +0 graph nodes a step held by the twin, +346 by the leak, whose list
    gets each item's graph through `extend` (the fix detaches the items, not the list)."""
    prog = REPO / "tests" / "corpus_retention" / "episode_log_probs_extended.py"
    twin = tmp_path / prog.name
    twin.write_text(twin_source(prog.read_text()))
    (_, _, err, leak), (_, _, terr, fixed) = run_many([("tensorscope", "run", "--json", str(prog)),
                                                        ("tensorscope", "run", "--json", str(twin))])
    assert leak is not None and fixed is not None, (err + terr)[-2000:]
    found = _findings(leak)
    assert [(f["kind"], f["culprit"]["line"]) for f in found] == [("graph-kept-alive", culprit_line(prog.read_text()))], found
    assert "`history.extend(t.detach() for t in saved_log_probs)`" in found[0]["fix"], found[0]["fix"]
    assert not _findings(fixed), _findings(fixed)


def test_a_kept_loss_list_read_by_torch_stack_is_detached_not_item(tmp_path):
    """makemore with its losses kept for a running average (`torch.stack(recent_losses)`): `.item()` floats
    would make torch.stack raise (torch: TypeError at step 0), so the fix detaches; the fix runs under python."""
    prog = REPO / "tests" / "corpus_retention" / "loss_list_stacked_for_average.py"
    ((_, _, err, doc),) = run_many([("tensorscope", "run", "--json", str(prog))])
    assert doc is not None, err[-2000:]
    (f,) = [f for f in _findings(doc) if f["kind"] == "graph-kept-alive"]
    assert f["culprit"]["line"] == culprit_line(prog.read_text())
    assert "`recent_losses.append(loss.detach())`" in f["fix"] and ".item()" not in f["fix"], f["fix"]
    twin = tmp_path / prog.name
    twin.write_text(twin_source(prog.read_text()))
    rc, out, err = run_python(str(twin), fresh=False)  # what the fix prints: forked, as the run above
    assert rc == 0 and "avg" in out, err[-2000:]


def test_retention_path_and_growth_in_json(scored):
    prog = REPO / "tests" / "corpus_retention" / "loss_list_append.py"
    doc = _scored_doc(scored[prog.stem][0]) if prog.stem in scored else _run(prog)  # the sampled run, if there is one
    h = next(f for f in doc["hazards"] if f["kind"] == "graph-kept-alive")
    r = h["retention"]
    assert r["holder"] == "outputs" and r["path"][0] == {"via": "name", "label": "outputs"}
    # each step says what it goes through (NOTE [Holder path steps]): `outputs[4]['loss']` is two items
    vias = [step["via"] for step in r["path"]]
    assert vias == ["name", "item", "item"] and r["path"][1]["label"].startswith("["), r["path"]
    assert set(vias) <= set(holder_path.VIAS)
    assert r["path_text"] == " -> ".join(step["label"] for step in r["path"])
    assert r["nodes_per_step"] > 0
    assert "outputs.append({" in h["fix"] and "loss.detach()" in h["fix"] and "smooth.detach()" in h["fix"]
    mem = doc["memory"]
    assert mem["holders"] and mem["holders"][0]["bytes"] >= mem["holders"][-1]["bytes"]
    for h in mem["holders"]:
        assert h["path"] is None or h["path"][0] == {"via": "name", "label": h["name"]}, h


def test_memory_held_section_and_tensor_holders(tmp_path):
    prog = tmp_path / "held.py"
    prog.write_text("import torch\nopt_state = [torch.zeros(300, 300)]\nbig = torch.zeros(1000, 1000)\n"
                    "cache = {'row': big[3]}\ndel big\n")
    rc, out, err, _ = run_cli("run", str(prog))
    assert rc == 0, err
    assert "Memory held" in out and "cache" in out
    assert "view-pins-storage" in out  # a 4 KB row keeps a 4 MB storage
    assert "CUDA blocks" not in out  # no CUDA in use
    rc, out, err, doc = run_cli("run", "--json", str(prog))
    assert rc == 0 and doc is not None, err
    (pin,) = [h for h in doc["hazards"] if h["kind"] == "view-pins-storage"]
    assert pin["culprit"]["line"] == 4  # the slicing line keeps it; the memory was allocated by line 3
    assert (pin["retention"]["allocation"] or {}).get("line") == 3, pin["retention"]
    rc, out, err, _ = run_cli("run", "--tensor", "cache['row']", str(prog))
    assert "held by: cache -> ['row']" in out, out
    row = next(t for t in doc["tensors"] if "cache['row']" in t["names"])
    assert doc["memory"]["paths"][row["id"]] == [{"via": "name", "label": "cache"}, {"via": "item", "label": "['row']"}]

    # The terminal's CUDA blocks. No GPU here: the JSON of the real run above, with blocks named as
    # retention.name_blocks names them from a snapshot of this shape (the GPU test below runs it for real)
    from tensorscope.instrument.retention import name_blocks

    held = {n: doc["memory"]["paths"][t["id"]] for t in doc["tensors"] if t["id"] in doc["memory"]["paths"] for n in t["names"]}
    snap = {"segments": [{"device": 0, "address": 1 << 20, "blocks": [
        {"size": 4 << 20, "requested_size": 4_000_000, "state": "active_allocated"},
        {"size": 1 << 20, "state": "inactive"},
        {"size": 2 << 20, "requested_size": 360_000, "state": "active_allocated"},
        {"size": 512, "requested_size": 512, "state": "active_allocated"}]}]}
    doc["memory"]["cuda_blocks"] = name_blocks(snap, {(0, 1 << 20): held["cache['row']"],
                                                      (0, (6 << 20)): held["opt_state[0]"]})
    doc["memory"]["cuda_allocated"] = (6 << 20) + 512
    saved = tmp_path / "r.json"
    saved.write_text(json.dumps(doc))
    rc, out, err, _ = run_cli("explain", "--report", str(saved), cwd=tmp_path)
    assert rc == 1, err  # the pinning view is a hazard
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("CUDA blocks"))
    assert "the 3 largest allocated" in lines[at] and "CUDA 6.0 MB allocated" in out, out
    blocks = [line.split() for line in lines[at + 1:at + 4]]
    assert blocks[0][:3] == ["4.0", "MB", "cuda:0"] and " ".join(blocks[0][3:]) == "cache -> ['row']", lines[at:at + 4]
    assert blocks[1][:3] == ["2.0", "MB", "cuda:0"] and " ".join(blocks[1][3:]) == "opt_state -> [0]", lines[at:at + 4]
    assert blocks[2][:3] == ["512", "B", "cuda:0"] and "not reached from the program's names" in lines[at + 3]


_SAVES = """import os, sys
import torch
d = sys.argv[1]
x = torch.randn(1000, 1000)
emb = torch.randn(2000, 256)
torch.save(x[:10], os.path.join(d, "a.pt"))
torch.save(x[:10].detach(), os.path.join(d, "b.pt"))
torch.save({"model": {"emb": emb[:10], "n": 3}}, os.path.join(d, "c.pt"))
torch.save([x, x[:10]], os.path.join(d, "d.pt"))
torch.save({"head": x[:10].clone()}, os.path.join(d, "e.pt"))
state = {"emb": emb[:5]}
torch.save(state, os.path.join(d, "f.pt"))
"""


def test_torch_save_of_a_pinning_view(tmp_path):
    """torch.save writes a tensor's whole storage: reported where the file is >= 4x (and >= 1 MB) the bytes
    of the tensors saved, a `.detach()`ed slice and a slice inside nested dicts included; not when the
    whole tensor is saved beside its slice, nor for a `.clone()`."""
    prog = tmp_path / "saves.py"
    prog.write_text(_SAVES)
    rc, plain, err = run_python(prog, str(tmp_path), fresh=False)
    assert rc == 0, err
    reach = {"a": 40_000, "b": 40_000, "c": 10 * 256 * 4, "d": 4_000_000 + 40_000, "e": 40_000, "f": 5 * 256 * 4}
    size = {f: (tmp_path / f"{f}.pt").stat().st_size for f in reach}
    wasteful = {line_of(prog, f'"{f}.pt"') for f in reach if size[f] >= max(4 * reach[f], 1 << 20)}
    assert len(wasteful) == 4  # torch wrote a, b, c and f whole
    rc, out, err, doc = run_cli("run", "--json", str(prog), str(tmp_path))
    assert rc == 0, err
    found = {h["culprit"]["line"]: h for h in doc["hazards"] if h["kind"] == "view-pins-storage"}
    assert set(found) == wasteful
    assert "torch.save(x[:10].clone(), " in found[line_of(prog, '"a.pt"')]["fix"]
    assert '{"emb": emb[:10].clone(), "n": 3}' in found[line_of(prog, '"c.pt"')]["fix"]
    assert "['emb']" in found[line_of(prog, '"f.pt"')]["fix"]


def test_api_holders(tmp_path):
    prog = tmp_path / "api_holders.py"
    prog.write_text(
        "import torch, tensorscope\n"
        "history = []\n"
        "def step():\n"
        "    w = torch.ones(3, requires_grad=True)\n"
        "    out = (w * 2).sum()\n"
        "    history.append(out)\n"
        "    return out\n"
        "with tensorscope.inspect() as rep:\n"
        "    y = step()\n"
        "print(rep.holders(y))\n")
    rc, out, err = run_python(prog)
    assert rc == 0, err
    assert "'history -> [0]'" in out and "'y'" in out


# The program observes the same collector, refcounts, weak references and finalizer order.
_TRANSPARENT = '''
import gc, sys, weakref
import torch
died = []
history, total = [], 0.0
model = torch.nn.Linear(64, 64)
for step in range(10):
    x = torch.randn(32, 64)
    out = model(x)
    loss = out.pow(2).mean()
    loss.backward()
    history.append(out)
    weakref.finalize(x, died.append, step)
    total += loss.item()
del x
print("died", died, "refs", [sys.getrefcount(t) for t in history[:3]], "gc", gc.isenabled(), gc.get_threshold())
print("weak", [r() is not None for r in (weakref.ref(history[0]), weakref.ref(model.weight))])
'''


def test_growth_sampling_is_invisible_to_the_program(tmp_path):
    prog = tmp_path / "transparent.py"
    prog.write_text(_TRANSPARENT)
    rc, plain, err = run_python(prog)
    assert rc == 0, err
    rc, out, err, doc = run_cli("run", "--json", str(prog))
    assert rc == 0
    assert err.strip().splitlines()[-2:] == plain.strip().splitlines()[-2:]  # the program's stdout goes to stderr
    assert any(h["kind"] == "graph-kept-alive" for h in doc["hazards"])


_PICTURE = '''
import torch
torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
history = []
for step in range(12):
    x = torch.randn(16, 64)
    out = model(x)
    loss = out.pow(2).mean()
    model.zero_grad()
    loss.backward()
    history.append(out)
big = torch.zeros(512, 1024)
first_row = big[0]
del big
'''


@needs_browser
def test_holder_path_picture_in_the_browser(tmp_path):
    """The HTML report's Memory held section draws each holder path: the name with its retaining line,
    each step, the tensor kept with its bytes; the bars of the holders follow their bytes."""
    prog = tmp_path / "picture.py"
    prog.write_text(_PICTURE)
    page = tmp_path / "picture.html"
    rc, out, err, _ = run_cli("run", "-o", str(page), str(prog))
    assert rc == 0 and page.exists(), err
    dom = load(page, tmp_path, screenshot=tmp_path / "picture.png")
    section = dom.by_id("memory-held")
    assert section is not None

    # what torch says about the same tensors
    model = torch.nn.Linear(64, 64)
    out = model(torch.randn(16, 64))
    out.pow(2).mean().backward()
    model_bytes = sum(t.numel() * t.element_size() for p in model.parameters() for t in (p, p.grad))
    big = torch.zeros(512, 1024)
    row = big[0]

    kept = section.one("svg", "holder-path", data_kind="graph-kept-alive")
    assert kept.attrs["data-holder"] == "history"
    assert kept.attrs["data-culprit-line"] == str(line_of(prog, "history.append(out)"))
    assert int(kept.attrs["data-nodes-per-step"]) > 0
    labels = [g.attrs["data-label"] for g in kept.find_all("g") if "data-label" in g.attrs]
    assert labels[0] == "history" and labels[1].startswith("[")
    target = kept.one("g", "target")
    assert int(target.attrs["data-bytes"]) == out.numel() * out.element_size()
    assert len(kept.find_all("path", "edge")) == len(labels)  # holder -> each step -> the tensor

    pinned = section.one("svg", "holder-path", data_pinned="true")
    assert pinned.attrs["data-holder"] == "first_row"
    t = pinned.one("g", "target")
    assert int(t.attrs["data-bytes"]) == row.numel() * row.element_size()
    assert int(t.attrs["data-storage-bytes"]) == row.untyped_storage().nbytes()
    assert t.attrs["data-alloc-line"] == str(line_of(prog, "big = torch.zeros(512, 1024)"))  # the pinned storage

    rows = {r.attrs["data-name"]: r for r in section.find_all("tr", "holder")}
    assert int(rows["model"].attrs["data-bytes"]) == model_bytes
    widths = {n: int(r.one("rect", "fill").attrs["data-width"]) for n, r in rows.items()}
    nbytes = {n: int(r.attrs["data-bytes"]) for n, r in rows.items()}
    assert all(widths[a] >= widths[b] for a in rows for b in rows if nbytes[a] > nbytes[b])
    w, h, colours = png_facts(tmp_path / "picture.png")
    assert (w, h) == WINDOW and colours > 50


def test_cuda_blocks_are_named_from_a_snapshot_shape():
    """The naming of CUDA blocks is plain data: blocks in address order from their segment's start."""
    from tensorscope.instrument.retention import name_blocks

    snap = {"segments": [{"device": 0, "address": 4096, "blocks": [
        {"size": 1024, "requested_size": 1000, "state": "active_allocated"},
        {"size": 512, "state": "inactive"},
        {"size": 2048, "requested_size": 2048, "state": "active_allocated"}]}]}
    model_w = [{"via": "name", "label": "model"}, {"via": "attr", "label": ".w"}]
    history_0 = [{"via": "name", "label": "history"}, {"via": "item", "label": "[0]"}]
    named = name_blocks(snap, {(0, 4096): model_w, (0, 4096 + 1024 + 512): history_0})
    assert [(b["bytes"], b["name"], b["path"]) for b in named] == [(2048, "history -> [0]", history_0),
                                                                   (1024, "model -> .w", model_w)]


_OOM = '''
import torch
model = torch.nn.Linear(1024, 1024).cuda()
history = [torch.randn(256, 1024, device="cuda") for _ in range(4)]
free, total = torch.cuda.mem_get_info()
too_big = torch.empty(int(total), dtype=torch.uint8, device="cuda")  # more than the device has
'''


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_out_of_memory_names_the_cuda_blocks(tmp_path):
    """At torch.OutOfMemoryError the report names the blocks of the CUDA snapshot by their holders."""
    prog = tmp_path / "oom.py"
    prog.write_text(_OOM)
    rc, plain, err = run_python(prog)
    assert rc == 1 and "OutOfMemoryError" in err
    rc, out, err, doc = run_cli("run", "--json", str(prog))
    assert rc == 1 and doc is not None and validate_against_schema(doc)
    assert doc["program"]["exception"]["type"] == "OutOfMemoryError"
    blocks = doc["memory"]["cuda_blocks"]
    names = {b["name"] for b in blocks if b["name"]}
    assert {"history -> [0]", "model -> .weight"} <= names, blocks
    nbytes = {b["name"]: b["requested_bytes"] for b in blocks if b["name"]}
    assert nbytes["history -> [0]"] == 256 * 1024 * 4 and nbytes["model -> .weight"] == 1024 * 1024 * 4


_WORD_LM_LOOP = '''
def train():
    total_loss = 0.
    if args.model != 'Transformer':
        hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        if args.model == 'Transformer':
            output = model(data)
            output = output.view(-1, ntokens)
        else:
            output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        total_loss += loss.item()
        cache[i] = loss
'''


def test_carried_names_of_a_training_loop():
    """What one iteration hands the next is what the loop reads before it surely binds it: the RNN's
    `hidden` and the running `total_loss`, not `output` (made afresh on both branches, then updated
    from itself on one), nor the loop's own targets."""
    import ast

    from tensorscope import source

    loop = next(n for n in ast.walk(ast.parse(_WORD_LM_LOOP)) if isinstance(n, ast.For))
    carried = source.carried_names(loop)
    assert {"hidden", "total_loss", "cache", "model", "args"} <= carried
    assert not {"output", "loss", "data", "targets", "batch", "i"} & carried



def test_a_new_storage_at_a_freed_ones_address_is_new(tmp_path):
    """A holder whose large tensor is replaced each step (a `.grad` after `zero_grad()`) can get a new
    storage at the address of the one it had at the previous sample. Read by address alone, that storage
    was "kept since the last sample" and, larger than the list's new items, it was named as what grows
    (NOTE [Storage identity across samples]). Sampled here with the real walk over real tensors, the
    address reuse as malloc gives it: a freed storage's address to the next one allocated."""
    from tensorscope.compat import storage_key
    from tensorscope.instrument import retention
    from tensorscope.instrument.tracker import Tracker

    prog = tmp_path / "prog.py"
    prog.write_text("")
    tracker = Tracker(str(prog))
    growth = tracker.growth
    state = {"buf": torch.zeros(256, 256), "kept": []}

    def sample():
        state["kept"].append(torch.zeros(16, 16))  # what grows: 1 KB a step, kept
        growth.boundaries += 1
        walk = retention.Walk(tracker.user).run([("state", state, "global")])
        try:
            growth.samples.append(growth._sample(walk))
        finally:
            walk.release()

    sample()
    state["buf"] = torch.zeros(256, 256)  # a new storage while the old one lives: another address
    reused = storage_key(state["buf"])
    sample()
    state["buf"] = None  # freed (as `zero_grad()` frees `.grad`) ...
    spare = []
    for _ in range(100):  # ... and the next storage allocated takes its address (as backward's `.grad` does)
        t = torch.zeros(256, 256)
        if storage_key(t) == reused:
            break
        spare.append(t)
    else:
        pytest.skip("the allocator gave no freed address back")
    state["buf"] = t
    sample()
    s1, s2, s3 = (s["roots"]["state"] for s in growth.samples)
    assert len(s3["keys"] - s2["keys"]) == 2  # the new item and the new buffer, though at an old address
    labels = [step["label"] for step in s3["witness"]["path"]]
    assert labels == ["state", "['kept']", "[1]"], labels  # the item new at the last sample and still kept


def test_memory_paths_of_tensors_the_snapshot_numbers(tmp_path):
    """The end-of-run walk runs before the snapshot (NOTE [The end-of-run walk before the snapshot]), and most of
    the tensors it reaches here are numbered only by the snapshot: the report still gives a path to the first
    MAX_PATHS tensors in id order, each the list index that holds it."""
    from tensorscope.compact import expand
    from tensorscope.instrument.retention import MAX_PATHS

    n = MAX_PATHS + 500
    prog = tmp_path / "many_in_a_list.py"
    # `a` is numbered before the list's tensors and walked after them (bare tensors last: NOTE [Retention walks])
    prog.write_text("import torch\n"
                    "a = torch.ones(3)\n"
                    f"xs = [torch.full((1,), float(i)) for i in range({n})]\n"
                    "w = torch.ones(2, requires_grad=True)\n"
                    "(w * 2).sum().backward()\n"
                    "print(len(xs))\n")
    report = tmp_path / "r.json"
    rc, out, err, _ = run_cli("run", "-o", str(report), str(prog))
    assert rc == 0, err
    assert out.strip().splitlines()[-1] == str(n)
    doc = expand(json.loads(report.read_text()))
    names = {t["id"]: t["names"] for t in doc["tensors"]}
    paths = doc["memory"]["paths"]
    listed = [tid for tid in names if any(name.startswith("xs[") for name in names[tid])]
    assert len(listed) == n  # every element is a tensor of the report
    assert len(paths) == MAX_PATHS
    ids = sorted(paths, key=lambda tid: int(tid[1:]))
    assert list(paths) == ids  # in id order
    for tid in ids:
        assert "".join(s["label"] for s in paths[tid]) in names[tid]  # `xs` then `[i]`: the tensor's own name
    assert any("a" in names[tid] for tid in ids)
    # the first MAX_PATHS in id order: every tensor with a smaller id than the last one given a path has one
    assert [tid for tid in sorted(names, key=lambda t: int(t[1:])) if int(tid[1:]) <= int(ids[-1][1:])] == ids


# A weight penalty computed once under `if __name__ == "__main__":` and read as a global by a step function that a
# loop calls, and an evaluation helper that rebinds its own `out` (pytorch/examples' gcn with such a penalty).
PENALTY_ONCE = '''import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def evaluate(x, y):
    with torch.no_grad():
        out = model(x)
        out, y = out[:4], y[:4]
        return ((out - y) ** 2).mean().item()


def train_step(x, y):
    opt.zero_grad()
    out = model(x)
    loss = ((out - y) ** 2).mean() + 1e-3 * PENALTY
    loss.backward()
    opt.step()
    return evaluate(x, y)


if __name__ == "__main__":
    penalty = sum(p.pow(2).sum() for p in model.parameters())
    for i in range(3):
        print(i, round(train_step(torch.randn(8, 4), torch.randn(8, 2)), 4))
'''


def test_a_graph_built_once_outside_the_loop_is_the_backward_twice_culprit(tmp_path):
    """NOTE [A graph built by a statement that runs once]: torch raises "backward through the graph a second time"
    at the second step; with the penalty computed in the step (the twin) all three steps run. The step's own `out`,
    whose nodes the failing backward freed itself, is no holder (on main it was named, at the helper's line)."""
    leak, twin = tmp_path / "penalty_once.py", tmp_path / "penalty_in_step.py"
    leak.write_text(PENALTY_ONCE.replace("PENALTY", "penalty"))
    twin.write_text(PENALTY_ONCE.replace("* PENALTY", "* sum(p.pow(2).sum() for p in model.parameters())")
                    .replace("PENALTY", "penalty"))
    (prc, pout, perr), (trc, tout, _), (rc, out, err, doc), (_, _, terr, tdoc) = run_many(
        [("python", str(leak)), ("python", str(twin)), ("tensorscope", "explain", "--json", str(leak)),
         ("tensorscope", "explain", "--json", str(twin))])
    assert prc == 1 and "backward through the graph a second time" in perr and trc == 0 and tout.count("\n") == 3
    assert doc is not None and tdoc is not None, (err + terr)[-2000:]
    d = doc["diagnosis"]
    assert d["kind"] == "backward-twice" and d["culprit"]["line"] == line_of(leak, "penalty = sum("), d
    assert "Compute `penalty` where each step computes its loss" in d["fix"], d["fix"]
    assert "`out`" not in d["explanation"], d["explanation"]
    assert tdoc["diagnosis"] is None and not _findings(tdoc)



PROBE_AFTER_PRETRAIN = '''import torch
import torch.nn.functional as F


class Encoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x):
        h = torch.tanh(self.fc(x))
        return self.norm(h)


torch.manual_seed(0)
enc, head = Encoder(), torch.nn.Linear(16, 8)
x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
opt = torch.optim.SGD([*enc.parameters(), *head.parameters()], lr=0.1)
for step in range(3):  # pretraining: its last `loss` lives on after the loop
    loss = F.mse_loss(head(enc(x)), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
probe = torch.nn.Linear(16, 3)
feats = enc(x).mean(dim=0, keepdim=True).expand(32, 16)  # features of a fixed batch, computed once
popt = torch.optim.SGD(probe.parameters(), lr=0.1)
for step in range(3):
    ploss = F.cross_entropy(probe(feats), y)
    popt.zero_grad()
    ploss.backward()
    popt.step()
    print(step)
'''


def test_features_computed_once_after_a_pretraining_loop_are_the_backward_twice_culprit(tmp_path):
    """NOTE [Earlier graphs not walked] (a linear probe on a ViT's features, real21): torch raises "backward through
    the graph a second time" at the probe's second step; with the features computed under `no_grad` (the twin) all
    three steps run. The pretraining loop's last `loss` lives on, so one earlier graph is walkable; the probe's first
    backward, whose root `ploss` was rebound, is not: `feats` must not be taken for "in no earlier graph" (main named
    the probe's loss line with a truncated-BPTT fix)."""
    leak, twin = tmp_path / "probe_after_pretrain.py", tmp_path / "probe_no_grad.py"
    leak.write_text(PROBE_AFTER_PRETRAIN)
    twin.write_text(PROBE_AFTER_PRETRAIN.replace("feats = enc(x)", "with torch.no_grad():\n    feats = enc(x)"))
    (prc, _, perr), (trc, tout, _), (rc, out, err, doc), (_, _, terr, tdoc) = run_many(
        [("python", str(leak)), ("python", str(twin)), ("tensorscope", "explain", "--json", str(leak)),
         ("tensorscope", "explain", "--json", str(twin))])
    assert prc == 1 and "backward through the graph a second time" in perr and trc == 0 and tout == "0\n1\n2\n"
    assert doc is not None and tdoc is not None, (err + terr)[-2000:]
    d = doc["diagnosis"]
    assert d["kind"] == "backward-twice" and d["culprit"]["line"] == line_of(leak, "feats = enc(x)"), d
    assert d["culprit"]["alias"] == "feats" and "Compute `feats` inside the loop" in d["fix"], d
    assert "truncated backpropagation" not in d["fix"], d["fix"]
    assert tdoc["diagnosis"] is None and not _findings(tdoc)



DEFERRED_LOG = '''import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
report = []
for step in range(12):
    x = torch.randn(16, 8)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    report.append(lambda s=step, l=loss: f"step {s}: {l.item():.4f}")
print(report[-1]())
print(sum(f.__defaults__[1].grad_fn is not None for f in report))
'''


def test_a_list_of_functions_keeping_the_loss_as_a_default_is_a_graph_kept_not_a_hook(tmp_path):
    """NOTE [A closure that no hook holds], NOTE [A function kept with a tensor as its default] (ng-video-lecture's
    gpt.py with a deferred log line, real21): torch says each of the 12 kept functions holds a loss with its graph
    (`grad_fn`), none with `l=loss.detach()`. Main called both "hook-holds-tensors" with "remove the hook" (there is
    no hook), the twin too (4 B a step, under container-grows' 64 KB)."""
    leak, twin = tmp_path / "deferred_log.py", tmp_path / "deferred_log_detached.py"
    leak.write_text(DEFERRED_LOG)
    twin.write_text(DEFERRED_LOG.replace("l=loss:", "l=loss.detach():"))
    (prc, pout, _), (trc, tout, _), (rc, out, err, doc), (_, _, terr, tdoc) = run_many(
        [("python", str(leak)), ("python", str(twin)), ("tensorscope", "run", "--json", str(leak)),
         ("tensorscope", "run", "--json", str(twin))])
    assert prc == trc == 0 and pout.splitlines()[-1] == "12" and tout.splitlines()[-1] == "0", (pout, tout)
    assert doc is not None and tdoc is not None, (err + terr)[-2000:]
    kept = [h for h in _findings(doc) if h["kind"] in RETENTION_KINDS]
    assert [h["kind"] for h in kept] == ["graph-kept-alive"], kept
    assert kept[0]["culprit"]["line"] == line_of(leak, "report.append(lambda"), kept[0]
    assert "lambda s=step, l=loss.detach():" in kept[0]["fix"] and ".item())" not in kept[0]["fix"], kept[0]["fix"]
    assert not [h for h in _findings(tdoc) if h["kind"] in RETENTION_KINDS], _findings(tdoc)


ROWS_KEPT = '''import torch

torch.manual_seed(0)
lin = torch.nn.Linear(16, 40)
opt = torch.optim.SGD(lin.parameters(), lr=0.01)
first_rows = []
for step in range(12):
    x = torch.randn(500, 16)
    loss = lin(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        scores = lin(x).softmax(dim=1)
    first_rows.append(scores[0])
print(len(first_rows))
'''


def test_a_list_of_small_views_is_fixed_by_a_copy(tmp_path):
    """NOTE [Small views that pin their storages]: each step keeps a 160-byte row of an 80,000-byte output (torch:
    the row's `untyped_storage().nbytes()` is the output's), under view-pins-storage's 1 MB: container-grows, whose
    fix copies the row; the twin with `.clone()` keeps 160 B a step and is clean."""
    leak, twin = tmp_path / "rows.py", tmp_path / "rows_clone.py"
    leak.write_text(ROWS_KEPT)
    twin.write_text(ROWS_KEPT.replace("append(scores[0])", "append(scores[0].clone())"))
    row = torch.zeros(500, 40)[0]
    assert row.untyped_storage().nbytes() == 80000 and row.nbytes == 160
    (_, _, err, doc), (_, _, terr, tdoc) = run_many([("tensorscope", "run", "--json", str(leak)),
                                                      ("tensorscope", "run", "--json", str(twin))])
    assert doc is not None and tdoc is not None, (err + terr)[-2000:]
    found = _findings(doc)
    assert [(f["kind"], f["culprit"]["line"]) for f in found] == [("container-grows", line_of(leak, "first_rows.append"))]
    assert "`first_rows.append(scores[0].clone())`" in found[0]["fix"], found[0]["fix"]
    r = found[0]["retention"]
    assert (r["nbytes"], r["storage_nbytes"]) == (160, 80000) and r["bytes_per_step"] >= 64 * 1024, r
    assert not _findings(tdoc), _findings(tdoc)
