#!/usr/bin/env python3
"""frame_models.py: small ONNX conv nets made with PyTorch's exporter, with
PyTorch's own outputs as the reference, for the frame tests
(tests/integration/test_frame_models.py, tests/api/test_oip.py).

    /usr/bin/python3 tests/ref/frame_models.py OUTDIR

writes, per model NAME: OUTDIR/NAME.onnx, OUTDIR/NAME.in.<input>.f32 (raw
little-endian float32, C order) and OUTDIR/NAME.out.<output>.f32, and
OUTDIR/index.json naming each model's inputs and outputs with shapes. The
models cover the ops the ONNX planner lowers beyond the shared vision
models: BatchNormalization after a Conv and alone, ReLU6 (Clip), grouped
and dilated convs, MaxPool with ceil_mode and padding, AveragePool with
count_include_pad, GlobalAveragePool, bilinear and nearest Resize, Concat,
Slice, Transpose, Softmax, Flatten + Gemm, MatMul, Sigmoid, HardSwish,
elementwise with broadcasting, Pad (the exporter's way of padding an
average that counts the padding).

The recurrent model (state: h -> h_next) is run by PyTorch for FRAMES steps
from a zero state; OUTDIR/recurrent.state names the pair for hearth, and
recurrent.seq.x.f32 / recurrent.seq.y.f32 / recurrent.seq.h.f32 hold the
FRAMES inputs and the outputs after each step, concatenated.

Deterministic: weights and inputs come from torch.manual_seed(SEED).
Runs on Debian's python3-torch (1.13); needs no onnx package."""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

SEED = 20261202
FRAMES = 32
OPSET = 13


class ConvBnRelu6(nn.Module):
    """Conv + BatchNorm (kept unfused by export in train=False? torch folds it
    when exporting in eval mode, so the second BN follows a non-conv op)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.dw = nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.g = nn.Conv2d(8, 12, 3, padding=(1, 0), groups=4)
        self.bn2 = nn.BatchNorm2d(12)

    def forward(self, x):
        y = F.relu6(self.bn1(self.c1(x)))
        y = F.relu(self.dw(y))
        y = self.g(y)
        return self.bn2(y * 1.5)  # BN after a Mul: lowered alone


class Pools(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(4, 6, 1)

    def forward(self, x):
        a = F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)
        b = F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=True)
        c = F.avg_pool2d(x, 2, stride=2, count_include_pad=False)
        g = F.adaptive_avg_pool2d(self.c(x), 1)
        return a, b, c, g


class Resizes(nn.Module):
    def forward(self, x):
        up = F.interpolate(x, scale_factor=2, mode="nearest")
        bl = F.interpolate(x, size=(13, 7), mode="bilinear", align_corners=False)
        ac = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True)
        return up, bl, ac


class Shapes(nn.Module):
    def forward(self, x):
        t = x.permute(0, 2, 3, 1)                  # Transpose
        s = x[:, 1:3, ::2, 2:-1]                   # Slice with steps
        c = torch.cat([x, x * 2.0 - 1.0], dim=1)   # Concat, broadcasting
        sm = torch.softmax(x.reshape(1, 4, -1), dim=-1)
        hs = F.hardswish(x) + torch.sigmoid(x) * x[:, :1].clamp(-0.5, 0.5)  # broadcast over channels
        return t, s, c, sm, hs


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 5, 5, stride=1, padding=2)
        self.fc = nn.Linear(5 * 4 * 4, 10)
        self.w = nn.Parameter(torch.randn(10, 3))

    def forward(self, x):
        y = F.max_pool2d(torch.tanh(self.c(x)), 4)
        z = self.fc(torch.flatten(y, 1))           # Flatten + Gemm
        return z, torch.matmul(z, self.w)          # MatMul with a constant right side


class Heads(nn.Module):
    """A detector's heads: per scale a conv permuted to NHWC and reshaped,
    the scales concatenated (the planner writes each Transpose straight into
    the Concat: onnx_compose.c); one permuted map is also a graph output and
    one is read twice (both keep their own copy); a Slice then a Transpose
    into the Concat."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1)
        self.b = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.c = nn.Conv2d(3, 2, 1)

    def forward(self, x):
        ta = self.a(x).permute(0, 2, 3, 1)
        tb = self.b(x).permute(0, 2, 3, 1)
        tc = self.c(x).permute(0, 2, 3, 1)
        s = x[:, :, 1:3, :].permute(0, 1, 3, 2)
        cat = torch.cat([ta.reshape(1, -1, 2), tb.reshape(1, -1, 2), tc.reshape(1, -1, 2), s.reshape(1, -1, 2)],
                        dim=1)
        return cat, ta, tb.reshape(1, -1) * 2.0


class Recurrent(nn.Module):
    """A frame model with state: h_next = tanh(conv(x) + conv(h)) * 0.9."""

    def __init__(self):
        super().__init__()
        self.cx = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.ch = nn.Conv2d(8, 8, 3, padding=1)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x, h):
        h2 = torch.tanh(self.cx(x) + self.ch(h)) * 0.9
        y = F.adaptive_avg_pool2d(torch.sigmoid(self.out(h2)), 1).flatten(1)
        return y, h2


def save(path, t):
    t.detach().contiguous().to(torch.float32).numpy().tofile(path)


def export(out_dir, name, model, inputs, in_names, out_names, index):
    model.eval()
    # BatchNorm statistics that are not the identity
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        outs = model(*inputs)
        if isinstance(outs, torch.Tensor):
            outs = (outs,)
        torch.onnx.export(model, tuple(inputs), path, input_names=in_names, output_names=out_names,
                          opset_version=OPSET, do_constant_folding=False)
    entry = {"model": name + ".onnx", "inputs": [], "outputs": []}
    for n, t in zip(in_names, inputs):
        f = f"{name}.in.{n}.f32"
        save(os.path.join(out_dir, f), t)
        entry["inputs"].append({"name": n, "shape": list(t.shape), "file": f})
    for n, t in zip(out_names, outs):
        f = f"{name}.out.{n}.f32"
        save(os.path.join(out_dir, f), t)
        entry["outputs"].append({"name": n, "shape": list(t.shape), "file": f})
    index[name] = entry


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: frame_models.py OUTDIR")
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(SEED)
    index = {}
    export(out_dir, "convbn", ConvBnRelu6(), [torch.randn(1, 3, 17, 23)], ["x"], ["y"], index)
    export(out_dir, "pools", Pools(), [torch.randn(2, 4, 11, 9)], ["x"], ["max", "avg", "avg2", "gap"], index)
    export(out_dir, "resizes", Resizes(), [torch.randn(1, 2, 5, 6)], ["x"], ["up", "bilinear", "corners"], index)
    export(out_dir, "shapes", Shapes(), [torch.randn(1, 4, 6, 8)], ["x"], ["t", "s", "c", "sm", "hs"], index)
    export(out_dir, "head", Head(), [torch.randn(2, 3, 16, 16)], ["x"], ["z", "m"], index)
    export(out_dir, "heads", Heads(), [torch.randn(1, 3, 10, 14)], ["x"], ["cat", "ta", "tb2"], index)

    rec = Recurrent().eval()
    xs = torch.rand(FRAMES, 1, 3, 16, 16) * 2 - 1
    h = torch.zeros(1, 8, 8, 8)
    ys, hs = [], []
    with torch.no_grad():
        for t in range(FRAMES):
            y, h = rec(xs[t], h)
            ys.append(y)
            hs.append(h)
        torch.onnx.export(rec, (xs[0], torch.zeros(1, 8, 8, 8)), os.path.join(out_dir, "recurrent.onnx"),
                          input_names=["x", "h"], output_names=["y", "h_next"], opset_version=OPSET)
    with open(os.path.join(out_dir, "recurrent.state"), "w") as f:
        f.write("h=h_next\n")
    save(os.path.join(out_dir, "recurrent.seq.x.f32"), xs)
    save(os.path.join(out_dir, "recurrent.seq.y.f32"), torch.stack(ys))
    save(os.path.join(out_dir, "recurrent.seq.h.f32"), torch.stack(hs))
    index["recurrent"] = {"model": "recurrent.onnx", "frames": FRAMES, "state": "h=h_next",
                          "inputs": [{"name": "x", "shape": [1, 3, 16, 16], "file": "recurrent.seq.x.f32"}],
                          "outputs": [{"name": "y", "shape": [1, 2], "file": "recurrent.seq.y.f32"}],
                          "state_out": {"name": "h_next", "shape": [1, 8, 8, 8], "file": "recurrent.seq.h.f32"}}
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    print(f"frame_models: {len(index)} models in {out_dir}")


if __name__ == "__main__":
    main()
