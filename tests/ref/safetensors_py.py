"""safetensors_py: a minimal .safetensors reader for hearth's reference scripts.

What: load(path) -> {tensor name: torch.Tensor} for F32, F16 and BF16 tensors,
in their stored dtype (callers convert). Other dtypes raise ValueError.

Spec: the safetensors format as documented by Hugging Face (huggingface/safetensors
README, "Format"): 8 bytes little-endian u64 N = header size, then N bytes of
UTF-8 JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, optional
"__metadata__": {...}}, then the data buffer; offsets are relative to the start
of the data buffer (byte 8 + N); tensors are row-major, little-endian.

Written from the spec alone, independently of hearth's C reader
(src/models/safetensors*). Known differences from hearth: none intended; this
reader is deliberately strict (offset/size checks) so that a malformed file is
an error here too, not a silently different tensor.
"""
import json
import struct

import numpy as np
import torch

_DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (np.uint16, 2)}


def _bf16_to_torch(raw):
    # bf16 is the top half of an f32: widen through int32 so the result is exact
    wide = raw.astype(np.uint32) << 16
    return torch.from_numpy(wide.view(np.float32).copy()).to(torch.bfloat16)


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, data start offset)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ValueError("%s: shorter than the 8-byte header length" % path)
        (n,) = struct.unpack("<Q", head)
        if n > 100 * 1024 * 1024:
            raise ValueError("%s: header length %d is implausible" % (path, n))
        raw = f.read(n)
        if len(raw) != n:
            raise ValueError("%s: header truncated (%d of %d bytes)" % (path, len(raw), n))
    header = json.loads(raw.decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    return header, meta, 8 + n


def load(path):
    """Reads every tensor of a .safetensors file into a dict name -> torch.Tensor."""
    header, _, start = read_header(path)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        dtype = info["dtype"]
        if dtype not in _DTYPES:
            raise ValueError("%s: tensor %r: unsupported dtype %s" % (path, name, dtype))
        np_dtype, size = _DTYPES[dtype]
        shape = [int(d) for d in info["shape"]]
        begin, end = (int(v) for v in info["data_offsets"])
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * size or start + end > data.size or begin < 0:
            raise ValueError("%s: tensor %r: offsets [%d, %d) do not fit shape %s of %s (file %d bytes)"
                             % (path, name, begin, end, shape, dtype, data.size))
        raw = np.frombuffer(data[start + begin:start + end].tobytes(), dtype=np_dtype)
        if dtype == "BF16":
            t = _bf16_to_torch(raw)
        else:
            t = torch.from_numpy(raw.copy())
        out[name] = t.reshape(shape)
    return out


def save(path, tensors, metadata=None):
    """Writes {name: torch.Tensor or np.ndarray (float32/float16)} as .safetensors.
    A small writer for tests that build throwaway models; F32 and F16 only."""
    header = {}
    blobs = []
    offset = 0
    for name, t in tensors.items():
        a = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
        if a.dtype == np.float32:
            dt = "F32"
        elif a.dtype == np.float16:
            dt = "F16"
        else:
            raise ValueError("save: tensor %r: dtype %s not supported" % (name, a.dtype))
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hj = json.dumps(header).encode("utf-8")
    hj += b" " * (-len(hj) % 8)  # the spec recommends 8-byte aligned data
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
