#!/usr/bin/env python3
"""bench/frames_ort.py: onnxruntime's side of bench/frames.sh: one ONNX model
run in-process on the CPU, frame after frame, paced at a fixed rate or flat
out, each frame timed from its scheduled time; prints one JSON line.

    frames_ort.py MODEL.onnx --input FRAME.f32 [--shape 1,3,240,320]
                  [--threads 1] [--rate 20] [--n 1200] [--warmup 1]
                  [--deadline-ms 50]

Paced (--rate R > 0): frame i is due at start + i/R; the loop sleeps until
then and runs it; its latency is the time from when it was due to when
session.run returned, so a frame that had to wait for a slow one before it is
late by that wait too (the same definition `hearth bench --rate` uses, no
coordinated omission). Flat out (--rate 0): back to back, latency = run time.
The first --warmup seconds of frames (at least one frame) are run and not
counted. The JSON has p50/p90/p99/max/mean in ms, misses (frames slower than
--deadline-ms), the frame count and the onnxruntime version.

The session is what a user gets by default (all graph optimizations, CPU
execution provider), with intra_op_num_threads=--threads and one inter-op
thread: the same compute threads hearth is given. The sleep ends 200 us
early and spins the rest, so ORT's frames start within microseconds of
their time, as `hearth bench`'s timerfd releases do.
Rejected: onnxruntime's own perf test tool (not in the PyPI package, and it
measures flat out only)."""
import argparse
import json
import sys
import time


def quantile(xs, q):
    """Nearest rank: the sample at rank ceil(q * n), as hearth bench ranks."""
    xs = sorted(xs)
    k = int(q * len(xs) + 0.999999) - 1
    return xs[max(0, min(len(xs) - 1, k))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", required=True, help="raw little-endian float32 bytes of one frame")
    ap.add_argument("--shape", help="the frame's shape, comma separated (default: the model's first input)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rate", type=float, default=20.0, help="frames/s; 0: flat out")
    ap.add_argument("--n", type=int, default=1200, help="frames counted")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds of frames run first, not counted")
    ap.add_argument("--deadline-ms", type=float, default=50.0)
    a = ap.parse_args()
    try:
        import numpy as np
        import onnxruntime as ort
    except ImportError as e:
        sys.exit("frames_ort.py: %s: install the pinned PyPI packages (bash scripts/deps.sh makes build/venv)" % e)

    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # errors only: UltraFace's unsimplified file lists its initializers as graph
    # inputs, and ORT warns once per initializer (it then folds no constants
    # there: that is the model as published, and as hearth gets it too)
    so.log_severity_level = 3
    sess = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    if a.shape:
        shape = [int(d) for d in a.shape.split(",")]
    else:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in inp.shape]
    frame = np.fromfile(a.input, dtype="<f4")
    want = int(np.prod(shape))
    if frame.size != want:
        sys.exit("frames_ort.py: %s: %d floats, but input '%s' %s takes %d" % (a.input, frame.size, inp.name,
                                                                              shape, want))
    feed = {inp.name: frame.reshape(shape)}

    if a.rate > 0:
        warm = max(1, round(a.warmup * a.rate))  # the schedule's first frames
    else:
        warm, t_end = 0, time.perf_counter() + a.warmup
        sess.run(None, feed)
        while time.perf_counter() < t_end:
            sess.run(None, feed)
    lat = []
    gap = 1.0 / a.rate if a.rate > 0 else 0.0
    start = time.perf_counter() + 0.005
    for i in range(warm + a.n):
        if a.rate > 0:
            due = start + i * gap
            now = time.perf_counter()
            if due - now > 0.0002:
                time.sleep(due - now - 0.0002)
            while time.perf_counter() < due:
                pass
        else:
            due = time.perf_counter()
        sess.run(None, feed)
        took = time.perf_counter() - due
        if i >= warm:
            lat.append(took * 1e3)
    print(json.dumps({
        "arm": "onnxruntime", "mode": "open" if a.rate > 0 else "closed", "rate": a.rate, "threads": a.threads,
        "requests": len(lat), "p50_ms": quantile(lat, 0.5), "p90_ms": quantile(lat, 0.9),
        "p99_ms": quantile(lat, 0.99), "max_ms": max(lat), "mean_ms": sum(lat) / len(lat),
        "misses": sum(1 for x in lat if x > a.deadline_ms), "deadline_ms": a.deadline_ms,
        "onnxruntime": ort.__version__}))


if __name__ == "__main__":
    main()
