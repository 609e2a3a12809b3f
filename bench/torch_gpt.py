"""PyTorch eager training steps on DESIGN.md §4's data, the reference the
benchmarks time ppc against."""
import time

import numpy as np
import torch
import torch.nn.functional as F

CORPUS = "/usr/share/common-licenses/GPL-3"


def torch_steps(model, steps, batch, seq):
    """Trains `model` for `steps` AdamW steps (lr 1e-3, weight decay 0.01) on
    the u8 corpus; returns the time of each step and its loss."""
    tokens = np.fromfile(CORPUS, dtype=np.uint8).astype(np.int64)
    n = len(tokens)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    times, losses = [], []
    model.train()
    for s in range(steps):
        offsets = [((s * batch + b) * seq) % (n - seq - 1) for b in range(batch)]
        x = torch.tensor(np.stack([tokens[o:o + seq] for o in offsets]))
        y = torch.tensor(np.stack([tokens[o + 1:o + seq + 1] for o in offsets]))
        begin = time.perf_counter()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - begin)
        losses.append(loss.item())
    return times, losses
