"""benchmarks/step_data.py — what benchmarks/pytorch_steps.py and benchmarks/tensorflow_steps.py share: the
steps' shapes, their batches as numpy arrays (each framework wraps them in its own tensors), and the CPU's
name. The image batches are the first 4 batches of 128 Fashion-MNIST training images; the sequence, word
and pair batches are drawn as benchmarks/steps.hpp and seq_steps.hpp draw theirs (another generator)."""
import gzip
import os

import numpy as np

BATCH, PIXELS, HIDDEN, CLASSES, BATCHES = 128, 784, 500, 10, 4
SEQ_BATCH, SEQ_STEPS, SEQ_EMBED, SEQ_UNITS, SEQ_VOCAB, CLIP = 32, 35, 64, 128, 256, 5.0
LR = 0.01
WORDS, WORD_UNITS, WORD_BATCH, WORD_STEPS = 10000, 200, 20, 35
SRC_CHARS, DST_CHARS, SRC_LEN, DST_LEN, PAIR_BATCH, CHAR_EMBED, CHAR_UNITS = 32, 40, 10, 12, 64, 48, 192


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


def read_dataset_file(data_dir, name):
    """Fashion-MNIST's file `name`, gzipped or not."""
    path = os.path.join(data_dir, name + ".gz")
    return read_idx(path if os.path.exists(path) else os.path.join(data_dir, name))


def image_batches(data_dir):
    """xs: float32 [128, 784] in [0, 1]; ys: int64 [128]."""
    images = read_dataset_file(data_dir, "train-images-idx3-ubyte")
    labels = read_dataset_file(data_dir, "train-labels-idx1-ubyte")
    xs = [images[i * BATCH:(i + 1) * BATCH].reshape(BATCH, PIXELS).astype(np.float32) / 255 for i in range(BATCHES)]
    ys = [labels[i * BATCH:(i + 1) * BATCH].astype(np.int64) for i in range(BATCHES)]
    return xs, ys


def sequence_batches():
    """Random walks over the byte values: xs int64 [32, 35], ys the next ids, flattened."""
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
        xs.append(x)
        ys.append(y.reshape(-1))
    return xs, ys


def word_batches():
    """Log-uniform (Zipf-like) word ids: xs int64 [20, 35], ys [700]."""
    rng = np.random.default_rng(9)
    draw = lambda n: (np.power(float(WORDS), rng.random(n)) - 1).astype(np.int64)
    xs = [draw(WORD_BATCH * WORD_STEPS).reshape(WORD_BATCH, WORD_STEPS) for _ in range(BATCHES)]
    ys = [draw(WORD_BATCH * WORD_STEPS) for _ in range(BATCHES)]
    return xs, ys


def pair_batches():
    """Random source and target words of fixed length: xs (source, decoder input), ys the targets, flattened."""
    rng = np.random.default_rng(13)
    srcs, tgts = [], []
    for _ in range(BATCHES):
        src = rng.integers(3, SRC_CHARS, (PAIR_BATCH, SRC_LEN))
        out = rng.integers(3, DST_CHARS, (PAIR_BATCH, DST_LEN))
        dec_in = np.concatenate([np.ones((PAIR_BATCH, 1), np.int64), out[:, :-1]], 1)
        srcs.append((src, dec_in))
        tgts.append(out.reshape(-1))
    return srcs, tgts


def cpu_name():
    """The CPU's model name and its widest vector ISA."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "?", "?"
    name = next((l.split(":", 1)[1].strip() for l in info.splitlines() if l.startswith("model name")), "?")
    flags = next((l.split(":", 1)[1].split() for l in info.splitlines() if l.startswith("flags")), [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "SSE"
    return name, isa
