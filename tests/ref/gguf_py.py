"""gguf_py: a GGUF v2/v3 reader with numpy dequantization, for hearth's references.

What: GGUF(path) parses the header, the metadata key/values and the tensor
infos; .metadata is a dict key -> Python value (arrays as lists), .tensors a
dict name -> TensorInfo; .tensor(name) returns the tensor dequantized to a
float32 numpy array of shape reversed(ne): a weight with ne = [in, out] comes
back as (out, in), row-major, as torch's Linear expects. Types: F32, F16,
BF16, Q8_0, Q4_0, Q4_K, Q6_K; others raise ValueError.

Spec: the GGUF format (ggml docs/gguf.md): magic "GGUF", u32 version, u64
tensor count, u64 kv count; each kv = string key (u64 length + bytes), u32
value type, value; arrays are u32 element type + u64 count + elements; tensor
infos = name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset relative
to the data section, which starts at the next multiple of general.alignment
(default 32) after the infos. v1 (u32 counts) is refused.

Block layouts and the dequantization formulas were read from ggml's sources
(ggml-common.h block_q4_0/block_q8_0/block_q4_K/block_q6_K; ggml-quants.c
dequantize_row_*, get_scale_min_k4) and re-implemented here, vectorised over
blocks. The float32 operation order follows ggml's scalar code (for Q4_K
y = (d*sc)*q - (dmin*m); for Q6_K y = (d*sc)*q) so the values should be
bit-equal to ggml's scalar dequantizer (by construction; not run against ggml).

Written independently of hearth's C reader (src/models/gguf*). Known
differences from hearth: none intended beyond float rounding if hearth fuses
scales differently.
"""
import struct

import numpy as np

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32

# ggml_type ids (ggml.h enum ggml_type)
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 14, 30
TYPE_NAMES = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q8_0: "Q8_0", Q4_K: "Q4_K", Q6_K: "Q6_K", BF16: "BF16"}
# (elements per block, bytes per block)
BLOCK = {F32: (1, 4), F16: (1, 2), BF16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144),
         Q6_K: (256, 210)}

# gguf_type ids for metadata values
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
            12: "<d"}
T_STRING, T_ARRAY = 8, 9


class TensorInfo:
    def __init__(self, name, ne, ggml_type, offset):
        self.name = name
        self.ne = ne              # ne[0] innermost, as stored
        self.type = ggml_type
        self.offset = offset      # relative to the data section
        self.n = int(np.prod(ne, dtype=np.int64)) if ne else 1

    @property
    def shape(self):
        return tuple(reversed(self.ne))

    def nbytes(self):
        blck, size = BLOCK[self.type]
        if self.ne[0] % blck:
            raise ValueError("tensor %r: ne[0]=%d is not a multiple of the %s block size %d"
                             % (self.name, self.ne[0], TYPE_NAMES[self.type], blck))
        return self.n // blck * size


class _Cursor:
    def __init__(self, buf, path):
        self.buf, self.pos, self.path = buf, 0, path

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise ValueError("%s: truncated at offset %d (need %d bytes)" % (self.path, self.pos, n))
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        n = self.unpack("<Q")
        return self.take(n).decode("utf-8", "replace")

    def value(self, vtype, depth=0):
        if vtype in _SCALARS:
            return self.unpack(_SCALARS[vtype])
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY and depth == 0:
            etype = self.unpack("<I")
            count = self.unpack("<Q")
            if etype in _SCALARS and etype != 7:
                fmt = _SCALARS[etype]
                size = struct.calcsize(fmt)
                return np.frombuffer(self.take(size * count), dtype=np.dtype(fmt)).tolist()
            return [self.value(etype, depth + 1) for _ in range(count)]
        raise ValueError("%s: bad metadata value type %d at offset %d" % (self.path, vtype, self.pos))


class GGUF:
    """A parsed GGUF file; tensor data stays memory-mapped until asked for."""

    def __init__(self, path):
        self.path = path
        self.data = np.memmap(path, dtype=np.uint8, mode="r")
        c = _Cursor(self.data, path)
        if c.take(4) != GGUF_MAGIC:
            raise ValueError("%s: not a GGUF file (bad magic)" % path)
        self.version = c.unpack("<I")
        if self.version not in (2, 3):
            raise ValueError("%s: GGUF version %d not supported (2 or 3)" % (path, self.version))
        n_tensors = c.unpack("<Q")
        n_kv = c.unpack("<Q")
        self.metadata = {}
        for _ in range(n_kv):
            key = c.string()
            vtype = c.unpack("<I")
            self.metadata[key] = c.value(vtype)
        self.tensors = {}
        for _ in range(n_tensors):
            name = c.string()
            n_dims = c.unpack("<I")
            if n_dims > 4:
                raise ValueError("%s: tensor %r: %d dims > 4" % (path, name, n_dims))
            ne = [c.unpack("<Q") for _ in range(n_dims)]
            ggml_type = c.unpack("<I")
            offset = c.unpack("<Q")
            if ggml_type not in BLOCK:
                raise ValueError("%s: tensor %r: ggml type %d not supported" % (path, name, ggml_type))
            self.tensors[name] = TensorInfo(name, ne, ggml_type, offset)
        self.alignment = int(self.metadata.get("general.alignment", DEFAULT_ALIGNMENT))
        self.data_offset = (c.pos + self.alignment - 1) // self.alignment * self.alignment
        for t in self.tensors.values():
            end = self.data_offset + t.offset + t.nbytes()
            if t.offset % self.alignment or end > self.data.size:
                raise ValueError("%s: tensor %r: data [%d, %d) misaligned or past the end (%d bytes)"
                                 % (path, t.name, self.data_offset + t.offset, end, self.data.size))

    def raw(self, name):
        """The tensor's stored bytes, as a uint8 array."""
        t = self.tensors[name]
        start = self.data_offset + t.offset
        return np.asarray(self.data[start:start + t.nbytes()])

    def tensor(self, name):
        """The tensor dequantized to float32, shape reversed(ne)."""
        t = self.tensors[name]
        return dequantize(self.raw(name), t.type, t.n).reshape(t.shape)


def _f16(raw2):
    """(..., 2) uint8 -> float32 of the little-endian halves."""
    return np.ascontiguousarray(raw2).view("<f2")[..., 0].astype(np.float32)


def dequantize(raw, ggml_type, n):
    """Decodes n elements of the given ggml type from raw bytes; returns float32 of shape (n,)."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if ggml_type == F32:
        return raw.view("<f4").astype(np.float32)[:n]
    if ggml_type == F16:
        return raw.view("<f2").astype(np.float32)[:n]
    if ggml_type == BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)[:n]
    blck, size = BLOCK[ggml_type]
    nb = n // blck
    b = raw[:nb * size].reshape(nb, size)
    if ggml_type == Q8_0:
        return _q8_0(b)
    if ggml_type == Q4_0:
        return _q4_0(b)
    if ggml_type == Q4_K:
        return _q4_k(b)
    if ggml_type == Q6_K:
        return _q6_k(b)
    raise ValueError("ggml type %d not supported" % ggml_type)


def _q8_0(b):
    # block_q8_0: f16 d; int8 qs[32]; y = qs * d
    d = _f16(b[:, 0:2])
    qs = b[:, 2:34].view(np.int8).astype(np.float32)
    return (qs * d[:, None]).reshape(-1)


def _q4_0(b):
    # block_q4_0: f16 d; u8 qs[16]; element j = low nibble of qs[j], j+16 = high nibble; y = (q - 8) * d
    d = _f16(b[:, 0:2])
    qs = b[:, 2:18]
    q = np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.int32) - 8
    return (q.astype(np.float32) * d[:, None]).reshape(-1)


def _q4_k_scales(s):
    """get_scale_min_k4 for all 8 sub-blocks: s is (nb, 12) -> (sc, m), each (nb, 8) uint8.
    Sub-blocks 0..3 keep 6 bits in bytes 0..3 (scale) and 4..7 (min); sub-blocks 4..7
    take their low 4 bits from bytes 8..11 and their top 2 bits from the spare top
    bits of bytes 0..3 (scale) and 4..7 (min)."""
    sc = np.empty((s.shape[0], 8), np.uint8)
    m = np.empty((s.shape[0], 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    m[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0xF) | ((s[:, 0:4] >> 6) << 4)
    m[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, m


def _q4_k(b):
    # block_q4_K: f16 d; f16 dmin; u8 scales[12]; u8 qs[128]. Each 64-element chunk c uses
    # 32 bytes of qs: low nibbles are sub-block 2c, high nibbles sub-block 2c+1.
    nb = b.shape[0]
    d = _f16(b[:, 0:2])
    dmin = _f16(b[:, 2:4])
    sc, m = _q4_k_scales(b[:, 4:16])
    qs = b[:, 16:144].reshape(nb, 4, 32)
    q = np.stack([qs & 0xF, qs >> 4], axis=2).reshape(nb, 8, 32).astype(np.float32)
    d1 = (d[:, None] * sc.astype(np.float32))[:, :, None]
    m1 = (dmin[:, None] * m.astype(np.float32))[:, :, None]
    return (d1 * q - m1).reshape(-1)


def _q6_k(b):
    # block_q6_K: u8 ql[128]; u8 qh[64]; int8 scales[16]; f16 d. Each 128-element half n uses
    # ql[64n..], qh[32n..]; quarter k (32 elements) takes the low (k=0,1) or high (k=2,3) nibble
    # of ql[l + 32*(k&1)] and bits 2k..2k+1 of qh[l]; q is that 6-bit value - 32.
    # Scale index is simply element / 16.
    nb = b.shape[0]
    ql = b[:, 0:128].reshape(nb, 2, 2, 32)
    qh = b[:, 128:192].reshape(nb, 2, 1, 32)
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b[:, 208:210])
    lo = np.concatenate([ql & 0xF, ql >> 4], axis=2)                     # (nb, 2, 4, 32)
    hi = (qh >> (2 * np.arange(4, dtype=np.uint8))[None, None, :, None]) & 3
    q = ((lo | (hi << 4)).astype(np.int32) - 32).astype(np.float32).reshape(nb, 16, 16)
    return ((d[:, None] * sc)[:, :, None] * q).reshape(-1)
