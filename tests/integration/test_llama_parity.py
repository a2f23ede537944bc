"""Parity of hearth's llama-family forward pass with the PyTorch reference.

For each architecture (llama; qwen2 with q/k/v biases; qwen3 with QK-norm and
tied output) and weight type, a tiny random-weight GGUF is written by
build/tests/models/test_llama_demo_tool (src/models/llama_demo.c: 2 layers,
256 hidden, GQA, the stories260K 512-token vocab), hearth computes the logits
of every position, and tests/ref/llama_ref.py computes them in float64 from
the same file (it dequantizes the stored weights itself, so both see the same
weight values). Three hearth runs per file: 8 ids in one batch, the same 8
one per forward call, and 72 ids in one batch (the kernels switch from row
dots to a packed GEMM at larger M: today at M >= 12 for f32, M >= 24 for
f16/bf16, 16 for the quantized types, so both matmul paths are covered for
every type). F16 weights are repacked into f16 GEMM panels at open, which
every M then runs on; for F16 the three runs are repeated with the weights
in place (--no-repack), which covers the row dots and the per-call packing.

Error measure, per position: max_i |hearth_i - ref_i| / max_i |ref_i| over the
vocabulary; the test asserts the largest over all positions.

Tolerances:
- F32, F16, BF16: 1e-4. The kernels take f32 activations for these types;
  measured <= 1.1e-6.
- Q8_0, Q4_0, Q4_K, Q6_K: 4e-2. For small M the kernels quantize each
  activation row to 8 bits per 32-block (about 1/250 relative per element),
  which compounds through the layers: measured 1.1e-2 .. 2.1e-2 (seed 1, all
  three archs), the same size as the reference itself run with activations
  rounded the same way. 4e-2 leaves 2x margin, while a misread block layout
  gives errors of order 1. (The GEMM path does not quantize activations
  and measures ~1e-6, but the switch-over point is the kernels' choice, so
  the 72-id run is held to the same bound.)
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, os.path.join(HERE, "..", "ref"))
import hearth_test  # noqa: E402
import torch  # noqa: E402
from llama_ref import LlamaRef  # noqa: E402

torch.set_num_threads(2)
BUILD = os.environ.get("HEARTH_BUILD") or os.path.join(HERE, "..", "..", "build")
TOOL = os.path.join(BUILD, "tests", "models", "test_llama_demo_tool")
VOCAB = os.path.join(hearth_test.SHARED, "models", "stories260K", "stories260K.gguf")
TMP = hearth_test.scratch_dir("hearth-parity-")
IDS = [1] + [(i * 7919 + 13) % 512 for i in range(1, 72)]
TOL = {"f32": 1e-4, "f16": 1e-4, "bf16": 1e-4, "q8_0": 4e-2, "q4_0": 4e-2, "q4_k": 4e-2, "q6_k": 4e-2}
ARCHS = {"llama": [], "qwen2": [], "qwen3": ["tied"]}


def rel_err(h, ref):
    """Largest over positions of max |h - ref| / max |ref| (per position)."""
    return float((np.abs(h - ref).max(axis=1) / np.abs(ref).max(axis=1)).max())


def hearth_logits(path, ids, one_by_one=False, norepack=False):
    out = os.path.join(TMP, "logits.bin")
    cmd = [TOOL, "logits", path, ",".join(map(str, ids)), out] + (["onebyone"] if one_by_one else []) + \
        (["norepack"] if norepack else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, "%s failed: %s" % (" ".join(cmd), r.stderr)
    return np.fromfile(out, dtype=np.float32).reshape(len(ids), -1)


def check(arch, wtype):
    path = os.path.join(TMP, "%s_%s.gguf" % (arch, wtype))
    r = subprocess.run([TOOL, "write", path, arch, wtype, VOCAB] + ARCHS[arch], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, "writing %s failed: %s" % (path, r.stderr)
    ref = LlamaRef(path).forward(IDS).numpy()
    assert np.isfinite(ref).all()
    errs = {
        "batch8": rel_err(hearth_logits(path, IDS[:8]), ref[:8]),
        "onebyone8": rel_err(hearth_logits(path, IDS[:8], one_by_one=True), ref[:8]),
        "batch72": rel_err(hearth_logits(path, IDS), ref),
    }
    if wtype == "f16":
        errs["norepack_batch8"] = rel_err(hearth_logits(path, IDS[:8], norepack=True), ref[:8])
        errs["norepack_onebyone8"] = rel_err(hearth_logits(path, IDS[:8], one_by_one=True, norepack=True), ref[:8])
        errs["norepack_batch72"] = rel_err(hearth_logits(path, IDS, norepack=True), ref)
    os.unlink(path)
    print("# %s %s: %s" % (arch, wtype, ", ".join("%s %.2e" % kv for kv in errs.items())), flush=True)
    bad = {k: v for k, v in errs.items() if not v <= TOL[wtype]}
    assert not bad, "%s %s: relative error %s > %g" % (arch, wtype, bad, TOL[wtype])


def make_test(arch, wtype):
    def t():
        check(arch, wtype)
    t.__name__ = "test_parity_%s_%s" % (arch, wtype)
    return t


TESTS = [make_test(a, t) for a in ARCHS for t in TOL]

if __name__ == "__main__":
    try:
        hearth_test.run(TESTS)
    finally:
        for f in os.listdir(TMP):
            os.unlink(os.path.join(TMP, f))
        os.rmdir(TMP)
