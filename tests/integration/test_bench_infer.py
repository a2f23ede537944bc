"""`hearth bench --api infer`, frames over the Open Inference Protocol
(KServe v2, as Triton serves it), against a small Python server that speaks
enough of it: GET /v1/models and /v2/models/{m}, POST /v2/models/{m}/infer
with binary or JSON tensors. Its answer times are known, so the paced run's
percentiles, a stall, deadline misses and late (504) frames are checked
exactly; so are the requests it sends (the frame's bytes, sequence and
timeout parameters) and the refusals (a frame file of the wrong size, an
unreachable server, sequences outside a closed loop)."""
import json
import os
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
sys.path.insert(0, os.path.dirname(__file__))
from hearth_test import BIN, free_port, run  # noqa: E402
from test_bench_tool import bench, quantile, read_request, slow_samples, within  # noqa: E402

SHAPE = [1, 3, 4, 5]
FRAME_BYTES = 4 * 60
OUTPUTS = (("scores", [1, 2]), ("boxes", [1, 4]))
META = {"name": "face", "versions": ["1"], "platform": "onnx",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": SHAPE}],
        "outputs": [{"name": n, "datatype": "FP32", "shape": s} for n, s in OUTPUTS]}


class _Handler(socketserver.StreamRequestHandler):
    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            r = read_request(self.rfile)
            if r is None:
                return
            method, path, headers, body = r
            status, extra, out = self.server.route(method, path, headers, body)
            head = "HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n" % (status, len(out), extra)
            self.connection.sendall(head.encode() + out)


class OipServer(socketserver.ThreadingTCPServer):
    """delay(i) -> seconds to wait before answering the i-th infer request
    (counted from 0 in arrival order), or ("status", code) to answer with
    that status at once; serial: one frame at a time (a later frame waits
    for the one before). Every infer request is kept in self.seen as
    (JSON header, frame bytes or the JSON data list)."""
    daemon_threads = True
    allow_reuse_address = True
    # the bench opens its connections (64 by default in an open loop) before
    # it starts: socketserver's backlog of 5 drops the rest's handshakes for 1 s
    request_queue_size = 128

    def __init__(self, delay=lambda i: 0.0, vision=True, answer_json=False, bad_answer=False, serial=False,
                 refuse_shm=False):
        self.refuse_shm = refuse_shm
        self.delay, self.vision, self.answer_json, self.bad_answer = delay, vision, answer_json, bad_answer
        self.seen, self.took, self.lock = [], [], threading.Lock()
        self.regions, self.unregistered = {}, []
        self.queue = threading.Lock() if serial else None
        super().__init__(("127.0.0.1", 0), _Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()
        return False

    def route(self, method, path, headers, body):
        js = "Content-Type: application/json\r\n"
        if method == "GET" and path == "/v1/models":
            data = [{"id": "emb", "object": "model", "meta": {"family": "embedding"}}]
            if self.vision:
                data.append({"id": "face", "object": "model", "meta": {"family": "vision"}})
            return 200, js, json.dumps({"object": "list", "data": data}).encode()
        if method == "GET" and path == "/v2/models/face":
            return 200, js, json.dumps(META).encode()
        if method == "POST" and path.startswith("/v2/systemsharedmemory/region/"):
            name, action = path.split("/")[4:6]
            if action == "register" and self.refuse_shm:
                return 400, js, b'{"error":"Unable to open shared memory region: no"}'
            if action == "register":  # map the client's object, as Triton does, before the client unlinks it
                import mmap
                doc = json.loads(body)
                fd = os.open("/dev/shm" + doc["key"], os.O_RDWR)
                self.regions[name] = (mmap.mmap(fd, doc["offset"] + doc["byte_size"]), doc)
                os.close(fd)
            else:
                self.unregistered.append(name)
            return 200, "", b""
        if method != "POST" or path != "/v2/models/face/infer":
            return 404, js, b'{"error":"not found"}'
        t0 = time.monotonic()
        try:
            hl = int(headers.get("inference-header-content-length", len(body)))
            req = json.loads(body[:hl])
            inp = req["inputs"][0]
            assert inp["name"] == "input" and inp["datatype"] == "FP32" and inp["shape"] == SHAPE, inp
            shm = inp.get("parameters", {}).get("shared_memory_region")
            if shm:
                p = inp["parameters"]
                assert p["shared_memory_byte_size"] == FRAME_BYTES and "data" not in inp and hl == len(body), inp
                mm = self.regions[shm][0]
                data = mm[p["shared_memory_offset"]:p["shared_memory_offset"] + FRAME_BYTES]
            elif hl < len(body):
                assert inp["parameters"]["binary_data_size"] == FRAME_BYTES == len(body) - hl, (inp, len(body))
                data = body[hl:]
            else:
                data = inp["data"]
                assert len(data) == 60, len(data)
        except (AssertionError, KeyError, ValueError) as e:
            return 400, js, json.dumps({"error": "bad request: %r" % e}).encode()
        with self.lock:
            i = len(self.seen)
            self.seen.append((req, data))
        d = self.delay(i)
        if isinstance(d, tuple):
            return d[1], js, b'{"error":"frame %d is late"}' % i
        if self.queue:
            with self.queue:
                time.sleep(d)
        else:
            time.sleep(d)
        outs = [(n, s, struct.pack("<%df" % (s[0] * s[1]), *range(s[0] * s[1]))) for n, s in OUTPUTS]
        with self.lock:
            self.took.append((time.monotonic() - t0) * 1e3)
        if self.answer_json:
            doc = {"model_name": "face", "outputs": [{"name": n, "datatype": "FP32", "shape": s,
                                                      "data": list(range(s[0] * s[1]))} for n, s, _ in outs]}
            return 200, js, json.dumps(doc).encode()
        hdr = json.dumps({"model_name": "face", "outputs": [
            {"name": n, "datatype": "FP32", "shape": s, "parameters": {"binary_data_size": len(b)}}
            for n, s, b in outs]}).encode()
        tail = b"".join(b for _, _, b in outs)
        if self.bad_answer:
            tail = tail[:-4]  # one float short of what the header says
        return 200, ("Content-Type: application/octet-stream\r\nInference-Header-Content-Length: %d\r\n"
                     % len(hdr)), hdr + tail


def frame_file():
    f = tempfile.NamedTemporaryFile(suffix=".f32", delete=False)
    f.write(struct.pack("<60f", *[i / 64.0 - 0.5 for i in range(60)]))
    f.close()
    return f.name


def test_fixed_delay_percentiles_and_the_request():
    frame = frame_file()
    # the deadline 10x the work: CI's sanitizer build on 2 busy cores once
    # answered a 20 ms frame in 56 ms, which a 50 ms deadline counted
    with OipServer(lambda i: 0.020) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--rate", "40", "--n", "160", "--deadline-ms", "200",
                           "--input", frame, "--warmup", "0.25")
    assert rc == 0 and j["errors"] == 0 and j["requests"] == 160 and j["misses"] == 0, out
    assert j["api"] == "infer" and j["mode"] == "open" and j["late"] == 0, out
    # no --model: the "vision" entry of /v1/models; the frame's bytes as the file has them
    req, data = srv.seen[0]
    assert data == open(frame, "rb").read(), data[:16]
    assert [o["name"] for o in req["outputs"]] == ["scores", "boxes"], req
    assert all(o["parameters"]["binary_data"] is True for o in req["outputs"]), req
    assert "parameters" not in req, req  # no timeout or sequence unless asked
    os.unlink(frame)
    # within 5% of the time the server itself took (sleep overshoots on a busy machine), and near 20 ms
    took = srv.took[len(srv.took) - 160:]
    lat = j["latency_ms"]
    assert within(lat["p50"], quantile(took, 0.5), 0.05), (lat, quantile(took, 0.5), out)
    assert 19.5 <= lat["p50"] <= 30, (lat, out)
    assert lat["p50"] <= lat["p99"] <= lat["max"], lat
    assert "misses 0 (> 200.0 ms)" in out, out


def test_a_stall_shows_in_the_paced_max():
    # frames run one at a time, as a frame queue runs them; frame 60 stalls
    # the queue for 1 s, and every frame scheduled meanwhile waits it out
    def stall(i):
        return 1.0 if i == 60 else 0.004
    with OipServer(stall, serial=True) as srv:
        rc, op, out_o = bench(srv.port, "--api", "infer", "--model", "face", "--rate", "50", "--n", "250",
                              "--deadline-ms", "100")
    assert rc == 0 and op["errors"] == 0 and op["requests"] == 250, out_o
    o = op["latency_ms"]
    assert o["max"] >= 950 and o["p99"] >= 700 and o["p50"] < 50, (o, out_o)
    slow = slow_samples(o, 100)
    # misses are exact (> 100 ms); the histogram's bucket holding 100 ms may count one more
    assert slow >= 40 and 0 <= slow - op["misses"] <= 1, (slow, op["misses"], out_o)
    # closed loop, one frame at a time: the stall is one slow sample, hidden below the max
    with OipServer(stall, serial=True) as srv:
        rc, cl, out_c = bench(srv.port, "--api", "infer", "--model", "face", "--n", "250", "--deadline-ms", "500")
    c = cl["latency_ms"]
    assert rc == 0 and c["max"] >= 950 and cl["misses"] == 1 and c["p99"] < 200, (c, out_c)


def test_deadline_misses_are_exact():
    # every 8th frame takes 400 ms against a 200 ms deadline, the rest 5 ms
    # (margins wide enough for a machine whose other cores are compiling:
    # 5 ms answers were seen taking up to 90 ms there)
    with OipServer(lambda i: 0.400 if i % 8 == 3 else 0.005) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--rate", "40", "--n", "80",
                           "--deadline-ms", "200", "--send-deadline")
    assert rc == 0 and j["errors"] == 0 and j["requests"] == 80, out
    assert j["misses"] == 10, (j["misses"], out)
    assert slow_samples(j["latency_ms"], 300) == 10, out
    assert srv.seen[0][0]["parameters"] == {"timeout": 200000}, srv.seen[0][0]


def test_late_frames_are_counted_apart():
    with OipServer(lambda i: ("status", 504) if i % 5 == 2 else ("status", 503) if i == 4 else 0.002) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--rate", "50", "--n", "50",
                           "--deadline-ms", "500")
    assert rc == 1, out  # frames went unanswered
    assert j["late"] == 10 and j["errors_by_kind"]["late"] == 10, out
    assert j["errors_by_kind"]["status"] == 1 and j["errors_by_status"] == {"503": 1}, out
    assert j["errors"] == 11 and j["requests"] == 39 and j["misses"] == 10, out
    assert "late 10" in out, out


def test_json_tensors_and_json_answers():
    frame = frame_file()
    with OipServer(answer_json=True) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "20", "--binary", "0",
                           "--input", frame)
    assert rc == 0 and j["errors"] == 0 and j["requests"] == 20 and j["mode"] == "closed", out
    req, data = srv.seen[0]
    assert data == list(struct.unpack("<60f", open(frame, "rb").read())), data[:4]
    assert all(o["parameters"]["binary_data"] is False for o in req["outputs"]), req
    os.unlink(frame)


def test_shared_memory_inputs():
    """--shm: the frame goes once into a shared memory object the server maps
    (registered, and unlinked by the client at once), each request names it
    instead of carrying the bytes, and the region is unregistered at the end."""
    frame = frame_file()
    with OipServer() as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--concurrency", "1", "--n", "20", "--input", frame, "--shm")
    assert rc == 0 and j["errors"] == 0 and j["requests"] == 20, out
    assert len(srv.regions) == 1, srv.regions
    name, (_, doc) = next(iter(srv.regions.items()))
    assert doc["offset"] == 0 and doc["byte_size"] >= FRAME_BYTES, doc
    assert not os.path.exists("/dev/shm" + doc["key"]), doc  # unlinked once registered
    req, data = srv.seen[-1]
    assert data == open(frame, "rb").read(), data[:16]
    assert req["inputs"][0]["parameters"]["shared_memory_region"] == name, req
    assert srv.unregistered == [name], srv.unregistered
    os.unlink(frame)


def test_random_frames_are_fixed():
    frames = []
    for _ in range(2):
        with OipServer() as srv:
            rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "3")
        assert rc == 0 and j["requests"] == 3, out
        frames.append(srv.seen[0][1])
    v = struct.unpack("<60f", frames[0])
    assert frames[0] == frames[1] and all(-1 <= x <= 1 for x in v) and len(set(v)) == 60, v


def test_sequences():
    with OipServer() as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "5", "--sequence-id", "42")
    assert rc == 0 and j["requests"] == 5, out
    params = [r["parameters"] for r, _ in srv.seen]
    assert [p["sequence_id"] for p in params] == [42] * 5, params
    assert [p["sequence_start"] for p in params] == [True, False, False, False, False], params
    assert [p["sequence_end"] for p in params] == [False, False, False, False, True], params
    with OipServer() as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "1", "--sequence-id", "cam-7")
    p = srv.seen[0][0]["parameters"]
    assert rc == 0 and p == {"sequence_id": "cam-7", "sequence_start": True, "sequence_end": True}, (p, out)


def test_bad_answers_and_no_vision_model():
    with OipServer(bad_answer=True) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "10")
    assert rc == 1 and j["errors_by_kind"]["bad_json"] == 10 and j["requests"] == 0, out
    with OipServer(vision=False) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--n", "10")
    assert rc == 1 and j is None and 'no model of family "vision"' in out and "--model" in out, out
    with OipServer() as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "nope", "--n", "10")
    assert rc == 1 and j is None and "/v2/models/nope: status 404" in out, out


def test_compare_counts_misses():
    # B's every 4th frame takes 300 ms against a 150 ms deadline (wide, for a busy machine's noise)
    with OipServer(lambda i: 0.005) as a, OipServer(lambda i: 0.300 if i % 4 == 0 else 0.005) as b:
        rc, j, out = bench(a.port, "--api", "infer", "--model", "face", "--rate", "40", "--n", "20", "--deadline-ms",
                           "150", "--compare", "http://127.0.0.1:%d" % b.port, "--rounds", "2")
    assert rc == 0 and j["errors"] == {"a": 0, "b": 0}, out
    assert j["median"]["a"]["misses"] == 0 and j["median"]["b"]["misses"] == 5, (j["median"], out)
    assert "misses 5" in out, out


def test_refusals():
    bad = tempfile.NamedTemporaryFile(suffix=".f32", delete=False)
    bad.write(b"\0" * (FRAME_BYTES - 4))
    bad.close()
    with OipServer() as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "10", "--input", bad.name)
    os.unlink(bad.name)
    assert rc == 1 and j is None and not srv.seen, out
    assert "236 bytes" in out and "takes 240 bytes" in out and "FP32 [1,3,4,5]" in out, out
    # unreachable: nothing listens, so the metadata cannot be read
    rc, j, out = bench(free_port(), "--api", "infer", "--model", "face", "--n", "10")
    assert rc == 1 and "connect" in out, out
    url = "http://127.0.0.1:9"
    for args in (["--sequence-id", "1", "--rate", "20", "--n", "10"], ["--sequence-id", "1", "--concurrency", "2",
                                                                       "--n", "10"],
                 ["--sequence-id", "1", "--duration", "1"], ["--send-deadline", "--n", "5"], ["--binary", "2"]):
        p = subprocess.run([BIN, "bench", url, "--api", "infer", *args], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and "hearth bench" in p.stderr, (args, p.returncode, p.stderr)
    for flag in (["--sequence-id", "1"], ["--shm"]):
        p = subprocess.run([BIN, "bench", url, "--api", "health", *flag], capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and "--api infer" in p.stderr, (flag, p.stderr)
    # a server that will not map the region: the bench stops before sending a frame, saying what it answered
    with OipServer(refuse_shm=True) as srv:
        rc, j, out = bench(srv.port, "--api", "infer", "--model", "face", "--n", "10", "--shm")
    assert rc == 1 and j is None and not srv.seen, out
    assert "register" in out and "Unable to open shared memory region" in out, out


if __name__ == "__main__":
    run([test_fixed_delay_percentiles_and_the_request, test_a_stall_shows_in_the_paced_max,
         test_deadline_misses_are_exact, test_late_frames_are_counted_apart, test_json_tensors_and_json_answers,
         test_shared_memory_inputs, test_random_frames_are_fixed, test_sequences, test_bad_answers_and_no_vision_model,
         test_compare_counts_misses, test_refusals])
