"""The Open Inference Protocol (KServe v2 REST, as Triton serves it) over
HTTP, driven by tritonclient[http], the client people point at such servers,
on a real ONNX model (../shared/vision/mnist-8) checked against
onnxruntime's golden output: health, server and model metadata, readiness,
Triton's model configuration and statistics, infer with JSON and binary
tensors in both directions, the outputs filter, every malformed request
and its 400 naming the tensor, unknown models and versions (404),
deadlines (504, counted in /metrics), concurrent clients that must not mix
their answers, and sequence parameters.

The stateful tests (sequences whose state the model carries between frames:
start, continue, end, unknown, expired, restart, interleaved) serve the
recurrent model tests/ref/frame_models.py exports with PyTorch (its state
pair in recurrent.state beside it), or HEARTH_STATE_MODEL with the serve
flags in HEARTH_STATE_ARGS.

If the server cannot load the model the suite fails with the server's log."""
import json
import os
import shlex
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Server, request, run, scratch_dir  # noqa: E402

try:
    import numpy as np
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException
except ImportError as e:
    print("not ok - setup: the `tritonclient[http]` or `numpy` Python package is missing (%s); run scripts/deps.sh, "
          "which installs tests/requirements.txt into build/venv, and run the suite with build/venv/bin/python" % e)
    sys.exit(1)

MODEL = "mnist-8"
MODEL_PATH = os.path.join(SHARED, "vision", "mnist-8", "mnist-8.onnx")
GOLDEN = os.path.join(SHARED, "vision", "golden")
IN_NAME, OUT_NAME = "Input3", "Plus214_Output_0"
IN_SHAPE, OUT_SHAPE = [1, 1, 28, 28], [1, 10]
TOL = 1e-4
STATE_MODEL = os.environ.get("HEARTH_STATE_MODEL")
STATE_ARGS = shlex.split(os.environ.get("HEARTH_STATE_ARGS", "--sequence-timeout-ms 300"))


def ensure_state_model():
    """The recurrent model of tests/ref/frame_models.py, exported once into a temp dir."""
    global STATE_MODEL
    if STATE_MODEL:
        return
    import subprocess
    d = scratch_dir("hearth-oip-state-")
    ref = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref", "frame_models.py")
    p = subprocess.run([sys.executable, ref, d], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "tests/ref/frame_models.py failed:\n" + p.stdout + p.stderr
    STATE_MODEL = os.path.join(d, "recurrent.onnx")

_server = []


def srv():
    """One server for the suite (mnist loads in milliseconds, but the suite sends many requests)."""
    if not _server:
        _server.append(Server("--model", MODEL_PATH, "--log-level", "warn", timeout=60))
    return _server[0]


def client(s=None, **kw):
    return httpclient.InferenceServerClient(url="127.0.0.1:%d" % (s or srv()).port, **kw)


def golden_input():
    return np.fromfile(os.path.join(GOLDEN, "mnist-8.in.%s.f32" % IN_NAME), dtype="<f4").reshape(IN_SHAPE)


def golden_output():
    return np.fromfile(os.path.join(GOLDEN, "mnist-8.out.%s.f32" % OUT_NAME), dtype="<f4").reshape(OUT_SHAPE)


def infer(x, binary_in=True, binary_out=True, outputs=True, c=None, **kw):
    inp = httpclient.InferInput(IN_NAME, list(x.shape), "FP32")
    inp.set_data_from_numpy(x.astype(np.float32), binary_data=binary_in)
    outs = [httpclient.InferRequestedOutput(OUT_NAME, binary_data=binary_out)] if outputs else None
    return (c or client()).infer(MODEL, [inp], outputs=outs, **kw)


def expect_error(fn, status, *needles):
    try:
        fn()
    except InferenceServerException as e:
        assert e.status() == str(status), (e.status(), e.message())
        for n in needles:
            assert n in e.message(), (n, e.message())
        return e
    raise AssertionError("no error; expected %d with %r" % (status, needles))


def post_raw(path, body, headers=None):
    h = {"Content-Type": "application/octet-stream" if headers and "Inference-Header-Content-Length" in headers
         else "application/json"}
    h.update(headers or {})
    return request(srv().port, "POST", path, body=body, headers=h, timeout=30)


def raw_error(path, doc_or_bytes, status, *needles, headers=None):
    body = doc_or_bytes if isinstance(doc_or_bytes, bytes) else json.dumps(doc_or_bytes).encode()
    st, h, out = post_raw(path, body, headers)
    assert st == status, (st, out[:400])
    assert h.get("content-type", "").startswith("application/json"), h
    doc = json.loads(out)
    assert isinstance(doc.get("error"), str), doc  # Triton's shape: {"error": "..."}
    for n in needles:
        assert n in doc["error"], (n, doc["error"])
    return doc["error"]


def flat_input(x=None):
    x = golden_input() if x is None else x
    return {"name": IN_NAME, "datatype": "FP32", "shape": IN_SHAPE, "data": [float(v) for v in x.ravel()]}


def metrics():
    st, _, body = request(srv().port, "GET", "/metrics")
    assert st == 200
    return body.decode()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + "{") and 'model="%s"' % MODEL in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("metric %s for %s not in /metrics:\n%s" % (name, MODEL, text[-2000:]))


# ---- tests ----

def test_health_and_metadata():
    c = client()
    assert c.is_server_live() and c.is_server_ready()
    assert c.is_model_ready(MODEL) and c.is_model_ready(MODEL, "1")
    assert not c.is_model_ready("no-such-model")
    meta = c.get_server_metadata()
    assert meta["name"] == "hearth" and meta["version"], meta
    assert "binary_tensor_data" in meta["extensions"] and "sequence" in meta["extensions"], meta
    for m in (c.get_model_metadata(MODEL), c.get_model_metadata(MODEL, "1")):
        assert m["name"] == MODEL and m["versions"] == ["1"] and m["platform"], m
        assert m["inputs"] == [{"name": IN_NAME, "datatype": "FP32", "shape": IN_SHAPE}], m
        assert m["outputs"] == [{"name": OUT_NAME, "datatype": "FP32", "shape": OUT_SHAPE}], m
    expect_error(lambda: c.get_model_metadata("no-such-model"), 404, "no-such-model", MODEL)
    expect_error(lambda: c.get_model_metadata(MODEL, "2"), 404, "version '2'")
    for path in ("/v2/health/live", "/v2/health/ready", "/v2/models/%s/ready" % MODEL):
        st, _, _ = request(srv().port, "GET", path)
        assert st == 200, path


def test_model_config_and_statistics():
    """Triton's model configuration and statistics extensions, as
    tritonclient (and perf_analyzer) read them: the config names the
    tensors with Triton's data types and full dims (max_batch_size 0); the
    statistics count each frame answered once, with the phase times inside
    the whole, and a frame answered late as a failure."""
    c = client()
    cfg = c.get_model_config(MODEL)
    assert cfg["name"] == MODEL and cfg["max_batch_size"] == 0 and cfg["platform"], cfg
    assert cfg["input"] == [{"name": IN_NAME, "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": IN_SHAPE,
                             "is_shape_tensor": False}], cfg
    assert [(o["name"], o["data_type"], o["dims"]) for o in cfg["output"]] == [(OUT_NAME, "TYPE_FP32", OUT_SHAPE)], cfg
    assert cfg["instance_group"][0]["kind"] == "KIND_CPU" and "sequence_batching" not in cfg, cfg
    assert c.get_model_config(MODEL, "1") == cfg
    expect_error(lambda: c.get_model_config("no-such-model"), 404, "no-such-model")
    expect_error(lambda: c.get_model_config(MODEL, "2"), 404, "version '2'")
    expect_error(lambda: c.get_inference_statistics("no-such-model"), 404, "no-such-model")
    st, _, _ = request(srv().port, "POST", "/v2/models/%s/config" % MODEL, body=b"{}")
    assert st == 405, st
    assert {"model_configuration", "statistics"} <= set(c.get_server_metadata()["extensions"])

    def stats():
        st = c.get_inference_statistics(MODEL)["model_stats"]
        assert len(st) == 1 and st[0]["name"] == MODEL and st[0]["version"] == "1", st
        return st[0]
    before, t0 = stats(), time.time()
    for _ in range(5):
        infer(golden_input())
    late = expect_error(lambda: infer(golden_input(), timeout=1), 504, "deadline")
    after = stats()
    ok = after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"]
    assert ok == 5 and after["inference_count"] - before["inference_count"] == 5, (before, after)
    assert after["execution_count"] == after["inference_count"], after
    assert after["inference_stats"]["fail"]["count"] - before["inference_stats"]["fail"]["count"] == 1, (late, after)
    whole = after["inference_stats"]["success"]["ns"] - before["inference_stats"]["success"]["ns"]
    parts = sum(after["inference_stats"][k]["ns"] - before["inference_stats"][k]["ns"]
                for k in ("queue", "compute_input", "compute_infer", "compute_output"))
    assert 0 < parts <= whole, (parts, whole)
    assert after["inference_stats"]["compute_infer"]["ns"] > before["inference_stats"]["compute_infer"]["ns"]
    assert abs(after["last_inference"] / 1000 - t0) < 60, after["last_inference"]
    assert after["batch_stats"][0]["batch_size"] == 1, after
    every = c.get_inference_statistics()["model_stats"]  # GET /v2/models/stats: every model
    assert [m["name"] for m in every] == [MODEL], every


def test_infer_json_and_binary_match_the_golden():
    x, want = golden_input(), golden_output()
    for binary_in in (False, True):
        for binary_out in (False, True):
            r = infer(x, binary_in, binary_out, request_id="frame-%d%d" % (binary_in, binary_out))
            got = r.as_numpy(OUT_NAME)
            assert got.shape == tuple(OUT_SHAPE) and got.dtype == np.float32, (got.shape, got.dtype)
            err = float(np.max(np.abs(got - want)))
            assert err <= TOL, (binary_in, binary_out, err)
            resp = r.get_response()
            assert resp["model_name"] == MODEL and resp["model_version"] == "1", resp
            assert resp["id"] == "frame-%d%d" % (binary_in, binary_out), resp
    # no outputs listed: all of them, binary (tritonclient asks binary_data_output)
    r = infer(x, outputs=False)
    assert float(np.max(np.abs(r.as_numpy(OUT_NAME) - want))) <= TOL
    assert "binary_data_size" in r.get_response()["outputs"][0]["parameters"]


def test_wire_format():
    """The bytes on the wire: JSON answers as application/json; binary ones as
    application/octet-stream with Inference-Header-Content-Length, the raw
    little-endian floats after the JSON header."""
    x, want = golden_input(), golden_output()
    st, h, body = post_raw("/v2/models/%s/infer" % MODEL, json.dumps({"inputs": [flat_input(x)]}).encode())
    assert st == 200 and h["content-type"].startswith("application/json"), (st, h, body[:300])
    assert "inference-header-content-length" not in h
    doc = json.loads(body)
    out = doc["outputs"][0]
    assert out["name"] == OUT_NAME and out["datatype"] == "FP32" and out["shape"] == OUT_SHAPE
    assert max(abs(a - b) for a, b in zip(out["data"], want.ravel())) <= TOL
    header = json.dumps({"inputs": [{"name": IN_NAME, "datatype": "FP32", "shape": IN_SHAPE,
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": OUT_NAME, "parameters": {"binary_data": True}}]}).encode()
    st, h, body = post_raw("/v2/models/%s/versions/1/infer" % MODEL, header + x.astype("<f4").tobytes(),
                           {"Inference-Header-Content-Length": str(len(header))})
    assert st == 200 and h["content-type"] == "application/octet-stream", (st, h, body[:300])
    n = int(h["inference-header-content-length"])
    doc = json.loads(body[:n])
    assert doc["outputs"][0]["parameters"]["binary_data_size"] == 40 and len(body) == n + 40, (doc, len(body))
    got = np.frombuffer(body[n:], dtype="<f4")
    assert float(np.max(np.abs(got - want.ravel()))) <= TOL


def test_bad_requests_name_the_tensor():
    path = "/v2/models/%s/infer" % MODEL
    good = flat_input()
    raw_error(path, b"{\"inputs\": [", 400, "JSON")
    raw_error(path, {"inputs": []}, 400, IN_NAME, "has none")
    raw_error(path, {"inputs": [good, good]}, 400, IN_NAME, "twice")
    raw_error(path, {"inputs": [good, dict(good, name="pixels")]}, 400, "'pixels'", IN_NAME)
    raw_error(path, {"inputs": [dict(good, datatype="FP64")]}, 400, IN_NAME, "FP64", "FP32")
    raw_error(path, {"inputs": [dict(good, shape=[1, 28, 28])]}, 400, IN_NAME, "[1,28,28]", "[1,1,28,28]")
    raw_error(path, {"inputs": [dict(good, data=good["data"][:-1])]}, 400, IN_NAME, "783", "784")
    raw_error(path, {"inputs": [dict(good, data=["a"] * 784)]}, 400, IN_NAME, "not a number")
    raw_error(path, {"inputs": [good], "outputs": [{"name": "logits"}]}, 400, "'logits'", OUT_NAME)
    raw_error("/v2/models/no-such-model/infer", {"inputs": [good]}, 404, "no-such-model")
    raw_error("/v2/models/%s/versions/3/infer" % MODEL, {"inputs": [good]}, 404, "version '3'")
    # the binary extension
    x = golden_input().astype("<f4").tobytes()
    bin_in = {"name": IN_NAME, "datatype": "FP32", "shape": IN_SHAPE, "parameters": {"binary_data_size": len(x)}}
    header = json.dumps({"inputs": [bin_in]}).encode()
    hl = {"Inference-Header-Content-Length": str(len(header))}
    raw_error(path, header + x[:-4], 400, IN_NAME, "bytes", headers=hl)
    raw_error(path, header + x + b"\0\0\0\0", 400, "follow the JSON header", headers=hl)
    raw_error(path, header + x, 400, "Inference-Header-Content-Length",
              headers={"Inference-Header-Content-Length": str(len(header) + len(x) + 1)})
    wrong = json.dumps({"inputs": [dict(bin_in, parameters={"binary_data_size": 100})]}).encode()
    raw_error(path, wrong + x[:100], 400, IN_NAME, "binary_data_size 100", "3136",
              headers={"Inference-Header-Content-Length": str(len(wrong))})
    # and through tritonclient: the error reaches the client as raised
    bad = httpclient.InferInput(IN_NAME, [1, 28, 28], "FP32")
    bad.set_data_from_numpy(np.zeros((1, 28, 28), np.float32))
    expect_error(lambda: client().infer(MODEL, [bad]), 400, IN_NAME, "[1,1,28,28]")


def test_deadlines():
    x = golden_input()
    before = metrics()
    late0 = metric(before, "hearth_frame_late_total")
    frames0 = metric(before, "hearth_frames_total")
    # 1 us: no frame can make it; answered late, not run
    e = expect_error(lambda: infer(x, timeout=1), 504, "deadline", "1 us")
    assert MODEL in e.message()
    # a generous deadline is met
    r = infer(x, timeout=5_000_000)
    assert float(np.max(np.abs(r.as_numpy(OUT_NAME) - golden_output()))) <= TOL
    after = metrics()
    assert metric(after, "hearth_frame_late_total") == late0 + 1
    assert metric(after, "hearth_frames_total") == frames0 + 1
    assert metric(after, "hearth_frame_misses_total") >= 0
    assert metric(after, "hearth_frame_failed_total") == 0
    assert "hearth_frame_latency_seconds_bucket{model=\"%s\",le=\"+Inf\"}" % MODEL in after
    assert metric(after, "hearth_frame_latency_seconds_count") >= frames0 + 1


def test_concurrent_clients_get_their_own_answers():
    base = golden_input()
    inputs = [base * (1 + k / 8.0) for k in range(8)]
    refs = [infer(x).as_numpy(OUT_NAME) for x in inputs]
    errors = []

    def worker(k):
        c = client()
        try:
            for i in range(15):
                j = (k + i) % len(inputs)
                got = infer(inputs[j], binary_in=bool(i % 2), binary_out=bool(i % 3), c=c).as_numpy(OUT_NAME)
                if not np.array_equal(got, refs[j]):
                    errors.append("client %d frame %d: input %d answered %s, want %s" % (k, i, j, got, refs[j]))
        except Exception as e:  # noqa: BLE001
            errors.append("client %d: %r" % (k, e))
    th = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors, errors[:5]


def offloaded(s):
    st, _, body = request(s.port, "GET", "/metrics")
    for line in body.decode().splitlines():
        if line.startswith("hearth_offloaded_requests_total "):
            return int(line.split()[1])
    raise AssertionError("hearth_offloaded_requests_total not in /metrics")


def test_binary_frames_stay_on_the_loop():
    """A frame in the binary tensor extension is parsed where it was received
    (its JSON header is all the handler parses; the 0.9 MB of floats are
    copied), so /metrics counts no hop to the handler pool for it; the same
    frame as JSON text (2+ MB parsed), a binary one whose JSON header is 16
    KiB or more, and one whose header length is not a number take the hop.
    Every answer is still right (scores against onnxruntime's golden)."""
    face = os.path.join(SHARED, "vision", "ultraface-rfb-320", "version-RFB-320.onnx")
    x = np.fromfile(os.path.join(GOLDEN, "ultraface-rfb-320.in.input.f32"), dtype="<f4")
    want = np.fromfile(os.path.join(GOLDEN, "ultraface-rfb-320.out.scores.f32"), dtype="<f4")
    shape = [1, 3, 240, 320]
    s = Server("--model", "face=" + face, "--log-level", "warn", timeout=60)
    try:
        path = "/v2/models/face/infer"

        def binary(pad=0, hl=None):
            head = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": shape,
                                           "parameters": {"binary_data_size": x.nbytes}}],
                               "outputs": [{"name": "scores", "parameters": {"binary_data": True}}]})
            head = (head + " " * pad).encode()
            hdr = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": hl if hl is not None else str(len(head))}
            return request(s.port, "POST", path, body=head + x.tobytes(), headers=hdr, timeout=30)

        def scores_ok(st, h, body):
            assert st == 200, (st, body[:300])
            n = int(h["inference-header-content-length"])
            got = np.frombuffer(body[n:], dtype="<f4")
            assert got.size == want.size and float(np.max(np.abs(got - want))) <= 1e-4

        before = offloaded(s)
        for _ in range(3):
            scores_ok(*binary())
        assert offloaded(s) == before, (before, offloaded(s))
        doc = json.dumps({"inputs": [{"name": "input", "datatype": "FP32", "shape": shape,
                                      "data": [float(v) for v in x]}],
                          "outputs": [{"name": "scores"}]}).encode()
        st, _, body = request(s.port, "POST", path, body=doc, headers={"Content-Type": "application/json"},
                              timeout=60)
        assert st == 200, body[:300]
        got = np.array(json.loads(body)["outputs"][0]["data"], dtype=np.float32)
        assert float(np.max(np.abs(got - want))) <= 1e-4
        assert offloaded(s) == before + 1, (before, offloaded(s))
        scores_ok(*binary(pad=20000))  # a 20 KB JSON header is parsed: the pool
        assert offloaded(s) == before + 2, (before, offloaded(s))
        st, _, body = binary(hl="12ab")
        assert st == 400 and b"Inference-Header-Content-Length" in body, (st, body[:300])
        assert offloaded(s) == before + 3, (before, offloaded(s))
    finally:
        s.stop()


def test_system_shared_memory():
    """Triton's system shared memory extension, as tritonclient drives it:
    regions registered and listed, a frame whose input and output live in
    regions (the answer carries no data) equal to the same frame sent in the
    body, the region's offset applied, every misuse a 400 naming what, and
    unregistering (one, all) as Triton does it."""
    import tritonclient.utils.shared_memory as shm
    c, x, want = client(), golden_input(), golden_output()
    in_bytes, out_bytes = x.nbytes, int(np.prod(OUT_SHAPE)) * 4
    key_in, key_out = "/hearth-test-in-%d" % os.getpid(), "/hearth-test-out-%d" % os.getpid()
    h_in = shm.create_shared_memory_region("in", key_in, 64 + in_bytes)
    h_out = shm.create_shared_memory_region("out", key_out, out_bytes)
    try:
        shm.set_shared_memory_region(h_in, [x.astype(np.float32)], offset=64)
        c.unregister_system_shared_memory()
        c.register_system_shared_memory("frame-in", key_in, in_bytes, offset=64)
        c.register_system_shared_memory("frame-out", key_out, out_bytes)
        st = c.get_system_shared_memory_status()
        assert sorted((r["name"], r["key"], int(r["offset"]), int(r["byte_size"])) for r in st) == sorted(
            [("frame-in", key_in, 64, in_bytes), ("frame-out", key_out, 0, out_bytes)]), st
        assert [r["name"] for r in c.get_system_shared_memory_status("frame-out")] == ["frame-out"]
        assert "system_shared_memory" in c.get_server_metadata()["extensions"]

        def shm_infer(in_region="frame-in", in_size=in_bytes, in_off=0, out_region="frame-out", out_size=out_bytes):
            inp = httpclient.InferInput(IN_NAME, IN_SHAPE, "FP32")
            inp.set_shared_memory(in_region, in_size, offset=in_off)
            out = httpclient.InferRequestedOutput(OUT_NAME)
            out.set_shared_memory(out_region, out_size)
            return c.infer(MODEL, [inp], outputs=[out])

        r = shm_infer()
        o = r.get_output(OUT_NAME)  # the data went to the region, not the body
        # name, datatype and shape only, as Triton answers it (perf_analyzer
        # fails on "parameters" without binary_data_size: test_perf_analyzer.py)
        assert o == {"name": OUT_NAME, "datatype": "FP32", "shape": OUT_SHAPE}, o
        got = shm.get_contents_as_numpy(h_out, np.float32, OUT_SHAPE)
        in_body = infer(x).as_numpy(OUT_NAME)
        assert np.array_equal(got, in_body), (got, in_body)  # the same bytes in, the same walk: bit-equal
        assert float(np.max(np.abs(got - want))) <= TOL
        # a new frame written into the region is read at the next request
        shm.set_shared_memory_region(h_in, [np.zeros(IN_SHAPE, np.float32)], offset=64)
        shm_infer()
        assert np.array_equal(shm.get_contents_as_numpy(h_out, np.float32, OUT_SHAPE),
                              infer(np.zeros(IN_SHAPE, np.float32)).as_numpy(OUT_NAME))

        expect_error(lambda: shm_infer(in_region="nope"), 400, "input 'Input3'", "'nope'")
        expect_error(lambda: shm_infer(in_size=in_bytes - 4), 400, "input 'Input3'", "shared_memory_byte_size")
        expect_error(lambda: shm_infer(in_off=8), 400, "past the end", "frame-in")
        expect_error(lambda: shm_infer(out_size=out_bytes - 4), 400, "output '%s'" % OUT_NAME)
        expect_error(lambda: c.register_system_shared_memory("frame-in", key_in, in_bytes), 400, "already in manager")
        expect_error(lambda: c.register_system_shared_memory("ghost", "/hearth-no-such-key", 16), 400,
                     "/hearth-no-such-key")
        expect_error(lambda: c.register_system_shared_memory("big", key_out, out_bytes + 1), 400, "fewer than")
        expect_error(lambda: c.get_system_shared_memory_status("ghost"), 400, "'ghost'")
        # malformed bodies and parameters, each a 400 naming what
        reg = "/v2/systemsharedmemory/region/r2/register"
        raw_error(reg, b"{\"key\":", 400, "register 'r2'", "JSON")
        raw_error(reg, {"byte_size": 16}, 400, "\"key\"")
        raw_error(reg, {"key": key_out, "byte_size": -4}, 400, "byte_size")
        raw_error(reg, {"key": key_out, "byte_size": 16, "offset": 1.5}, 400, "offset")
        raw_error("/v2/systemsharedmemory/region/a/b/register", {"key": key_out, "byte_size": 16}, 400, "without '/'")
        raw_error("/v2/systemsharedmemory/nothing", {}, 404, "/v2/systemsharedmemory/nothing")
        url = "/v2/models/%s/infer" % MODEL

        def shm_input(**params):
            return {"name": IN_NAME, "datatype": "FP32", "shape": IN_SHAPE, "parameters": params}
        raw_error(url, {"inputs": [shm_input(shared_memory_region=7, shared_memory_byte_size=in_bytes)]}, 400,
                  "shared_memory_region must be")
        raw_error(url, {"inputs": [shm_input(shared_memory_region="frame-in", shared_memory_byte_size="all")]}, 400,
                  "shared_memory_byte_size must be")
        raw_error(url, {"inputs": [shm_input(shared_memory_region="frame-in", shared_memory_byte_size=in_bytes,
                                             shared_memory_offset=-8)]}, 400, "shared_memory_offset must be")
        both = shm_input(shared_memory_region="frame-in", shared_memory_byte_size=in_bytes)
        both["data"] = [0.0] * (in_bytes // 4)
        raw_error(url, {"inputs": [both]}, 400, "also carries its data")
        assert np.array_equal(shm_infer().get_output(OUT_NAME)["shape"], OUT_SHAPE)  # still served after all that

        c.unregister_system_shared_memory("frame-in")
        assert [r["name"] for r in c.get_system_shared_memory_status()] == ["frame-out"]
        expect_error(lambda: shm_infer(), 400, "'frame-in'")
        c.unregister_system_shared_memory()
        assert c.get_system_shared_memory_status() == []
        assert np.array_equal(infer(x).as_numpy(OUT_NAME), in_body)  # the server goes on as before
        # regions belong to one process: under --workers they are refused with the reason
        with Server("--model", MODEL_PATH, "--log-level", "warn", "--workers", "2", timeout=60) as w:
            expect_error(lambda: client(w).register_system_shared_memory("w", key_out, out_bytes), 400, "--workers 2")
    finally:
        c.unregister_system_shared_memory()
        shm.destroy_shared_memory_region(h_in)
        shm.destroy_shared_memory_region(h_out)


def test_sequence_parameters_on_a_stateless_model():
    """mnist has no state: sequence parameters are taken and change nothing."""
    x = golden_input()
    for kw in ({"sequence_id": 7, "sequence_start": True}, {"sequence_id": 7}, {"sequence_id": "cam", "sequence_end": True}):
        r = infer(x, **kw)
        assert float(np.max(np.abs(r.as_numpy(OUT_NAME) - golden_output()))) <= TOL, kw


# ---- with a stateful model ----

def state_server():
    ensure_state_model()
    return Server("--model", STATE_MODEL, "--log-level", "warn", *STATE_ARGS, timeout=60)


def test_state_model_config():
    """A model with state says so in its config: Triton's sequence batching
    with the server's idle limit; its state tensors are not the client's."""
    with state_server() as s:
        c, name = client(s), state_name()
        cfg = c.get_model_config(name)
        idle = cfg["sequence_batching"]["max_sequence_idle_microseconds"]
        assert 0 < idle <= 300000, cfg  # HEARTH_STATE_ARGS: 300 ms or less
        m = c.get_model_metadata(name)
        assert [i["name"] for i in cfg["input"]] == [i["name"] for i in m["inputs"]], (cfg, m)


def state_io(c, name):
    m = c.get_model_metadata(name)
    i, o = m["inputs"][0], m["outputs"][0]
    return i, o


def state_infer(c, name, i, x, **kw):
    inp = httpclient.InferInput(i["name"], i["shape"], i["datatype"])
    inp.set_data_from_numpy(x, binary_data=True)
    return c.infer(name, [inp], **kw)


def state_name():
    return os.path.splitext(os.path.basename(STATE_MODEL))[0]


def test_state_sequences():
    """start, continue, restart, end, unknown id; the state carries between
    frames and is reset by a start; a sequence of 32 frames is bit-identical
    between two runs; interleaved sequences keep their own state."""
    with state_server() as s:
        c, name = client(s), state_name()
        i, o = state_io(c, name)
        rng = np.random.default_rng(18)
        frames = [rng.standard_normal(i["shape"]).astype(np.float32) for _ in range(32)]

        def run_seq(sid):
            outs = []
            for k, x in enumerate(frames):
                r = state_infer(c, name, i, x, sequence_id=sid, sequence_start=(k == 0), sequence_end=(k == len(frames) - 1))
                outs.append(r.as_numpy(o["name"]))
            return outs
        a, b = run_seq(1), run_seq(2)
        assert all(np.array_equal(p, q) for p, q in zip(a, b)), "a sequence of 32 frames differs between two runs"
        # the state carries: frame 1 again, mid-sequence, is not frame 1's answer
        first = state_infer(c, name, i, frames[0], sequence_id=3, sequence_start=True).as_numpy(o["name"])
        again = state_infer(c, name, i, frames[0], sequence_id=3).as_numpy(o["name"])
        assert np.array_equal(first, a[0]) and not np.array_equal(again, first), "the state did not carry"
        # a start on a live id restarts it from zeros
        restarted = state_infer(c, name, i, frames[0], sequence_id=3, sequence_start=True).as_numpy(o["name"])
        assert np.array_equal(restarted, a[0])
        state_infer(c, name, i, frames[1], sequence_id=3, sequence_end=True)
        expect_error(lambda: state_infer(c, name, i, frames[2], sequence_id=3), 400, "'3'", "ended")
        expect_error(lambda: state_infer(c, name, i, frames[0], sequence_id="never"), 400, "'never'", "never started")
        # interleaved: two sequences fed the same frames, alternating, answer alike
        for k, x in enumerate(frames[:8]):
            ra = state_infer(c, name, i, x, sequence_id="L", sequence_start=(k == 0)).as_numpy(o["name"])
            rb = state_infer(c, name, i, x, sequence_id="R", sequence_start=(k == 0)).as_numpy(o["name"])
            assert np.array_equal(ra, a[k]) and np.array_equal(rb, a[k]), k


def test_state_expiry():
    """A sequence idle past the server's limit (HEARTH_STATE_ARGS sets it to
    300 ms or less) is refused with a message saying it expired."""
    with state_server() as s:
        c, name = client(s), state_name()
        i, o = state_io(c, name)
        x = np.zeros(i["shape"], np.float32)
        state_infer(c, name, i, x, sequence_id=9, sequence_start=True)
        time.sleep(1.0)
        expect_error(lambda: state_infer(c, name, i, x, sequence_id=9), 400, "'9'", "expired after")
        metrics_text = request(s.port, "GET", "/metrics")[2].decode()
        assert 'hearth_frame_sequences_live{model="%s"} 0' % name in metrics_text


if __name__ == "__main__":
    tests = [test_health_and_metadata, test_model_config_and_statistics, test_infer_json_and_binary_match_the_golden,
             test_wire_format,
             test_bad_requests_name_the_tensor, test_deadlines, test_concurrent_clients_get_their_own_answers,
             test_sequence_parameters_on_a_stateless_model, test_system_shared_memory,
             test_binary_frames_stay_on_the_loop]
    tests += [test_state_sequences, test_state_expiry, test_state_model_config]
    try:
        run(tests)
    finally:
        for s in _server:
            s.stop()
