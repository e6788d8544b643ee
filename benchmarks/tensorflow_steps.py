#!/usr/bin/env python3
"""benchmarks/tensorflow_steps.py — the training steps of benchmarks/pytorch_steps.py in TensorFlow 2 (Keras
layers, a tf.GradientTape step inside tf.function, the way its users write a custom training loop), for the
CPU peer table of docs/performance.md: the MLP 784-500-10 and the LeNet CNN (NHWC, as TensorFlow runs
convolutions on a CPU) on the first 4 batches of 128 Fashion-MNIST training images, the char-LSTM language
model, the word-LM step and the translation step, with the same shapes, losses, clipping and optimizers.
Each step runs with XLA off (`jit_compile=False`, TensorFlow's default: its own kernels, oneDNN where
built in) and on (`jit_compile=True`).

Prints one JSON object per (model, threads, jit) on stdout: wall-clock milliseconds per step (median of the
repetitions) and the first step's loss, plus one object that names the build (TensorFlow version, whether
oneDNN is on, the CPU). Threads: each setting runs in a process of its own (TensorFlow fixes its thread
pools when it starts), so call it once per thread count:

    python3 benchmarks/tensorflow_steps.py --data /usr/share/datasets/fashion-mnist --threads 1
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

import numpy as np

BATCH, PIXELS, HIDDEN, CLASSES, BATCHES = 128, 784, 500, 10, 4
SEQ_BATCH, SEQ_STEPS, SEQ_EMBED, SEQ_UNITS, SEQ_VOCAB, CLIP = 32, 35, 64, 128, 256, 5.0
LR = 0.01
WORDS, WORD_UNITS, WORD_BATCH, WORD_STEPS = 10000, 200, 20, 35
SRC_CHARS, DST_CHARS, SRC_LEN, DST_LEN, PAIR_BATCH, CHAR_EMBED, CHAR_UNITS = 32, 40, 10, 12, 64, 48, 192


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist", help="Fashion-MNIST IDX folder")
    ap.add_argument("--threads", type=int, default=1, help="intra- and inter-op threads of this process")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-seconds", type=float, default=0.5, help="per repetition")
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "lstm"])
    ap.add_argument("--jit", nargs="+", default=["off", "on"], choices=["off", "on"])
    return ap.parse_args()


A = parse()
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402  (after the environment: the log level is read at import)

tf.config.threading.set_intra_op_parallelism_threads(A.threads)
tf.config.threading.set_inter_op_parallelism_threads(A.threads)
keras = tf.keras


def read_idx(path):
    """An IDX file (gzip or not) as a numpy array of its shape."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0:2] != b"\0\0" or data[2] != 8:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def idx(data_dir, name):
    path = os.path.join(data_dir, name + ".gz")
    return read_idx(path if os.path.exists(path) else os.path.join(data_dir, name))


def image_batches(data_dir):
    images, labels = idx(data_dir, "train-images-idx3-ubyte"), idx(data_dir, "train-labels-idx1-ubyte")
    xs = [tf.constant(images[i * BATCH:(i + 1) * BATCH].reshape(BATCH, PIXELS).astype(np.float32) / 255)
          for i in range(BATCHES)]
    ys = [tf.constant(labels[i * BATCH:(i + 1) * BATCH].astype(np.int64)) for i in range(BATCHES)]
    return xs, ys


def sequence_batches():
    """Random walks over the byte values, as pytorch_steps.py draws them."""
    rng = np.random.default_rng(7)
    xs, ys = [], []
    for _ in range(BATCHES):
        x = np.zeros((SEQ_BATCH, SEQ_STEPS), np.int64)
        y = np.zeros((SEQ_BATCH, SEQ_STEPS), np.int64)
        for n in range(SEQ_BATCH):
            i = int(rng.integers(SEQ_VOCAB))
            for t in range(SEQ_STEPS):
                x[n, t] = i
                i = (i + 1 + int(rng.integers(3))) % SEQ_VOCAB
                y[n, t] = i
        xs.append(tf.constant(x))
        ys.append(tf.constant(y.reshape(-1)))
    return xs, ys


def word_batches():
    """Log-uniform (Zipf-like) word ids, as pytorch_steps.py draws them."""
    rng = np.random.default_rng(9)
    draw = lambda n: (np.power(float(WORDS), rng.random(n)) - 1).astype(np.int64)
    xs = [tf.constant(draw(WORD_BATCH * WORD_STEPS).reshape(WORD_BATCH, WORD_STEPS)) for _ in range(BATCHES)]
    ys = [tf.constant(draw(WORD_BATCH * WORD_STEPS)) for _ in range(BATCHES)]
    return xs, ys


def pair_batches():
    """Random source and target words of fixed length, as pytorch_steps.py draws them."""
    rng = np.random.default_rng(13)
    srcs, tgts = [], []
    for _ in range(BATCHES):
        src = rng.integers(3, SRC_CHARS, (PAIR_BATCH, SRC_LEN))
        out = rng.integers(3, DST_CHARS, (PAIR_BATCH, DST_LEN))
        dec_in = np.concatenate([np.ones((PAIR_BATCH, 1), np.int64), out[:, :-1]], 1)
        srcs.append((tf.constant(src), tf.constant(dec_in)))
        tgts.append(tf.constant(out.reshape(-1)))
    return srcs, tgts


class Mlp(keras.Model):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = keras.layers.Dense(HIDDEN, activation="relu"), keras.layers.Dense(CLASSES)

    def call(self, x):
        return self.l2(self.l1(x))


class Cnn(keras.Model):
    def __init__(self):
        super().__init__()
        self.c1 = keras.layers.Conv2D(32, 5, activation="relu")
        self.c2 = keras.layers.Conv2D(64, 5, activation="relu")
        self.pool = keras.layers.MaxPool2D(2)
        self.l1, self.l2 = keras.layers.Dense(HIDDEN, activation="relu"), keras.layers.Dense(CLASSES)

    def call(self, x):
        h = self.pool(self.c1(tf.reshape(x, [-1, 28, 28, 1])))
        h = self.pool(self.c2(h))
        return self.l2(self.l1(tf.reshape(h, [tf.shape(h)[0], -1])))


class CharLstm(keras.Model):
    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(SEQ_VOCAB, SEQ_EMBED)
        self.lstm = keras.layers.LSTM(SEQ_UNITS, return_sequences=True)
        self.head = keras.layers.Dense(SEQ_VOCAB)

    def call(self, ids):
        return self.head(tf.reshape(self.lstm(self.embed(ids)), [-1, SEQ_UNITS]))


class WordLm(keras.Model):
    """Embedding, 2-layer LSTM, output tied to the embedding, one output bias."""

    def __init__(self):
        super().__init__()
        self.embed = keras.layers.Embedding(WORDS, WORD_UNITS)
        self.lstm1 = keras.layers.LSTM(WORD_UNITS, return_sequences=True)
        self.lstm2 = keras.layers.LSTM(WORD_UNITS, return_sequences=True)
        self.bias = self.add_weight(shape=(WORDS,), initializer="zeros", name="bias")

    def call(self, ids):
        h = tf.reshape(self.lstm2(self.lstm1(self.embed(ids))), [-1, WORD_UNITS])
        return tf.matmul(h, self.embed.embeddings, transpose_b=True) + self.bias


class Translate(keras.Model):
    """LSTM encoder, LSTMCell decoder fed [embedding; previous attentional vector], scaled Luong attention."""

    def __init__(self):
        super().__init__()
        self.src_embed = keras.layers.Embedding(SRC_CHARS, CHAR_EMBED)
        self.dst_embed = keras.layers.Embedding(DST_CHARS, CHAR_EMBED)
        self.encoder = keras.layers.LSTM(CHAR_UNITS, return_sequences=True, return_state=True)
        self.decoder = keras.layers.LSTMCell(CHAR_UNITS)
        self.memory_layer = keras.layers.Dense(CHAR_UNITS, use_bias=False)
        self.g = self.add_weight(shape=(), initializer="ones", name="g")
        self.combine = keras.layers.Dense(CHAR_UNITS, use_bias=False, activation="tanh")
        self.out = keras.layers.Dense(DST_CHARS)

    def call(self, batch):
        src, dec_in = batch
        memory, h, c = self.encoder(self.src_embed(src))
        keys = self.memory_layer(memory)
        a = tf.zeros([tf.shape(src)[0], CHAR_UNITS])
        emb = self.dst_embed(dec_in)
        logits = []
        for t in range(DST_LEN):
            h, (h, c) = self.decoder(tf.concat([emb[:, t], a], 1), [h, c])
            w = tf.nn.softmax(tf.squeeze(tf.matmul(keys, h[:, :, None]), 2) * self.g, 1)
            context = tf.squeeze(tf.matmul(w[:, None, :], memory), 1)
            a = self.combine(tf.concat([context, h], 1))
            logits.append(self.out(a))
        return tf.reshape(tf.stack(logits, 1), [-1, DST_CHARS])


def make_step(model, clip, lr=LR, loss_scale=1.0, adam=False, jit=False):
    """One training step: forward, mean sparse cross-entropy (times loss_scale), gradients, (clip,) update."""
    opt = keras.optimizers.Adam(lr) if adam else keras.optimizers.SGD(lr)

    @tf.function(jit_compile=jit)
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            scaled = loss * loss_scale
        grads = tape.gradient(scaled, model.trainable_variables)
        if clip:
            grads, _ = tf.clip_by_global_norm(grads, CLIP)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return step


def time_steps(step, xs, ys, repetitions, min_seconds):
    """The first step's loss and the median wall-clock milliseconds per step over the repetitions."""
    first = float(step(xs[0], ys[0]))
    for i in range(1, 5):  # warm up: tracing, XLA compilation, oneDNN primitives
        step(xs[i % len(xs)], ys[i % len(ys)])
    walls = []
    for _ in range(repetitions):
        n, i = 0, 0
        w0 = time.perf_counter()
        while True:
            loss = step(xs[i], ys[i])
            i, n = (i + 1) % len(xs), n + 1
            if time.perf_counter() - w0 >= min_seconds:
                break
        float(loss)  # wait for the last step
        walls.append((time.perf_counter() - w0) / n * 1e3)
    return first, statistics.median(walls)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "?", "?"
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return name, isa


def main():
    name, isa = cpu_name()
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
    print(json.dumps({"peer": "tensorflow", "version": tf.__version__, "onednn": onednn, "cpu": name, "isa": isa,
                      "cpus": os.cpu_count(), "threads": A.threads}), flush=True)
    images = image_batches(A.data) if {"mlp", "cnn"} & set(A.models) else None
    data = {"mlp": images, "cnn": images, "lstm": sequence_batches() if "lstm" in A.models else None,
            "word_lm": word_batches() if "word_lm" in A.models else None,
            "translate": pair_batches() if "translate" in A.models else None}
    for jit in A.jit:
        for model in A.models:
            tf.keras.utils.set_random_seed(42)
            if model == "word_lm":
                step = make_step(WordLm(), True, lr=1.0, loss_scale=float(WORD_STEPS), jit=jit == "on")
            elif model == "translate":
                step = make_step(Translate(), False, lr=2e-3, adam=True, jit=jit == "on")
            else:
                net, clip = {"mlp": (Mlp, False), "cnn": (Cnn, False), "lstm": (CharLstm, True)}[model]
                step = make_step(net(), clip, jit=jit == "on")
            xs, ys = data[model]
            try:
                first, wall = time_steps(step, xs, ys, A.repetitions, A.min_seconds)
            except Exception as e:  # an XLA build that cannot compile a model: say so, go on
                print(f"tensorflow_steps: {model} (jit {jit}) failed: {e}", file=sys.stderr)
                continue
            print(json.dumps({"model": model, "threads": A.threads, "jit": jit == "on", "wall_ms": round(wall, 4),
                              "first_loss": round(first, 5)}), flush=True)


if __name__ == "__main__":
    main()
