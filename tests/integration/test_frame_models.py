"""Frame models (ONNX) against PyTorch, op by op, and sequences with state.

tests/ref/frame_models.py exports small conv nets with PyTorch's ONNX
exporter and saves PyTorch's outputs; `hearth run -m NAME.onnx` must give
the same outputs (max |diff| <= 1e-4 + 1e-4 |want|: f32 in both, only the
order of accumulation differs). The recurrent model is served with its
state pair (recurrent.state: h=h_next) and driven through 32 frames of a
Triton sequence with tritonclient: every frame's output within 1e-5 of
PyTorch's step, and two sequences interleaved frame by frame give
bit-identical outputs (each keeps its own state). Also: an idle sequence
expires and says so, an unknown one is refused, a start on a live id starts
it over, and the planner's errors name the node, op type and opset; copy
pairs the planner composes give the outputs of the copies apart.
"""
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import hearth_test as ht  # noqa: E402

try:
    import tritonclient.http as th
except ImportError:  # the pinned venv has it (scripts/deps.sh)
    th = None

TMP = ht.scratch_dir("hearth-frames-")
_index = None


def models():
    global _index
    if _index is None:
        p = subprocess.run([sys.executable, os.path.join(HERE, "..", "ref", "frame_models.py"), TMP],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, "frame_models.py failed:\n" + p.stdout + p.stderr
        with open(os.path.join(TMP, "index.json")) as f:
            _index = json.load(f)
    return _index


def load(name, shape):
    return np.fromfile(os.path.join(TMP, name), dtype=np.float32).reshape(shape)


def test_ops_match_torch():
    idx = models()
    for name, e in idx.items():
        if name == "recurrent":
            continue
        out = os.path.join(TMP, "out-" + name)
        os.makedirs(out, exist_ok=True)
        args = [ht.BIN, "run", "-m", os.path.join(TMP, e["model"]), "-o", out]
        for i in e["inputs"]:
            args += ["--input", "%s=%s" % (i["name"], os.path.join(TMP, i["file"]))]
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, "%s: %s" % (name, p.stderr[-2000:])
        for o in e["outputs"]:
            want = load(o["file"], o["shape"])
            got = np.fromfile(os.path.join(out, o["name"] + ".f32"), dtype=np.float32)
            assert got.size == want.size, "%s %s: %d values, torch has %d" % (name, o["name"], got.size, want.size)
            got = got.reshape(want.shape)
            err = np.abs(got - want)
            # f32 on both sides, summed in other orders: 1e-4 absolute plus 1e-4 of the value
            bad = err > 1e-4 + 1e-4 * np.abs(want)
            assert not bad.any(), "%s %s: %d of %d values off, max |diff| %.3g at %s" % (
                name, o["name"], bad.sum(), want.size, err.max(), np.unravel_index(err.argmax(), want.shape))


def test_copies_composed():
    # "heads": four Transpose -> Reshape -> Concat chains. Two are written
    # straight into the Concat (onnx_compose.c); one Transpose is also a
    # graph output and one is read twice, so they keep their copies. Every
    # output is the same bit for bit as with every copy kept
    # (HEARTH_ONNX_COMPOSE=0), and test_ops_match_torch checks it against torch.
    e = models()["heads"]
    steps, outs = {}, {}
    for compose in ("0", "1"):
        out = os.path.join(TMP, "heads-compose-" + compose)
        os.makedirs(out, exist_ok=True)
        p = subprocess.run([ht.BIN, "run", "-m", os.path.join(TMP, e["model"]), "-o", out, "--input",
                            "x=" + os.path.join(TMP, e["inputs"][0]["file"])], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, HEARTH_ONNX_COMPOSE=compose))
        assert p.returncode == 0, p.stderr[-2000:]
        m = [ln for ln in p.stderr.splitlines() if "nodes planned as" in ln]
        assert m, p.stderr[-2000:]
        steps[compose] = int(m[0].split("planned as ")[1].split()[0])
        outs[compose] = {o["name"]: open(os.path.join(out, o["name"] + ".f32"), "rb").read() for o in e["outputs"]}
    assert steps["1"] == steps["0"] - 2, steps
    for name, data in outs["0"].items():
        assert len(data) > 0 and outs["1"][name] == data, "%s differs with the copies composed" % name


def test_planner_errors_name_the_node():
    # an op hearth does not lower (ReduceMean), exported by torch
    path = os.path.join(TMP, "reduce.onnx")
    code = ("import torch\n"
            "class M(torch.nn.Module):\n"
            "    def forward(self, x): return x.mean(dim=1)\n"
            "torch.onnx.export(M(), (torch.randn(1, 3, 4, 4),), %r, input_names=['x'], output_names=['y'],"
            " opset_version=13)\n" % path)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([ht.BIN, "run", "-m", path], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0
    assert "op ReduceMean (opset 13) is not supported" in p.stderr and "node '" in p.stderr, p.stderr
    # dynamic dims (YuNet's H and W) need --shape, and the message says so
    yunet = os.path.join(ht.SHARED, "vision", "yunet-2026may", "face_detection_yunet_2026may.onnx")
    assert os.path.exists(yunet), "missing test data: " + yunet
    p = subprocess.run([ht.BIN, "run", "-m", yunet], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "--shape input=" in p.stderr, p.stderr
    p = subprocess.run([ht.BIN, "run", "-m", yunet, "--shape", "input=1x3x320x320"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and "cls_8 [1,1600,1]" in p.stdout, p.stdout + p.stderr
    # a --shape that contradicts the file
    p = subprocess.run([ht.BIN, "run", "-m", yunet, "--shape", "input=1x4x320x320"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode != 0 and "dim 1 is 3" in p.stderr, p.stderr


def infer(c, x, seq, start=False, end=False, model="rec"):
    i = th.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    r = c.infer(model, [i], outputs=[th.InferRequestedOutput("y", binary_data=True)], sequence_id=seq,
                sequence_start=start, sequence_end=end)
    return r.as_numpy("y")


def test_recurrent_sequences():
    assert th is not None, "tritonclient is missing: run scripts/deps.sh (tests/requirements.txt pins it)"
    e = models()["recurrent"]
    n = e["frames"]
    xs = load("recurrent.seq.x.f32", [n, 1, 3, 16, 16])
    ys = load("recurrent.seq.y.f32", [n, 1, 2])
    # the state pair comes from recurrent.state beside the model
    s = ht.Server("--model", "rec=" + os.path.join(TMP, "recurrent.onnx"), "--sequence-timeout-ms", "400")
    try:
        c = th.InferenceServerClient("127.0.0.1:%d" % s.port)
        meta = c.get_model_metadata("rec")
        assert [i["name"] for i in meta["inputs"]] == ["x"], meta  # the state input is not the client's
        assert [o["name"] for o in meta["outputs"]] == ["y"], meta
        got_a, got_b = [], []
        for t in range(n):  # two sequences, interleaved frame by frame
            got_a.append(infer(c, xs[t], 11, start=t == 0, end=t == n - 1))
            got_b.append(infer(c, xs[t], "seq-b", start=t == 0, end=t == n - 1))
        got_a, got_b = np.stack(got_a), np.stack(got_b)
        # the state carried 32 frames: each step within 1e-5 of PyTorch's (f32 both)
        err = np.abs(got_a - ys).max()
        assert err <= 1e-5, "sequence output off torch's by %.3g" % err
        assert np.array_equal(got_a, got_b), "two sequences with the same frames differ"
        # ended: the id is gone
        try:
            infer(c, xs[0], 11)
            raise AssertionError("a frame for an ended sequence was answered")
        except th.InferenceServerException as ex:
            assert ex.status() == "400" and "11" in ex.message(), (ex.status(), ex.message())
        # never started
        try:
            infer(c, xs[0], 999)
            raise AssertionError("a frame for an unknown sequence was answered")
        except th.InferenceServerException as ex:
            assert ex.status() == "400", (ex.status(), ex.message())
        # idle past --sequence-timeout-ms: expired, and the error says so
        infer(c, xs[0], 12, start=True)
        time.sleep(0.9)
        try:
            infer(c, xs[1], 12)
            raise AssertionError("a frame for an expired sequence was answered")
        except th.InferenceServerException as ex:
            assert ex.status() == "400" and "expired" in ex.message(), (ex.status(), ex.message())
        # a start on a live id starts it over from a zero state
        infer(c, xs[0], 13, start=True)
        infer(c, xs[1], 13)
        again = infer(c, xs[0], 13, start=True)
        assert np.array_equal(again, got_a[0]), "a restarted sequence did not start from zeros"
    finally:
        s.stop()


if __name__ == "__main__":
    ht.run([test_ops_match_torch, test_copies_composed, test_planner_errors_name_the_node, test_recurrent_sequences])
