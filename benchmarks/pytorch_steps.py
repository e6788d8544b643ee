#!/usr/bin/env python3
"""benchmarks/pytorch_steps.py — the three training steps of benchmarks/steps.hpp in PyTorch (eager,
the way its users write them), for the CPU peer table of docs/performance.md: the MLP 784-500-10 and the
LeNet CNN on the first 4 batches of 128 Fashion-MNIST training images, and the char-LSTM language
model (ids [32, 35] in [0, 256) -> embedding 64 -> LSTM 128 -> dense 256 at every step, gradients
clipped to global norm 5), and the word-LM step of benchmarks/seq_steps.hpp (ids [20, 35] in
[0, 10000) -> embedding 200 -> 2-layer LSTM 200 -> logits tied to the embedding, loss summed over the
35 steps, clipped to 5, SGD with lr 1; model "word_lm"), and the translation step (model
"translate": 64 words of 10 characters -> 12, embedding 48, LSTM 192 encoder, LSTMCell decoder with
input feeding and scaled Luong attention, mean cross-entropy, Adam with lr 2e-3). Each step is zero_grad, forward,
cross-entropy, backward, (clip,) SGD with learning rate 0.01 (1 for the word LM) — the same computation, shapes and layouts as gradus' steps (NCHW, as
PyTorch users run convolutions).

Prints one JSON object per (model, threads) on stdout: wall-clock milliseconds per step (median
of the repetitions) and, at one thread, the CPU time of the calling thread, plus one object that
names the build (PyTorch version, whether MKL and oneDNN are in it, the CPU).

    python3 benchmarks/pytorch_steps.py --data /usr/share/datasets/fashion-mnist --threads 1 2 16
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F

import step_data
from step_data import (CHAR_EMBED, CHAR_UNITS, CLASSES, CLIP, DST_CHARS, HIDDEN, LR, PIXELS, SEQ_EMBED, SEQ_UNITS,
                       SEQ_VOCAB, SRC_CHARS, WORD_STEPS, WORD_UNITS, WORDS, cpu_name)


def as_torch(batches):
    """step_data's numpy batches as torch tensors (sharing memory); pairs stay pairs."""
    convert = lambda a: tuple(map(torch.from_numpy, a)) if isinstance(a, tuple) else torch.from_numpy(a)
    xs, ys = batches
    return [convert(x) for x in xs], [convert(y) for y in ys]


def image_batches(data_dir):
    return as_torch(step_data.image_batches(data_dir))


def sequence_batches():
    return as_torch(step_data.sequence_batches())


def word_batches():
    return as_torch(step_data.word_batches())


def pair_batches():
    return as_torch(step_data.pair_batches())


class WordLm(torch.nn.Module):
    """Embedding, 2-layer LSTM, output tied to the embedding; one LSTM bias (bias_hh frozen at 0)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(WORDS, WORD_UNITS)
        self.lstm = torch.nn.LSTM(WORD_UNITS, WORD_UNITS, num_layers=2, batch_first=True)
        self.bias = torch.nn.Parameter(torch.zeros(WORDS))
        for name, p in self.lstm.named_parameters():
            if "bias_hh" in name:
                p.requires_grad_(False)
                p.data.zero_()

    def forward(self, ids):
        h, _ = self.lstm(self.embed(ids))
        return F.linear(h.reshape(-1, WORD_UNITS), self.embed.weight, self.bias)


class Translate(torch.nn.Module):
    """LSTM encoder, LSTMCell decoder fed [embedding; previous attentional vector], scaled Luong attention."""

    def __init__(self):
        super().__init__()
        self.src_embed = torch.nn.Embedding(SRC_CHARS, CHAR_EMBED)
        self.dst_embed = torch.nn.Embedding(DST_CHARS, CHAR_EMBED)
        self.encoder = torch.nn.LSTM(CHAR_EMBED, CHAR_UNITS, batch_first=True)
        self.decoder = torch.nn.LSTMCell(CHAR_EMBED + CHAR_UNITS, CHAR_UNITS)
        self.memory_layer = torch.nn.Linear(CHAR_UNITS, CHAR_UNITS, bias=False)
        self.g = torch.nn.Parameter(torch.ones(()))
        self.combine = torch.nn.Linear(2 * CHAR_UNITS, CHAR_UNITS, bias=False)
        self.out = torch.nn.Linear(CHAR_UNITS, DST_CHARS)

    def forward(self, batch):
        src, dec_in = batch
        memory, (h, c) = self.encoder(self.src_embed(src))
        h, c = h[0], c[0]
        keys = self.memory_layer(memory)
        a = torch.zeros(src.shape[0], CHAR_UNITS)
        emb = self.dst_embed(dec_in)
        logits = []
        for t in range(dec_in.shape[1]):
            h, c = self.decoder(torch.cat([emb[:, t], a], 1), (h, c))
            w = torch.softmax(torch.bmm(keys, h.unsqueeze(2)).squeeze(2) * self.g, 1)
            context = torch.bmm(w.unsqueeze(1), memory).squeeze(1)
            a = torch.tanh(self.combine(torch.cat([context, h], 1)))
            logits.append(self.out(a))
        return torch.stack(logits, 1).reshape(-1, DST_CHARS)


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(PIXELS, HIDDEN), torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        return self.l2(torch.relu(self.l1(x)))


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(1, 32, 5), torch.nn.Conv2d(32, 64, 5)
        self.l1, self.l2 = torch.nn.Linear(4 * 4 * 64, HIDDEN), torch.nn.Linear(HIDDEN, CLASSES)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.c1(x.view(-1, 1, 28, 28))), 2)
        h = F.max_pool2d(torch.relu(self.c2(h)), 2)
        return self.l2(torch.relu(self.l1(h.flatten(1))))


class CharLstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(SEQ_VOCAB, SEQ_EMBED)
        self.lstm = torch.nn.LSTM(SEQ_EMBED, SEQ_UNITS, batch_first=True)
        self.head = torch.nn.Linear(SEQ_UNITS, SEQ_VOCAB)

    def forward(self, ids):
        h, _ = self.lstm(self.embed(ids))
        return self.head(h.reshape(-1, SEQ_UNITS))


def make_step(model, clip, lr=LR, loss_scale=1.0, adam=False, amp=None, compile_model=False):
    """One training step of `model`; with `amp` ("bf16" or "fp16") the forward pass runs under
    torch.autocast on the model's device (fp16 with a GradScaler), with `compile_model` through torch.compile."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr) if adam else torch.optim.SGD(params, lr=lr)
    forward = torch.compile(model) if compile_model else model
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(amp)
    device = next(model.parameters()).device.type
    scaler = torch.amp.GradScaler(device) if amp == "fp16" else None

    def step(x, y):
        opt.zero_grad()
        if dtype is not None:
            with torch.autocast(device, dtype=dtype):
                loss = F.cross_entropy(forward(x), y)
        else:
            loss = F.cross_entropy(forward(x), y)
        scaled = loss * loss_scale if loss_scale != 1.0 else loss
        if scaler is not None:
            scaler.scale(scaled).backward()
            scaler.unscale_(opt)
        else:
            scaled.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(params, CLIP)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        return loss.item()

    return step


def time_steps(step, xs, ys, repetitions, min_seconds):
    """Median wall-clock and calling-thread CPU milliseconds per step over the repetitions."""
    for i in range(5):  # warm up: allocator, oneDNN primitives
        step(xs[i % len(xs)], ys[i % len(ys)])
    walls, cpus = [], []
    for _ in range(repetitions):
        n, i = 0, 0
        w0, c0 = time.perf_counter(), time.thread_time()
        while True:
            step(xs[i], ys[i])
            i, n = (i + 1) % len(xs), n + 1
            if time.perf_counter() - w0 >= min_seconds:
                break
        walls.append((time.perf_counter() - w0) / n * 1e3)
        cpus.append((time.thread_time() - c0) / n * 1e3)
    return statistics.median(walls), statistics.median(cpus)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST IDX folder")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2, os.cpu_count() or 1])
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.5, help="per repetition")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "lstm"])
    ap.add_argument("--device", default="cpu", help="cpu or cuda (the GPU peer of scripts/gpu-check)")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--amp", choices=["bf16", "fp16"], help="torch.autocast on the device (fp16 with a GradScaler; on a CPU, bf16 runs through oneDNN)")
    a = ap.parse_args()
    dev = torch.device(a.device)

    name, isa = cpu_name()
    print(json.dumps({"peer": "pytorch", "version": torch.__version__, "mkl": torch.backends.mkl.is_available(),
                      "onednn": torch.backends.mkldnn.is_available(), "cpu": name, "isa": isa,
                      "cpus": os.cpu_count(), "device": a.device,
                      "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
                      "compile": a.compile, "amp": a.amp}), flush=True)
    torch.manual_seed(42)
    images = image_batches(a.data) if {"mlp", "cnn"} & set(a.models) else None
    sequences = sequence_batches() if "lstm" in a.models else None
    words = word_batches() if "word_lm" in a.models else None
    pairs = pair_batches() if "translate" in a.models else None
    if dev.type != "cpu":  # the batches live on the device, as the model does
        move = lambda t: t.to(dev) if torch.is_tensor(t) else type(t)(move(u) for u in t)
        on = lambda b: None if b is None else move(b)
        images, sequences, words, pairs = on(images), on(sequences), on(words), on(pairs)
    options = {"amp": a.amp, "compile_model": a.compile}
    for threads in dict.fromkeys(a.threads):  # in order, without repeats
        torch.set_num_threads(threads)
        for model in a.models:
            if model == "word_lm":
                step, (xs, ys) = make_step(WordLm().to(dev), True, lr=1.0, loss_scale=float(WORD_STEPS), **options), words
            elif model == "translate":
                step, (xs, ys) = make_step(Translate().to(dev), False, lr=2e-3, adam=True, **options), pairs
            else:
                net, clip, (xs, ys) = {"mlp": (Mlp, False, images), "cnn": (Cnn, False, images),
                                       "lstm": (CharLstm, True, sequences)}[model]
                step = make_step(net().to(dev), clip, **options)
            wall, cpu = time_steps(step, xs, ys, a.repetitions, a.min_seconds)
            print(json.dumps({"model": model, "threads": threads, "wall_ms": round(wall, 4),
                              "cpu_ms": round(cpu, 4) if threads == 1 else None}), flush=True)


if __name__ == "__main__":
    main()
