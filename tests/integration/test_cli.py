"""The command line: --help for every command, flags read from HEARTH_*
environment variables, bad flags refused clearly, and `hearth doctor`."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, Server, free_port, request, run  # noqa: E402


def hearth(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=20, env=e)


def test_help_for_every_command():
    out = hearth("--help")
    assert out.returncode == 0 and "serve" in out.stdout and "doctor" in out.stdout, out.stdout
    for cmd in ("serve", "doctor"):
        out = hearth(cmd, "--help")
        assert out.returncode == 0 and out.stdout.startswith("usage: hearth " + cmd), out.stdout
    out = hearth("serve", "--help")
    for flag in ("--host", "--port", "--threads", "--io-threads", "--workers", "--spawn", "--max-body", "--header-timeout"):
        assert flag in out.stdout, flag
    assert "[HEARTH_PORT]" in out.stdout and "[HEARTH_MAX_BODY]" in out.stdout


def test_bad_flags_are_refused():
    for args, needle in ((["serve", "--nope"], "unknown option '--nope'"),
                         (["serve", "--port", "abc"], "invalid value 'abc'"),
                         (["serve", "--port", "70000"], "out of range"),
                         (["serve", "--max-body", "12Q"], "invalid value"),
                         (["serve", "--log-level", "loud"], "--log-level"),
                         (["serve", "--port"], "needs a value"),
                         (["serve", "--parallel", "0"], "--parallel"),
                         (["serve", "--decode-steps", "0"], "--decode-steps must be 1..16"),
                         (["serve", "--decode-steps", "17"], "--decode-steps must be 1..16"),
                         (["serve", "--frame-spin-us", "100001"], "--frame-spin-us must be 0 to 100000"),
                         (["serve", "--frame-spin-us", "-1"], "--frame-spin-us must be 0 to 100000"),
                         (["serve", "--frame-lead-us", "100001"], "--frame-lead-us must be 0 to 100000"),
                         (["serve", "--frame-lead-us", "-1"], "--frame-lead-us must be 0 to 100000"),
                         (["serve", "--cache-type", "q4_0"], "--cache-type q4_0: want f16 or f32"),
                         (["serve", "--max-client-batch", "0"], "--max-client-batch"),
                         (["serve", "--embed-engines", "-1"], "--embed-engines"),
                         (["serve", "--default-prompt", "q: ", "--default-prompt-name", "query"], "give one"),
                         (["serve", "--max-headers", "1000"], "--max-headers"),
                         (["serve", "--poller", "kqueue"], "--poller"),
                         (["serve", "--handler-threads", "-1"], "--handler-threads -1 is out of range"),
                         (["serve", "--pin-threads=perhaps"],
                          "--pin-threads: invalid value 'perhaps' (expected 1, true, yes, on, 0, false, no or off)"),
                         (["serve", "--repack=x"], "--repack: invalid value 'x'"),
                         (["bogus"], "unknown command")):
        out = hearth(*args)
        assert out.returncode == 2, (args, out.returncode, out.stderr)
        assert needle in out.stderr, (args, out.stderr)


def test_environment_variables_configure_serve():
    port = free_port()
    srv = Server(env={"HEARTH_PORT": str(port), "HEARTH_LOG_LEVEL": "debug"}, wait_ready=False)
    # the harness passes --port too: the command line wins over the environment
    srv.wait_health()
    srv.stop()
    # with no --port on the command line, HEARTH_PORT decides
    e = dict(os.environ, HEARTH_PORT=str(port), HEARTH_DEMO="0")
    p = subprocess.Popen([BIN, "serve"], env=e, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        import time
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if request(port, "GET", "/health")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("HEARTH_PORT=%d was not used" % port)
    finally:
        p.terminate()
        p.wait(10)
    assert p.returncode == 0


def test_doctor_json():
    out = hearth("doctor")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    cpu = doc["cpu"]
    assert cpu["logical_cores"] >= 1 and 1 <= cpu["physical_cores"] <= cpu["logical_cores"]
    assert isinstance(cpu["features"], list) and cpu["model"]
    with open("/proc/cpuinfo") as f:
        flags = next(l for l in f if l.startswith("flags")).split()
    # what doctor reports agrees with the kernel's view of this CPU
    assert ("avx2" in cpu["features"]) == ("avx2" in flags), (cpu["features"], "avx2")
    assert ("avx512f" in cpu["features"]) == ("avx512f" in flags)
    assert doc["poller"] in ("epoll", "poll")
    assert doc["memory"]["total_bytes"] > 0
    assert doc["limits"]["max_body_bytes"] == 16 << 20 and doc["limits"]["max_header_fields"] == 100
    assert doc["limits"]["handler_threads"] == 2 and doc["limits"]["offload_body_bytes"] == 16 << 10
    # no GPU on the machines this suite runs on: none listed, and the reason said
    assert doc["gpus"] == [] and doc["version"]
    assert doc["gpu_backend"]["why_none_usable"], doc["gpu_backend"]


def test_doctor_reports_the_kernels_chosen():
    # the AVX-512 kernels need F, BW, VL, DQ and VNNI: a CPU without VNNI (masked here)
    # runs the AVX2 ones, and doctor must say so rather than read avx512f alone
    full = json.loads(hearth("doctor").stdout)["cpu"]
    feats = set(full["features"])
    want = "avx512" if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"} <= feats else \
        "avx2" if {"avx2", "fma"} <= feats else "scalar"
    assert full["kernels_selected"] == want, (full["kernels_selected"], sorted(feats))
    no_vnni = json.loads(hearth("doctor", env={"HEARTH_CPU_DISABLE": "avx512_vnni"}).stdout)["cpu"]
    assert "avx512_vnni" not in no_vnni["features"], no_vnni["features"]
    assert no_vnni["kernels_selected"] == ("avx2" if {"avx2", "fma"} <= feats else "scalar"), no_vnni
    bare = json.loads(hearth("doctor", env={"HEARTH_CPU_DISABLE": "avx512f,avx2"}).stdout)["cpu"]
    assert bare["kernels_selected"] == "scalar", bare


if __name__ == "__main__":
    run([test_help_for_every_command, test_bad_flags_are_refused, test_environment_variables_configure_serve,
         test_doctor_json, test_doctor_reports_the_kernels_chosen])
