"""bench/serve.py: text generation served over HTTP, hearth against
llama-server, on one GGUF file, arms interleaved over rounds.

    /usr/bin/python3 bench/serve.py --model M.gguf --llama-server PATH [--rounds 3]
    python3 bench/serve.py --model M.gguf --llama-server PATH --gpu --parallel 64 --clients 64

Measures, per server (both get --parallel P, 8 by default, a context of 2,048
positions a sequence, and 2 threads; with --gpu, hearth runs --device cuda and
llama-server -ngl 99 -fa, as issue 21's served comparison asks):
  1. single: one streamed /completion of N tokens; decode tok/s.
  2. aggregate: 4 concurrent streams; total decode tok/s (goal: >= 2.5x single).
  3. second turn: a ~1,000-token history, then the same history plus a reply
     and a new question; time to first token of each (goal: turn 2 <= 10% of
     turn 1, which needs the prefix cache).
  4. load: --clients C (8) clients, each sending requests back to back for D
     seconds; aggregate generated tok/s and p99 time to first token.
Both servers are asked for the same prompts with temperature 0 and
cache_prompt true. Token counts come from each server's own
timings.predicted_n. Prints medians over rounds and the hearth/llama ratios.
"""
import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

WORDS = ("the a little girl named lily loved to play outside in park one day she saw big red ball wanted "
         "with it but was too high boy tom dog sun tree river house friends happy sad mom dad cat bird").split()


def text_of(n_words, seed):
    r = random.Random(seed)
    return " ".join(r.choice(WORDS) for _ in range(n_words))


def wait_up(port, proc, timeout=600):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit("server exited early (status %s)" % proc.returncode)
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("server on port %d not healthy in %ds" % (port, timeout))


def stream(port, prompt, n_predict):
    """One streamed /completion; returns (ttft_s, total_s, predicted_n)."""
    body = json.dumps({"prompt": prompt, "n_predict": n_predict, "temperature": 0, "stream": True,
                       "cache_prompt": True, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=600)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter()
    s.sendall(b"POST /completion HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
              b"Connection: close\r\n\r\n%s" % (len(body), body))
    f = s.makefile("rb")
    status = f.readline().split()
    if len(status) < 2 or status[1] != b"200":
        # an error answer (a prompt past a sequence's context, say) must not be timed as a token
        sys.exit("port %d answered %s: %s" % (port, b" ".join(status[1:]).decode(errors="replace"),
                                              f.read(400).decode(errors="replace")))
    ttft = None
    predicted = None
    for raw in f:
        line = raw.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        ev = json.loads(data)
        if ttft is None and ev.get("content"):
            ttft = time.perf_counter() - t0
        if ev.get("stop"):
            predicted = (ev.get("timings") or {}).get("predicted_n", ev.get("tokens_predicted"))
            break
    total = time.perf_counter() - t0
    s.close()
    return (ttft if ttft is not None else total), total, predicted or 0


def concurrent(port, prompts, n_predict):
    out = [None] * len(prompts)

    def run(i):
        out[i] = stream(port, prompts[i], n_predict)
    th = [threading.Thread(target=run, args=(i,)) for i in range(len(prompts))]
    t0 = time.perf_counter()
    for t in th:
        t.start()
    for t in th:
        t.join()
    return out, time.perf_counter() - t0


def load(port, clients, seconds, n_predict, seed):
    ttfts, tokens = [], [0]
    lock = threading.Lock()
    end = time.perf_counter() + seconds

    def client(k):
        i = 0
        while time.perf_counter() < end:
            ttft, _, n = stream(port, text_of(48, seed * 1000 + k * 100 + i), n_predict)
            with lock:
                ttfts.append(ttft)
                tokens[0] += n
            i += 1
    t0 = time.perf_counter()
    th = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    wall = time.perf_counter() - t0
    ttfts.sort()
    p99 = ttfts[min(len(ttfts) - 1, int(len(ttfts) * 0.99))] if ttfts else float("nan")
    return tokens[0] / wall, p99, len(ttfts)


def measure(port, args, rnd):
    r = {}
    _, total, n = stream(port, text_of(16, rnd), args.n)
    r["single_tok_s"] = n / total
    res, wall = concurrent(port, [text_of(16, rnd * 10 + i) for i in range(4)], args.n)
    r["agg4_tok_s"] = sum(x[2] for x in res) / wall
    history = text_of(700, rnd + 99)  # ~1,000 tokens
    t1, _, _ = stream(port, history, 16)
    follow = history + " and then " + text_of(20, rnd + 7)
    t2, _, _ = stream(port, follow, 16)
    r["turn1_ttft_ms"] = t1 * 1000
    r["turn2_ttft_ms"] = t2 * 1000
    tps, p99, nreq = load(port, args.clients, args.duration, args.n // 2, rnd)
    r["load%d_tok_s" % args.clients] = tps
    r["load%d_ttft_p99_ms" % args.clients] = p99 * 1000
    r["load%d_requests" % args.clients] = nreq
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-server", default=os.environ.get("LLAMA_SERVER"))
    ap.add_argument("--hearth", default=os.environ.get("HEARTH_BIN", "build/hearth"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--n", type=int, default=96, help="tokens per request")
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--parallel", type=int, default=8, help="sequences decoded together, both servers")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients of the load phase")
    ap.add_argument("--gpu", action="store_true", help="hearth --device cuda, llama-server -ngl 99 -fa")
    args = ap.parse_args()
    if not args.llama_server:
        sys.exit("give --llama-server PATH (or LLAMA_SERVER)")
    hp, lp = 18521, 18522
    par, ctx = str(args.parallel), str(2048 * args.parallel)  # -c: all sequences together, on both
    servers = {
        "hearth": subprocess.Popen([args.hearth, "serve", "--model", args.model, "--port", str(hp), "--parallel", par,
                                    "--cache-slots", par, "--ctx-size", ctx, "--compute-threads", "2", "--log-level", "warn"]
                                   + (["--device", "cuda"] if args.gpu else []),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        "llama": subprocess.Popen([args.llama_server, "-m", args.model, "--port", str(lp), "--parallel", par, "-c", ctx,
                                   "-t", "2", "-tb", "2", "--log-disable"] + (["-ngl", "99", "-fa"] if args.gpu else []),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    }
    ports = {"hearth": hp, "llama": lp}
    try:
        for name, p in servers.items():
            wait_up(ports[name], p)
        for name in servers:  # warm-up
            stream(ports[name], text_of(16, 0), 16)
        results = {"hearth": [], "llama": []}
        for rnd in range(1, args.rounds + 1):
            order = ["hearth", "llama"] if rnd % 2 else ["llama", "hearth"]
            for name in order:
                r = measure(ports[name], args, rnd)
                results[name].append(r)
                print("round %d %-6s %s" % (rnd, name, " ".join("%s=%.1f" % kv for kv in r.items())), flush=True)
        keys = list(results["hearth"][0].keys())
        med = {n: {k: statistics.median(r[k] for r in results[n]) for k in keys} for n in results}
        print("\n# medians over %d rounds (model %s%s, --parallel %d, n=%d tokens per request, %d-client load for %.0fs)"
              % (args.rounds, os.path.basename(args.model), " on the GPU" if args.gpu else "", args.parallel, args.n,
                 args.clients, args.duration))
        print("%-20s %12s %12s %8s" % ("metric", "hearth", "llama", "ratio"))
        for k in keys:
            print("%-20s %12.1f %12.1f %7.2fx" % (k, med["hearth"][k], med["llama"][k], med["hearth"][k] / med["llama"][k]))
        for n in results:
            m = med[n]
            print("%s: aggregate(4)/single %.2fx (goal >= 2.5x); turn-2/turn-1 TTFT %.1f%% (goal <= 10%%)"
                  % (n, m["agg4_tok_s"] / m["single_tok_s"], 100 * m["turn2_ttft_ms"] / m["turn1_ttft_ms"]))
    finally:
        for p in servers.values():
            p.terminate()
            p.wait(30)


if __name__ == "__main__":
    main()
