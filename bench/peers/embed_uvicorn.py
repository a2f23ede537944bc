#!/usr/bin/python3
"""embed_uvicorn: the Python embedding server hearth is compared with.

Needs (Debian 12): python3-torch, python3-numpy, libopenblas0-pthread,
python3-uvicorn; python3-uvloop and python3-httptools are used when present
(uvicorn[standard]'s fast loop and parser, what a production deployment has).

    /usr/bin/python3 bench/peers/embed_uvicorn.py MODEL_DIR [--port 18502] [--threads 2]

What: an ASGI app under uvicorn, ONE worker process, serving Text Embeddings
Inference's API:
    POST /embed {"inputs": str | [str], "normalize": bool = true, "truncate": bool = false}
        -> 200 [[float, ...], ...]    (one row per input, also for a single string)
    GET /health -> 200
MODEL_DIR is a sentence-transformers folder (config.json, model.safetensors,
vocab.txt, optional tokenizer_config.json, 1_Pooling/config.json, modules.json).

How: the tokenizer is bench/peers/wordpiece.py (pure Python BERT BasicTokenizer
+ WordPiece, checked against Hugging Face's ids); the forward pass is
tests/ref/bert_ref.py's BertRef in float32 under torch.inference_mode with
torch.set_num_threads(THREADS), OpenBLAS held to one thread of its own (see
OPENBLAS_NUM_THREADS below). All inputs of one request run as one
right-padded batch. The forward pass runs on the event loop thread, so requests
are served one at a time and the other connections wait: that is what a
one-worker server without a batching queue does, and with torch already using
every core a thread pool would only add switching.

Rejected: FastAPI/pydantic (more per-request overhead; the baseline should be
the lean version of what people write, so hearth's margin is not flattered);
transformers/sentence-transformers (not in Debian; the forward pass is the same
math as bert_ref.py, which is the project's reference).
"""
import argparse
import importlib.util
import json
import os
import sys

# OpenBLAS's own thread pool and torch's OpenMP pool both spin on the same
# 2 cores: with both at 2 threads one 10-word sentence took ~210 ms here, with
# OpenBLAS at 1 (torch's OpenMP still 2) ~11 ms. Set before torch is imported;
# an OPENBLAS_NUM_THREADS from the environment wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# torch's OpenMP threads spin between parallel regions; wrk and the other
# servers share these cores, and a spinning thread that loses its core stalls
# the region: on a loaded machine one sentence took 132 ms spinning, 38 ms
# passive. (Re-check on an idle machine; OMP_WAIT_POLICY=active to compare.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MAX_BODY = 1 << 20          # bytes of request body accepted; more is 413
MAX_INPUTS = 256            # inputs per request; more is 422 (TEI's default limit is 32)


def need_deps():
    """Exit with a message naming the Debian package when a dependency is missing."""
    missing = []
    for mod, pkg in (("torch", "python3-torch"), ("numpy", "python3-numpy"), ("uvicorn", "python3-uvicorn")):
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    blas = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"
    if not os.path.exists(blas):
        missing.append("libopenblas0-pthread (else Debian's torch uses the slow reference BLAS)")
    if missing:
        sys.stderr.write("embed_uvicorn: missing: %s\n  apt-get install -y %s\n"
                         % (", ".join(missing), " ".join(m.split()[0] for m in missing)))
        sys.exit(2)


def loaded_blas():
    """The BLAS/LAPACK shared objects mapped into this process (after a matmul)."""
    libs = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if "blas" in path or "lapack" in path:
                libs.add(os.path.realpath(path))
    return sorted(libs)


def read_json(path, default):
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


class Embedder:
    def __init__(self, model_dir, threads):
        import torch
        sys.path.insert(0, os.path.join(REPO, "tests", "ref"))
        sys.path.insert(0, HERE)
        import bert_ref
        import wordpiece
        self.torch = torch
        self.model = bert_ref.BertRef(model_dir, torch.float32)
        torch.set_num_threads(threads)  # BertRef sets 2; the flag wins
        # normalization is per request (TEI's "normalize"), not the folder's Normalize module
        self.model.normalize = False
        cfg = read_json(os.path.join(model_dir, "config.json"), {})
        tcfg = read_json(os.path.join(model_dir, "tokenizer_config.json"), {})
        self.max_len = int(cfg.get("max_position_embeddings", 512))
        self.tok = wordpiece.Tokenizer(os.path.join(model_dir, "vocab.txt"),
                                       lowercase=bool(tcfg.get("do_lower_case", True)))

    def embed(self, texts, normalize, truncate):
        """texts -> list of float lists; raises ValueError (-> 413) on a too-long input without truncate."""
        torch = self.torch
        ids = []
        for t in texts:
            full = [self.tok.cls] + self.tok.tokenize(t) + [self.tok.sep]
            if len(full) > self.max_len:
                if not truncate:
                    raise ValueError("input of %d tokens > max %d" % (len(full), self.max_len))
                full = full[:self.max_len - 1] + [self.tok.sep]
            ids.append(full)
        with torch.inference_mode():
            out = self.model.embed(ids)
            if normalize:
                out = torch.nn.functional.normalize(out, p=2.0, dim=1, eps=1e-12)
        return out.tolist()


def make_app(emb):
    async def send_json(send, status, obj):
        body = json.dumps(obj, separators=(",", ":")).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def read_body(receive):
        chunks, size = [], 0
        while True:
            msg = await receive()
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY:
                return None
            chunks.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(chunks)

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if path == "/health" and method == "GET":
            return await send_json(send, 200, {"status": "ok"})
        if path != "/embed":
            return await send_json(send, 404, {"error": "not found", "error_type": "Validation"})
        if method != "POST":
            return await send_json(send, 405, {"error": "method not allowed", "error_type": "Validation"})
        body = await read_body(receive)
        if body is None:
            return await send_json(send, 413, {"error": "body > %d bytes" % MAX_BODY, "error_type": "Validation"})
        try:
            req = json.loads(body)
            inputs = req["inputs"]
            if isinstance(inputs, str):
                inputs = [inputs]
            if (not isinstance(inputs, list) or not inputs or len(inputs) > MAX_INPUTS
                    or not all(isinstance(s, str) for s in inputs)):
                raise ValueError("inputs: a string or 1..%d strings" % MAX_INPUTS)
            normalize = bool(req.get("normalize", True))
            truncate = bool(req.get("truncate", False))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return await send_json(send, 422, {"error": "bad request: %s" % e, "error_type": "Validation"})
        try:
            vecs = emb.embed(inputs, normalize, truncate)
        except ValueError as e:
            return await send_json(send, 413, {"error": str(e), "error_type": "Validation"})
        return await send_json(send, 200, vecs)

    return app


def main():
    ap = argparse.ArgumentParser(description="one-worker uvicorn BERT embedding server (TEI /embed)")
    ap.add_argument("model_dir")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=18502)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    need_deps()
    import torch
    import uvicorn
    emb = Embedder(a.model_dir, a.threads)
    emb.embed(["warm up the kernels and the BLAS"], True, True)
    print("embed_uvicorn: torch %s, %d threads, OPENBLAS_NUM_THREADS=%s, OMP_WAIT_POLICY=%s, uvicorn %s"
          % (torch.__version__, torch.get_num_threads(), os.environ["OPENBLAS_NUM_THREADS"],
             os.environ["OMP_WAIT_POLICY"], uvicorn.__version__), flush=True)
    print("embed_uvicorn: BLAS libraries loaded: %s" % (", ".join(loaded_blas()) or "none found"), flush=True)
    print("embed_uvicorn: torch config:\n" + torch.__config__.show(), flush=True)
    loop = "uvloop" if importlib.util.find_spec("uvloop") else "asyncio"
    http = "httptools" if importlib.util.find_spec("httptools") else "h11"
    print("embed_uvicorn: loop %s, http %s, port %d" % (loop, http, a.port), flush=True)
    uvicorn.run(make_app(emb), host=a.host, port=a.port, workers=1, loop=loop, http=http,
                access_log=False, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
