"""Broken model paths given to `hearth serve --model` (issue 16): each must
make the server exit at once with a non-zero status and a message naming the
path and what is wrong, never sit at "loading".

Paths that are not regular files (a FIFO, a character device behind a
.gguf name, a FIFO inside a model folder): open(2) of a FIFO blocks until a
writer comes, which hung the server for good before file.c opened without
blocking and checked the file's kind first."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, free_port, run  # noqa: E402

# Seconds a refusal may take: loading nothing is immediate; a hang is the bug.
LIMIT_S = 10


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


if __name__ == "__main__":
    run([
        test_fifo_gguf_is_refused,
        test_fifo_gguf_is_refused_by_workers,
        test_device_behind_gguf_name_is_refused,
        test_fifo_in_model_folder_is_refused,
    ])
