"""NVIDIA's perf_analyzer, the tool Triton's users measure an inference
server with, run against hearth's Open Inference Protocol as they would run
it: it reads the model's configuration (GET /v2/models/{m}/config) before
it sends a frame and the server's statistics (/stats) around each window,
and stops at the first error an answer carries. Three runs, each paced
(--request-rate-range: a closed loop flat out took both of CI's cores from
the timing tests of the stream beside it): mnist-8 (../shared/vision) in
the body at 50 and 100 requests/s, the same with the inputs in system
shared memory, and the recurrent model of
tests/ref/frame_models.py as sequences (its config's sequence batching makes
perf_analyzer send sequence ids, starts and ends). Each must end with status
0, and the server's figures it prints must count the frames it sent.

perf_analyzer comes out of a pinned wheel (tests/perf_analyzer.txt) into
build/perf_analyzer by scripts/deps.sh; without it the suite fails saying
so."""
import csv
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hearth_test import SHARED, Server, run, scratch_dir  # noqa: E402

import test_oip  # noqa: E402  (the recurrent model's export)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
PA_DIR = os.path.join(ROOT, "build", "perf_analyzer")
PA = os.path.join(PA_DIR, "perf_analyzer")
MNIST = os.path.join(SHARED, "vision", "mnist-8", "mnist-8.onnx")


def perf_analyzer(port, model, *args):
    """Runs perf_analyzer; its stdout and the rows of its CSV report."""
    if not os.path.exists(PA):
        raise AssertionError("%s is missing: run scripts/deps.sh (it takes perf_analyzer out of the wheels "
                             "tests/perf_analyzer.txt pins)" % PA)
    out_csv = os.path.join(scratch_dir("hearth-pa-"), "pa.csv")
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.join(PA_DIR, "lib"))
    # count windows of 50 requests, any spread accepted (-s 1000): a check of
    # the protocol on a busy 2-core machine, not a measurement
    cmd = [PA, "-m", model, "-u", "127.0.0.1:%d" % port, "-i", "http", "--measurement-mode", "count_windows",
           "--measurement-request-count", "50", "-s", "1000", "--max-trials", "10", "-f", out_csv] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, "perf_analyzer %s: exit %d\n%s%s" % (" ".join(args), p.returncode, p.stdout[-3000:],
                                                                     p.stderr[-2000:])
    with open(out_csv) as f:
        rows = list(csv.DictReader(f))
    return p.stdout, rows


def check_counts(stdout, rows, rates):
    """Each rate's row (the CSV's order is perf_analyzer's); the server's
    inference count for each level at least the client's request count (the
    server counts the warm-up too)."""
    assert sorted(int(float(r["Request Rate"])) for r in rows) == rates, rows
    for r in rows:
        assert float(r["Inferences/Second"]) > 0, r
        assert float(r["Server Compute Infer"]) > 0, r  # from /stats: the run's share
    client = [int(n) for n in re.findall(r"Request count: (\d+)", stdout)]
    server = [int(n) for n in re.findall(r"Inference count: (\d+)", stdout)]
    assert len(client) == len(rates) and len(server) == len(rates), stdout
    assert all(s >= c > 0 for s, c in zip(server, client)), (client, server, stdout[-2000:])


def test_mnist_in_the_body():
    with Server("--model", MNIST, "--log-level", "warn", timeout=60) as s:
        out, rows = perf_analyzer(s.port, "mnist-8", "--request-rate-range", "50:100:50")
        check_counts(out, rows, [50, 100])


def test_mnist_in_shared_memory():
    with Server("--model", MNIST, "--log-level", "warn", timeout=60) as s:
        out, rows = perf_analyzer(s.port, "mnist-8", "--shared-memory", "system", "--request-rate-range", "100")
        check_counts(out, rows, [100])


def test_sequences_of_a_model_with_state():
    test_oip.ensure_state_model()
    name = os.path.splitext(os.path.basename(test_oip.STATE_MODEL))[0]
    with Server("--model", test_oip.STATE_MODEL, "--log-level", "warn", timeout=60) as s:
        out, rows = perf_analyzer(s.port, name, "--sequence-length", "4", "--request-rate-range", "100")
        check_counts(out, rows, [100])


if __name__ == "__main__":
    run([test_mnist_in_the_body, test_mnist_in_shared_memory, test_sequences_of_a_model_with_state])
