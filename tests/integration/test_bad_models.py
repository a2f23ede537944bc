"""Broken model paths given to `hearth serve --model` (issue 16): each must
make the server exit at once with a non-zero status and a message naming the
path and what is wrong, never sit at "loading".

Paths that are not regular files (a FIFO, a character device behind a
.gguf name, a FIFO inside a model folder): open(2) of a FIFO blocks until a
writer comes, which hung the server for good before file.c opened without
blocking and checked the file's kind first.

A GGUF whose first tensor's type was changed from F32 to Q4_0 loaded and
generated garbage; its tensors' data regions no longer tile the data
section, and gguf.c now refuses it naming the tensor."""
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, free_port, run  # noqa: E402

# Seconds a refusal may take: loading nothing is immediate; a hang is the bug.
LIMIT_S = 5


def serve_fails(model, *extra):
    """Runs hearth serve --model model; returns its output once it exits,
    after checking it exited non-zero within LIMIT_S."""
    args = [BIN, "serve", "--port", str(free_port()), "--model", model, *extra]
    env = dict(os.environ, HEARTH_DEMO="0")
    try:
        out = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=LIMIT_S, env=env)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("hearth serve --model %s still running after %d s (log: %s)" %
                             (model, LIMIT_S, (e.stderr or b"")[-2000:]))
    text = out.stdout + out.stderr
    assert out.returncode != 0, (model, out.returncode, text[-2000:])
    return text


def test_fifo_gguf_is_refused():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.gguf")
        os.mkfifo(path)
        text = serve_fails(path)
        assert path + ": not a regular file: a FIFO" in text, text[-2000:]


def test_fifo_gguf_is_refused_by_workers():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.gguf")
        os.mkfifo(path)
        text = serve_fails(path, "--workers", "2")
        assert path + ": not a regular file: a FIFO" in text, text[-2000:]


def test_device_behind_gguf_name_is_refused():
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "zero.gguf")
        os.symlink("/dev/zero", path)
        text = serve_fails(path)
        assert path + ": not a regular file: a character device" in text, text[-2000:]


def test_fifo_in_model_folder_is_refused():
    with tempfile.TemporaryDirectory() as d:
        folder = os.path.join(d, "minilm")
        out = subprocess.run([BIN, "convert", "--demo", folder], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and os.path.exists(os.path.join(folder, "config.json")), out.stderr
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            path = os.path.join(folder, name)
            keep = path + ".keep"
            os.rename(path, keep)
            os.mkfifo(path)
            try:
                text = serve_fails(folder)
                assert path + ": not a regular file: a FIFO" in text, (name, text[-2000:])
            finally:
                os.unlink(path)
                os.rename(keep, path)


def first_tensor_type_at(data):
    """The file offset of the first tensor info's type field in GGUF bytes,
    found by walking the header and the key/value records."""
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip_value(t, o):
        if t == 8:
            return o + 8 + struct.unpack_from("<Q", data, o)[0]
        if t == 9:
            et, n = struct.unpack_from("<IQ", data, o)
            o += 12
            for _ in range(n):
                o = skip_value(et, o)
            return o
        return o + sizes[t]

    n_kv = struct.unpack_from("<Q", data, 16)[0]
    o = 24
    for _ in range(n_kv):
        o += 8 + struct.unpack_from("<Q", data, o)[0]
        t = struct.unpack_from("<I", data, o)[0]
        o = skip_value(t, o + 4)
    o += 8 + struct.unpack_from("<Q", data, o)[0]  # the first tensor's name
    n_dims = struct.unpack_from("<I", data, o)[0]
    return o + 4 + 8 * n_dims


def test_retyped_tensor_is_refused():
    with open(os.path.join(SHARED, "models", "stories260K", "stories260K.gguf"), "rb") as f:
        data = bytearray(f.read())
    at = first_tensor_type_at(data)
    assert struct.unpack_from("<I", data, at)[0] == 0, "token_embd.weight is not F32"
    struct.pack_into("<I", data, at, 2)  # Q4_0
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stories-q4.gguf")
        with open(path, "wb") as f:
            f.write(data)
        text = serve_fails(path)
        assert path + ": tensor 'token_embd.weight'" in text and "type q4_0, data of 18432 bytes" in text, text[-2000:]
        assert "do not tile the data section" in text, text[-2000:]


if __name__ == "__main__":
    run([
        test_fifo_gguf_is_refused,
        test_fifo_gguf_is_refused_by_workers,
        test_device_behind_gguf_name_is_refused,
        test_fifo_in_model_folder_is_refused,
        test_retyped_tensor_is_refused,
    ])
