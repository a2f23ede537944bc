"""`hearth bench`, the load generator, against small Python servers whose
timing is known: fixed answer times read back as percentiles, a stall that
the open loop shows and the closed loop hides, SSE time to first token and
inter-token latency, and every kind of bad server counted as errors (exit
status 1, no crash). Last, runs against `hearth serve` itself: /health, and
the workload sizes (--sentences read back from the server's metrics,
--prompt-tokens from its usage.prompt_tokens)."""
import json
import os
import resource
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, Server, free_port, request, run, scratch_dir  # noqa: E402

BUILD = os.environ.get("HEARTH_BUILD") or os.path.join(os.path.dirname(__file__), "..", "..", "build")
DEMO_TOOL = os.path.join(BUILD, "tests", "models", "test_llama_demo_tool")
TMP = scratch_dir("hearth-bench-tool-")


def read_request(rfile):
    """One HTTP/1.1 request off a keep-alive connection: (method, path,
    headers with lower-case names, body), or None when the client closed."""
    line = rfile.readline()
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    headers = {}
    while True:
        h = rfile.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, v = h.decode("latin-1").split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return method, path, headers, rfile.read(int(headers.get("content-length", "0")))


class _Handler(socketserver.StreamRequestHandler):
    """One keep-alive connection: reads requests, lets the server's answer
    function write each response."""

    def handle(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            r = read_request(self.rfile)
            if r is None:
                return
            method, path, _, body = r
            if self.server.answer(self.connection, method, path, body) is False:
                return


class TestServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    # the bench opens its connections (64 by default in an open loop) before
    # it starts: socketserver's backlog of 5 drops the rest's handshakes for 1 s
    request_queue_size = 128

    def __init__(self, answer):
        self.answer = answer
        super().__init__(("127.0.0.1", 0), _Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()

    def handle_error(self, request, client_address):
        # the bench closes connections still streaming when its time is up
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()
        return False


def reply(sock, status=200, body=b'{"status":"ok"}', ctype="application/json"):
    sock.sendall(b"HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
                 % (status, ctype.encode(), len(body), body))


def bench(port, *args, timeout=60):
    """Runs hearth bench; returns (exit status, the --json figures or None, stdout+stderr)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "out.json")
        p = subprocess.run([BIN, "bench", "http://127.0.0.1:%d" % port, *args, "--json", path],
                           capture_output=True, text=True, timeout=timeout)
        out = p.stdout + p.stderr
        assert p.returncode in (0, 1), "hearth bench crashed or refused (status %d):\n%s" % (p.returncode, out)
        figures = json.load(open(path)) if os.path.exists(path) else None
        return p.returncode, figures, out


def slow_samples(hist, ms):
    return sum(n for upper, n in hist["buckets"] if upper > ms)


def within(value, want, frac):
    return abs(value - want) <= want * frac


def quantile(xs, q):
    """The sample at quantile q, as the bench's histogram ranks it."""
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, int(q * len(xs) + 0.999999) - 1))]


def test_fixed_time_percentiles():
    took = []

    def answer(sock, method, path, body):
        t0 = time.monotonic()
        time.sleep(0.020)
        reply(sock)
        took.append((time.monotonic() - t0) * 1e3)
    with TestServer(answer) as srv:
        rc, j, out = bench(srv.port, "--api", "health", "--concurrency", "4", "--duration", "3", "--warmup", "0.5")
    assert rc == 0 and j["errors"] == 0, out
    lat = j["latency_ms"]
    assert j["requests"] > 300, out
    # sleep() overshoots 20 ms by however busy the machine is: the bench's
    # median must sit within 5% of what the server itself measured, and near
    # 20 ms. p90 gets 15%: with a compiler on both cores the Python server's
    # threads wait for the GIL before they read a request, time its own clock
    # misses (seen: 23.9 ms against its 20.5; on a quiet machine both 20.4-20.6)
    took = took[len(took) // 6:]  # about the warm-up's share
    for key, q, frac in (("p50", 0.5, 0.05), ("p90", 0.9, 0.15)):
        assert within(lat[key], quantile(took, q), frac), (key, lat, quantile(took, q), out)
        assert 19.5 <= lat[key] <= 30, (key, lat, out)
    assert lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"], lat
    assert within(j["rps"], 4 / (lat["mean"] / 1e3), 0.05), out


def stalling_server(stall_after=1.5, stall_s=1.0, answer_s=0.005):
    """Answers in answer_s; the first request after stall_after seconds
    freezes the whole server for stall_s (every request waits it out)."""
    state = {"t0": None, "until": 0.0, "done": False}
    lock = threading.Lock()

    def answer(sock, method, path, body):
        now = time.monotonic()
        with lock:
            if state["t0"] is None:
                state["t0"] = now
            if not state["done"] and now - state["t0"] >= stall_after:
                state["done"] = True
                state["until"] = now + stall_s
            wait = state["until"] - now
        if wait > 0:
            time.sleep(wait)
        time.sleep(answer_s)
        reply(sock)
    return TestServer(answer)


def test_open_loop_shows_a_stall_the_closed_loop_hides():
    svg = tempfile.NamedTemporaryFile(suffix=".svg", delete=False).name
    with stalling_server() as srv:
        rc, op, out_o = bench(srv.port, "--api", "health", "--rate", "50", "--duration", "5", "--concurrency", "16",
                              "--deadline-ms", "100", "--svg", svg)
    assert rc == 0 and op["errors"] == 0, out_o
    import xml.dom.minidom
    doc = xml.dom.minidom.parse(svg)  # well-formed, with the percentile curve, the mean and the max lines
    os.unlink(svg)
    assert len(doc.getElementsByTagName("polyline")) == 3, doc.toxml()[:500]
    with stalling_server() as srv:
        rc, cl, out_c = bench(srv.port, "--api", "health", "--concurrency", "1", "--duration", "5")
    assert rc == 0 and cl["errors"] == 0, out_c
    o, c = op["latency_ms"], cl["latency_ms"]
    # paced: every request scheduled during the stall waits for its end, so
    # about 50 of 250 samples are slow, spread from 1 s down to 0
    assert 230 <= op["requests"] <= 260, out_o
    assert o["max"] >= 950 and o["p99"] >= 700 and o["p90"] >= 200, (o, out_o)
    slow_open = slow_samples(o, 100)
    # misses are exact (> 100 ms); the histogram's bucket holding 100 ms may count one more
    assert slow_open >= 35 and 0 <= slow_open - op["misses"] <= 1, (slow_open, op["misses"], out_o)
    # closed: the one connection waits with the server, so the stall is a
    # single sample and the percentiles below max never see it
    slow_closed = slow_samples(c, 100)
    assert c["max"] >= 950 and slow_closed == 1 and c["p99"] < 50, (c, out_c)
    assert slow_open >= 30 * slow_closed, (slow_open, slow_closed)


def sse_server(ttft_s=0.050, itl_s=0.020, tokens=10, seen=None, took=None, prompt_tokens=None):
    """Streams tokens events; took (if given) gets the delays the server
    really kept: ("ttft", ms) and ("itl", ms) pairs."""
    def answer(sock, method, path, body):
        if path == "/v1/models":
            reply(sock, body=b'{"object":"list","data":[{"id":"test-model","object":"model"}]}')
            return
        if seen is not None:
            seen.append(json.loads(body))
        t0 = time.monotonic()
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        time.sleep(ttft_s)
        for i in range(tokens):
            if i:
                time.sleep(itl_s)
            ev = b'data: {"choices":[{"index":0,"delta":{"content":"t%d"}}]}\n\n' % i
            sock.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
            t1 = time.monotonic()
            if took is not None:
                took.append(("itl" if i else "ttft", (t1 - t0) * 1e3))
            t0 = t1
        usage = b'"completion_tokens":%d' % tokens
        if prompt_tokens is not None:
            usage += b',"prompt_tokens":%d' % prompt_tokens
        done = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],' \
               b'"usage":{%s}}\n\ndata: [DONE]\n\n' % usage
        sock.sendall(b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done))
    return TestServer(answer)


def test_sse_ttft_and_itl():
    seen, took = [], []
    with sse_server(seen=seen, took=took) as srv:
        rc, j, out = bench(srv.port, "--api", "chat", "--concurrency", "2", "--duration", "2", "--max-tokens", "10")
    assert rc == 0 and j["errors"] == 0 and j["requests"] >= 10, out
    assert seen and seen[0]["model"] == "test-model" and seen[0]["stream"] is True, seen[:1]
    assert seen[0]["max_tokens"] == 10 and seen[0]["messages"][0]["role"] == "user", seen[0]
    # within 5% of the delays the server really kept (sleep overshoots on a
    # busy machine), and near the nominal 50 and 20 ms. TTFT's p90 is checked
    # from below only (no less than 95% of the server's), with the nominal
    # bound above: the server's clock starts once its Python thread has read
    # the request, the bench's when it sent it, and on a busy machine the
    # thread waits for the GIL in between, so the bench's TTFT is the
    # server's plus a wait that only grows, and p90 of 16 samples is the
    # second slowest (CI saw 54.9 ms against the server's 52.1, and 58.6
    # against 50.4, its p50 within 5% both times); gaps between events are
    # timed alike on both sides.
    for name, nominal in (("ttft", 50.0), ("itl", 20.0)):
        kept = [ms for n, ms in took if n == name]
        for key, q in (("p50", 0.5), ("p90", 0.9)):
            got, want = j[name + "_ms"][key], quantile(kept, q)
            if (name, key) == ("ttft", "p90"):
                assert got >= want * 0.95, (name, key, got, want, out)
            else:
                assert within(got, want, 0.05), (name, key, got, want, out)
            assert nominal * 0.98 <= got <= nominal * 1.5, (name, key, got, out)
    assert j["itl_ms"]["count"] == 9 * j["requests"] or j["itl_ms"]["count"] >= 9 * (j["requests"] - 2), out
    assert j["tokens"] == 10 * j["streams"], out
    # a stream decodes 9 gaps of about 20 ms: 50 tok/s, less when sleeps overshoot
    assert within(j["stream_tokens_per_s"], 1e3 / (sum(ms for n, ms in took if n == "itl") /
                                                   sum(1 for n, _ in took if n == "itl")), 0.05), out


def test_stream_errors_are_counted():
    def answer(sock, method, path, body):
        ev = b'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\n\n' \
             b'data: {"error":{"message":"out of memory","type":"server_error"}}\n\n'
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(ev), ev))
    with TestServer(answer) as srv:
        rc, j, out = bench(srv.port, "--api", "completion", "--model", "m", "--n", "10")
    assert rc == 1 and j["errors_by_kind"]["stream"] == 10 and j["requests"] == 0, out


def test_compare_two_servers():
    def fixed(ms):
        def answer(sock, method, path, body):
            time.sleep(ms / 1e3)
            reply(sock)
        return answer
    with TestServer(fixed(10)) as a, TestServer(fixed(20)) as b:
        rc, j, out = bench(a.port, "--api", "health", "--compare", "http://127.0.0.1:%d" % b.port, "--rounds", "2",
                           "--duration", "1", "--concurrency", "2")
    assert rc == 0 and j["errors"] == {"a": 0, "b": 0}, out
    assert len(j["per_round"]) == 4 and [r["arm"] for r in j["per_round"]] == ["a", "b", "a", "b"], j
    r = j["ratio_b_over_a"]
    assert 1.7 <= r["p50_ms"] <= 2.1 and 0.45 <= r["rps"] <= 0.6, (r, out)
    assert "B / A" in out and "round 2 B" in out, out


def test_compare_streams_shows_prompt_sizes():
    # two servers that count the same prompt as 12 and 18 tokens: the
    # comparison says so beside the tokens/s it compares
    with sse_server(ttft_s=0.01, itl_s=0.005, prompt_tokens=12) as a, \
            sse_server(ttft_s=0.01, itl_s=0.005, prompt_tokens=18) as b:
        rc, j, out = bench(a.port, "--api", "chat", "--compare", "http://127.0.0.1:%d" % b.port, "--rounds", "2",
                           "--n", "6", "--max-tokens", "10")
    assert rc == 0, out
    m = j["median"]
    assert m["a"]["prompt_tokens_mean"] == 12 and m["b"]["prompt_tokens_mean"] == 18, (m, out)
    assert abs(j["ratio_b_over_a"]["prompt_tokens_mean"] - 1.5) < 1e-9, j
    assert "prompt_tokens_mean" in out and "tokens_per_s" in out, out


def test_unreachable_port_is_an_error():
    port = free_port()  # nothing listens there
    rc, j, out = bench(port, "--api", "health", "--n", "20", "--concurrency", "2")
    assert rc == 1 and j["errors"] == 20 and j["errors_by_kind"]["connect"] == 20 and j["requests"] == 0, out
    assert "connect 20" in out, out


def test_bad_servers_are_counted():
    def cut(sock, method, path, body):
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"par")
        return False  # close mid-answer

    def storm(sock, method, path, body):
        reply(sock, 500, b'{"error":"boom"}')

    def not_json(sock, method, path, body):
        reply(sock, 200, b"<html>hello</html>", "text/html")

    def garbage(sock, method, path, body):
        sock.sendall(b"HELLO THERE\r\n\r\n")

    def silent(sock, method, path, body):
        time.sleep(2)
        return False

    for answer, kind, n in ((cut, "closed", 50), (storm, "status", 50), (not_json, "bad_json", 50),
                            (garbage, "protocol", 50), (silent, "timeout", 4)):
        with TestServer(answer) as srv:
            rc, j, out = bench(srv.port, "--api", "health", "--n", str(n), "--concurrency", "2", "--timeout-ms", "300")
        assert rc == 1, (kind, out)
        assert j["errors"] == n and j["errors_by_kind"][kind] == n and j["requests"] == 0, (kind, out)
        if kind == "status":
            assert j["errors_by_status"] == {"500": 50}, out
            assert "status 500: 50" in out, out


def test_against_hearth_serve():
    with Server() as srv:
        rc, j, out = bench(srv.port, "--api", "health", "--concurrency", "4", "--duration", "1")
    assert rc == 0 and j["errors"] == 0 and j["requests"] > 500, out
    assert 0 < j["latency_ms"]["p50"] <= j["latency_ms"]["p99"] <= j["latency_ms"]["max"], out


def test_connects_are_made_before_the_schedule():
    """An open loop opens its connections before its first scheduled request:
    with 900 of them made in the schedule's first gap the first request left
    38-49 ms late against a server answering in 0.2 ms (this machine, stop
    44's bench before the change)."""
    with Server() as srv:
        worst = []
        for _ in range(2):  # the better of two runs: one noisy neighbour cannot fail it
            rc, j, out = bench(srv.port, "--api", "health", "--rate", "10", "--n", "3", "--concurrency", "900")
            assert rc == 0 and j["errors"] == 0 and j["requests"] == 3, out
            worst.append(j["latency_ms"]["max"])
        assert min(worst) < 20, (worst, out)


def child_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_poll_keeps_the_thread_polling():
    """--poll: the bench's thread polls through the run instead of sleeping
    between requests (its own wake-ups out of the figures), and still keeps
    the schedule. At 50 req/s for 1 s against a server answering in 0.2 ms
    a sleeping bench uses a few ms of CPU, a polling one most of a core
    (bounds loose: CI runs two test streams on two cores)."""
    with Server() as srv:
        cpu = {}
        for poll in (False, True):
            c0 = child_cpu_s()
            rc, j, out = bench(srv.port, "--api", "health", "--rate", "50", "--duration", "1",
                               *(["--poll"] if poll else []))
            cpu[poll] = child_cpu_s() - c0
            assert rc == 0 and j["errors"] == 0 and 48 <= j["requests"] <= 52, out
            assert j["poll"] is poll and ("polling" in out) is poll, out
    assert cpu[False] < 0.2 and cpu[True] > 0.3, cpu


class BacklogOneServer(TestServer):
    request_queue_size = 1


def test_slow_handshakes_are_not_counted():
    """A server with a backlog of 1 drops most of 16 handshakes made at once,
    which complete on the SYN's resend a second later: the bench waits for
    them before its schedule, and its run still counts the whole --duration
    from there (hearth_loop_update_time: the end timer counted from before
    the connects ended this run a second early, 50 requests of 100)."""
    def answer(sock, method, path, body):
        reply(sock)
    with BacklogOneServer(answer) as srv:
        rc, j, out = bench(srv.port, "--api", "health", "--rate", "50", "--duration", "2", "--concurrency", "16")
    assert rc == 0 and j["errors"] == 0 and 95 <= j["requests"] <= 105, out


def embed_sequences(port):
    """hearth_embed_sequences_total from /metrics: the inputs the server embedded."""
    st, _, body = request(port, "GET", "/metrics")
    assert st == 200, st
    return sum(float(line.split()[-1]) for line in body.decode().splitlines()
               if line.startswith("hearth_embed_sequences_total"))


def test_sentences_reach_hearth_serve():
    """--sentences N: the server embeds N inputs per request, under both APIs."""
    with Server("--demo", "--demo-dir", os.path.join(TMP, "demo"), "--log-level", "warn", timeout=120) as srv:
        for api, n_sent, n_req in (("embeddings", 4, 10), ("tei", 3, 7), ("embeddings", 1, 5)):
            before = embed_sequences(srv.port)
            rc, j, out = bench(srv.port, "--api", api, "--sentences", str(n_sent), "--n", str(n_req))
            assert rc == 0 and j["errors"] == 0 and j["requests"] == n_req, out
            assert j["sentences"] == n_sent, j
            seen = embed_sequences(srv.port) - before
            assert seen == n_sent * n_req, (api, n_sent, n_req, seen, out)
            if api == "embeddings":  # OpenAI's answer has usage; TEI's has none
                assert j["usage_answers"] == n_req and j["prompt_tokens_mean"] > 0, j
            else:
                assert j["usage_answers"] == 0, j


def test_prompt_tokens_reach_hearth_serve():
    """--prompt-tokens N: the server counts about N prompt tokens. The model
    is the tiny random-weight llama with phi-3's vocabulary (32k SentencePiece
    tokens, where the prompt's words are one token each, as in real models;
    the serve demo's own vocabulary is mostly bytes)."""
    path = os.path.join(TMP, "phi3-tiny.gguf")
    r = subprocess.run([DEMO_TOOL, "write", path, "llama", "q8_0",
                        os.path.join(SHARED, "vocab", "ggml-vocab-phi-3.gguf")], capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    with Server("--model", path, "--log-level", "warn", timeout=120) as srv:
        for api, n, stream in (("completion", 40, True), ("completion", 200, False), ("chat", 120, True),
                               ("chat", 120, False)):
            rc, j, out = bench(srv.port, "--api", api, "--prompt-tokens", str(n), "--max-tokens", "2", "--n", "6",
                               *([] if stream else ["--no-stream"]))
            assert rc == 0 and j["errors"] == 0 and j["requests"] == 6, out
            assert j["prompt_tokens"] == n and j["max_tokens"] == 2 and j["usage_answers"] == 6, j
            got = j["prompt_tokens_mean"]
            # completion: the prompt alone; chat: plus the template's few tokens
            low, high = (n * 0.95, n * 1.05) if api == "completion" else (n, n + 20)
            assert low <= got <= high, (api, n, stream, got, out)


def test_bad_command_lines():
    for args in (["--api", "nope"], ["--rate", "-1"], ["--n", "5", "--duration", "2"], [],
                 ["--api", "chat", "--sentences", "4"], ["--api", "tei", "--prompt-tokens", "100"],
                 ["--api", "embeddings", "--sentences", "0"],
                 ["--api", "completion", "--prompt-tokens", "100", "--input", "/dev/null"]):
        p = subprocess.run([BIN, "bench", *(["http://127.0.0.1:9"] if args else []), *args],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 2 and "hearth bench" in p.stderr, (args, p.returncode, p.stderr)
    p = subprocess.run([BIN, "bench", "--help"], capture_output=True, text=True, timeout=10)
    assert p.returncode == 0 and "--rate" in p.stdout and "--concurrency" in p.stdout, p.stdout


if __name__ == "__main__":
    run([test_fixed_time_percentiles, test_open_loop_shows_a_stall_the_closed_loop_hides, test_sse_ttft_and_itl,
         test_stream_errors_are_counted, test_compare_two_servers, test_compare_streams_shows_prompt_sizes, test_unreachable_port_is_an_error, test_bad_servers_are_counted, test_against_hearth_serve,
         test_sentences_reach_hearth_serve, test_prompt_tokens_reach_hearth_serve, test_bad_command_lines])
