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
import json
import os
import statistics
import sys
import time

import step_data
from step_data import (CHAR_EMBED, CHAR_UNITS, CLASSES, CLIP, DST_CHARS, DST_LEN, HIDDEN, LR, SEQ_EMBED, SEQ_UNITS,
                       SEQ_VOCAB, SRC_CHARS, WORD_STEPS, WORD_UNITS, WORDS, cpu_name)


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


def as_tf(batches):
    """step_data's numpy batches as TensorFlow constants; pairs stay pairs."""
    convert = lambda a: tuple(map(tf.constant, a)) if isinstance(a, tuple) else tf.constant(a)
    xs, ys = batches
    return [convert(x) for x in xs], [convert(y) for y in ys]


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


def main():
    name, isa = cpu_name()
    onednn = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") != "0"
    print(json.dumps({"peer": "tensorflow", "version": tf.__version__, "onednn": onednn, "cpu": name, "isa": isa,
                      "cpus": os.cpu_count(), "threads": A.threads}), flush=True)
    images = as_tf(step_data.image_batches(A.data)) if {"mlp", "cnn"} & set(A.models) else None
    data = {"mlp": images, "cnn": images, "lstm": as_tf(step_data.sequence_batches()) if "lstm" in A.models else None,
            "word_lm": as_tf(step_data.word_batches()) if "word_lm" in A.models else None,
            "translate": as_tf(step_data.pair_batches()) if "translate" in A.models else None}
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
