"""The Jinja interpreter (src/text/jinja.h) on real chat templates, against
jinja2 in Hugging Face transformers' environment, byte for byte.

The 17 templates of llama.cpp's models/templates/*.jinja (Qwen2.5, Llama
3.1/3.2/3.3, Hermes 2/3, Mistral Nemo, command-r, DeepSeek R1, functionary,
firefunction, gemma-2, Phi-3.5, ...) are read from
$HEARTH_SHARED/peers/llama.cpp-c392e50.tar.xz into a temporary folder (never
into the repository). Each is rendered for several conversations (user only;
system + user; multi-turn; assistant tool calls and tool results; tools
offered; with and without the generation prompt; non-ASCII; BOS/EOS set; a
fixed date_string) by jinja2 here and by $HEARTH_BUILD/tests/text/test_jinja's
`render` driver, one ok / not ok line per (template, conversation). Where
jinja2 refuses a conversation (raise_exception), hearth must refuse it too,
with the same message.
"""
import json
import os
import subprocess
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("HEARTH_BUILD") or os.path.join(HERE, "..", "..", "build")
DRIVER = os.path.join(BUILD, "tests", "text", "test_jinja")
TARBALL = os.path.join(SHARED, "peers", "llama.cpp-c392e50.tar.xz")
PREFIX = "llama.cpp/models/templates/"

sys.path.insert(0, os.path.join(HERE, "..", "ref"))
try:
    from jinja_ref import Raised, TemplateError, make_env as jinja2_env  # noqa: E402
except ImportError:  # reported by the setup test below
    jinja2_env = None


WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city name"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "description": "Forecast days"}},
        "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "web_search", "description": "Search the web",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}

CALL = {"id": "call_0001", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

BASE = {"bos_token": "<s>", "eos_token": "</s>", "date_string": "26 Jul 2024"}

CONVERSATIONS = {
    "user_only": {"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True},
    "user_only_no_gen": {"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": False},
    "system_user": {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                 {"role": "user", "content": "What is 2+2?"}], "add_generation_prompt": True},
    "multi_turn": {"messages": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Hi there"},
                                {"role": "assistant", "content": "Hello! How can I help?"},
                                {"role": "user", "content": "Tell me a joke."}], "add_generation_prompt": True},
    "multi_turn_ends_assistant": {"messages": [{"role": "user", "content": "Hi"},
                                               {"role": "assistant", "content": "Hello!"}],
                                  "add_generation_prompt": False},
    "non_ascii": {"messages": [{"role": "user", "content": "Ünïcödé: 日本語, emoji 🎉, «quotes» and \"escapes\"\n\ttab"}],
                  "add_generation_prompt": True},
    "tools_offered": {"messages": [{"role": "system", "content": "You can call tools."},
                                   {"role": "user", "content": "Weather in Paris?"}],
                      "tools": [WEATHER, SEARCH], "add_generation_prompt": True},
    "tool_call_and_result": {"messages": [{"role": "user", "content": "Weather in Paris?"},
                                          {"role": "assistant", "content": "", "tool_calls": [CALL]},
                                          {"role": "tool", "name": "get_weather", "tool_call_id": "call_0001",
                                           "content": "{\"temperature\": 21, \"sky\": \"clear\"}"},
                                          {"role": "assistant", "content": "It is 21°C and clear."},
                                          {"role": "user", "content": "Thanks"}],
                             "tools": [WEATHER], "add_generation_prompt": True},
    "tool_call_pending": {"messages": [{"role": "system", "content": "Use tools when needed."},
                                       {"role": "user", "content": "Weather in Paris?"},
                                       {"role": "assistant", "content": None, "tool_calls": [CALL]},
                                       {"role": "tool", "name": "get_weather", "tool_call_id": "call_0001",
                                        "content": "21 degrees"}],
                          "tools": [WEATHER, SEARCH], "add_generation_prompt": True},
    "no_bos_eos": {"messages": [{"role": "user", "content": "Hello"}], "add_generation_prompt": True,
                   "bos_token": "", "eos_token": ""},
    "not_alternating": {"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}],
                        "add_generation_prompt": True},
}


def extract(dest):
    if not os.path.exists(TARBALL):
        raise AssertionError("llama.cpp's templates: %s is missing (set HEARTH_SHARED to the shared data folder)"
                             % TARBALL)
    names = []
    with tarfile.open(TARBALL, "r:xz") as tar:
        for m in tar:
            if m.isfile() and m.name.startswith(PREFIX) and m.name.endswith(".jinja"):
                data = tar.extractfile(m).read()
                name = os.path.basename(m.name)
                with open(os.path.join(dest, name), "wb") as f:
                    f.write(data)
                names.append(name)
    return sorted(names)


def reference(env, src, ctx):
    """(output, None) or (None, raise_exception's message or the error's type)."""
    try:
        return env.from_string(src).render(**ctx), None
    except Raised as e:
        return None, str(e)
    except (TemplateError, TypeError, ValueError, AttributeError) as e:
        return None, "%s: %s" % (type(e).__name__, e)


def make_test(env, tmpdir, tname, cname, conv):
    def t():
        ctx = dict(BASE)
        ctx.update(conv)
        tpath = os.path.join(tmpdir, tname)
        with open(tpath, encoding="utf-8") as f:
            src = f.read()
        want, refused = reference(env, src, ctx)
        cpath = os.path.join(tmpdir, "ctx-%s-%s.json" % (tname, cname))
        with open(cpath, "w", encoding="utf-8") as f:
            json.dump(ctx, f, ensure_ascii=False)
        p = subprocess.run([DRIVER, "render", tpath, cpath], capture_output=True, timeout=60)
        got, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace").strip()
        if refused is not None:
            assert p.returncode == 1, "jinja2 refused (%s) but hearth rendered (exit %d):\n%s" % (
                refused, p.returncode, got[:2000])
            if not refused.startswith(("TypeError", "ValueError", "AttributeError", "Undefined")):
                assert err.endswith(": " + refused), "raise_exception(%r), hearth said %r" % (refused, err)
            return
        assert p.returncode == 0, "hearth failed (exit %d): %s" % (p.returncode, err)
        if got != want:
            i = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            raise AssertionError("differs at byte %d:\n  hearth: %r\n  jinja2: %r" % (
                i, got[max(0, i - 80):i + 120], want[max(0, i - 80):i + 120]))
    t.__name__ = "%s/%s" % (tname[:-len(".jinja")], cname)
    return t


def main():
    if jinja2_env is None:
        print("not ok - setup: jinja2 is not importable (apt-get install python3-jinja2; scripts/deps.sh does)")
        sys.exit(1)
    if not os.path.exists(DRIVER):
        print("not ok - setup: %s is not built (make builds it)" % DRIVER)
        sys.exit(1)
    env = jinja2_env()
    with tempfile.TemporaryDirectory() as tmpdir:
        try:
            names = extract(tmpdir)
        except AssertionError as e:
            print("not ok - setup: %s" % e)
            sys.exit(1)
        if len(names) < 17:  # the c392e50 snapshot has 17
            print("not ok - setup: expected at least 17 templates in %s, found %d" % (TARBALL, len(names)))
            sys.exit(1)
        tests = [make_test(env, tmpdir, t, c, conv) for t in names for c, conv in CONVERSATIONS.items()]
        run(tests)


if __name__ == "__main__":
    main()
