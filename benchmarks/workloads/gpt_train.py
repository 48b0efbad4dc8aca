"""GPT-style training run: token + position embedding, causal self-attention blocks, layer norm,
GELU MLP, the embedding's weight tied to the head, AdamW, gradient clipping.

Our own small model (4 blocks, width 64, 4 heads, context 32, vocabulary 96, batch 8), trained on
seeded synthetic token streams made once before the loop. 40 steps at scale 1
(steps = max(1, round(40 * scale))); a few seconds on one CPU core. The model is also reachable
as `raw_model` (as training scripts keep it beside a wrapped copy), so a report sees every
parameter under two names.

Size: argv[1] or env TS_BENCH_SCALE (float, default 1.0). Device: env TS_BENCH_DEVICE (default
"cpu"; "cuda" on a GPU machine, where the loss is read back with .item() once, at the end).
With env TS_BENCH_LOOP=PATH (benchmarks/run.py sets it), the CPU time of the steps after the first
(``time.process_time``) is written to PATH as JSON: the loop alone, without start-up and exit.
"""
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("TS_BENCH_SCALE", "1.0"))
STEPS = max(1, round(40 * SCALE))
DEVICE = torch.device(os.environ.get("TS_BENCH_DEVICE", "cpu"))
VOCAB, CONTEXT, WIDTH, HEADS, BLOCKS, BATCH = 96, 32, 64, 4, 4, 8


class SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.register_buffer("mask", torch.tril(torch.ones(CONTEXT, CONTEXT)).view(1, 1, CONTEXT, CONTEXT))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(WIDTH, dim=2)
        q = q.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        k = k.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        v = v.view(b, t, HEADS, c // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = SelfAttention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.ln_f = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.wte.weight  # weight tying

    def forward(self, idx, targets):
        t = idx.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, VOCAB), targets.reshape(-1))

if __name__ == "__main__":  # gpt_infer.py imports the model above
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    stream = torch.randint(0, VOCAB, (16, BATCH, CONTEXT + 1), generator=gen).to(DEVICE)

    model = GPT().to(DEVICE)
    raw_model = model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)


    def train():
        loss = None
        t0 = None
        for step in range(STEPS):
            if step == 1:
                t0 = time.process_time()
            batch = stream[step % len(stream)]
            loss = model(batch[:, :-1], batch[:, 1:])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        out = loss.item()
        if t0 is not None and os.environ.get("TS_BENCH_LOOP"):
            with open(os.environ["TS_BENCH_LOOP"], "w") as fh:
                json.dump({"loop_cpu_s": time.process_time() - t0, "steps": STEPS - 1}, fh)
        return out


    final = train()
    print(f"gpt_train ok steps={STEPS} loss={final:.4f}")
