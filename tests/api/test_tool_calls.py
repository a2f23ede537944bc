"""OpenAI function calling on hearth's chat endpoints, and llama-server's
--chat-template-file that llama.cpp's test_tool_call.py starts its servers with
(issue 20).

stories260K's free text is noise, so what is checked here is structure: a
forced call ("required" or a named tool) has exactly the shape OpenAI's clients
parse, with arguments valid for the tool's schema; "none" and an empty list
give no call; bad tools are 400s naming the field. The parser of model output
is tested on canned outputs in tests/unit/api/test_tool_calls.c. References:
OpenAI's chat completions reference (tools, tool_choice, message.tool_calls,
finish_reason "tool_calls", delta.tool_calls in a stream) and llama.cpp's
test_tool_call.py at c392e50 (read, never copied) for what llama-server answers.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, Server, post, post_json, run, scratch_dir, sse_events  # noqa: E402

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
TMP = scratch_dir("hearth-tools-")

# Jinja templates reduced to the markers hearth recognises a family by (the
# real ones are long; what hearth reads in them is the same)
TEMPLATES = {
    "llama3": "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
              "{{ m.content }}<|eot_id|>{% endfor %}<|start_header_id|>ipython<|end_header_id|>",
    "gemma": "{% for m in messages %}<start_of_turn>{{ m.role }}\n{{ m.content }}<end_of_turn>\n{% endfor %}",
    "chatml": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if tools %}<tools></tools><tool_call>{% endif %}",
}


def template_file(family):
    path = os.path.join(TMP, family + ".jinja")
    with open(path, "w") as f:
        f.write(TEMPLATES[family])
    return path


def test_chat_template_file_names_a_family():
    """--chat-template-file without --jinja: the family is recognised and rendered (what
    /apply-template shows), and a file hearth cannot map to a family is refused at start,
    naming it. (With --jinja the file itself runs: tests/api/test_chat_jinja.py.)"""
    with Server("--model", STORIES, "--chat-template-file", template_file("gemma"), "--log-level", "info",
                timeout=120) as s:
        st, doc = post_json(s.port, "/apply-template", {"messages": [{"role": "user", "content": "hi"}]})
        assert st == 200 and doc["prompt"] == "<s><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", doc
        assert "rendered as the gemma family" in s.log, s.log
    bad = os.path.join(TMP, "bad.jinja")
    with open(bad, "w") as f:
        f.write("{{ messages[0].content }} -- no markers of any family")
    env = dict(os.environ, HEARTH_DEMO="0")
    for args, want in ((["--chat-template-file", bad], bad),
                       (["--chat-template-file", os.path.join(TMP, "absent.jinja")], "absent.jinja"),
                       (["--chat-template", "chatml", "--chat-template-file", template_file("llama3")], "give one")):
        r = subprocess.run([BIN, "serve", "--model", STORIES, "--port", "0", *args], capture_output=True, text=True,
                           timeout=60, env=env)
        assert r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr)


TEST_TOOL = {"type": "function", "function": {"name": "test", "description": "", "parameters": {
    "type": "object", "properties": {"success": {"type": "boolean", "const": True}}, "required": ["success"]}}}
PYTHON_TOOL = {"type": "function", "function": {"name": "python", "description": "Runs code.", "parameters": {
    "type": "object", "properties": {"code": {"type": "string", "maxLength": 40}}, "required": ["code"]}}}
CODING = [{"role": "system", "content": "You are a coding assistant."}, {"role": "user", "content": "Write an example"}]
GREEDY = {"temperature": 0.0, "top_k": 1, "top_p": 1.0}

_servers = {}


def srv(family):
    """A server whose template is family's (from --chat-template-file), started once."""
    if family not in _servers:
        _servers[family] = Server("--model", STORIES, "--chat-template-file", template_file(family),
                                  "--log-level", "warn", timeout=120)
    return _servers[family]


def check_call(doc, name):
    """doc's one choice is exactly one call of name, as OpenAI's clients parse it; returns its arguments."""
    choice = doc["choices"][0]
    msg = choice["message"]
    assert choice["finish_reason"] == "tool_calls" and msg["role"] == "assistant" and msg["content"] is None, doc
    calls = msg["tool_calls"]
    assert len(calls) == 1 and set(calls[0]) == {"id", "type", "function"}, calls
    assert calls[0]["id"].startswith("call_") and calls[0]["type"] == "function", calls
    assert calls[0]["function"]["name"] == name and isinstance(calls[0]["function"]["arguments"], str), calls
    return json.loads(calls[0]["function"]["arguments"])


def test_required_call_has_openai_shape():
    """tool_choice "required" (llama.cpp's test_completion_with_required_tool_tiny): one call of the
    tool, arguments a JSON string that its schema allows, content null, finish_reason
    "tool_calls", in each family's format (llama3 and chatml native, gemma generic)."""
    for family in ("llama3", "chatml", "gemma"):
        port = srv(family).port
        for tool, key in ((TEST_TOOL, "success"), (PYTHON_TOOL, "code")):
            for path in ("/v1/chat/completions", "/chat/completions"):
                body = dict(GREEDY, messages=CODING, tools=[tool], tool_choice="required", max_tokens=512,
                            parallel_tool_calls=False)
                st, doc = post_json(port, path, body)
                assert st == 200, (family, doc)
                args = check_call(doc, tool["function"]["name"])
                assert list(args) == [key], (family, args)
                if key == "success":
                    assert args["success"] is True, args
                else:
                    assert isinstance(args["code"], str) and len(args["code"]) <= 40, args


def test_named_tool_is_the_one_called():
    """tool_choice {"type": "function", "function": {"name": ...}}: that tool, among several."""
    port = srv("chatml").port
    for name in ("test", "python"):
        st, doc = post_json(port, "/v1/chat/completions", dict(
            GREEDY, messages=CODING, tools=[TEST_TOOL, PYTHON_TOOL], max_tokens=256,
            tool_choice={"type": "function", "function": {"name": name}}))
        assert st == 200, doc
        check_call(doc, name)


def test_no_call_without_tools_or_with_none():
    """tools [] (sent as null), tools with tool_choice absent on a model that writes text, and
    "none": no tool_calls (llama.cpp's test_completion_without_tool_call); "none" does not
    even offer the tools (the prompt /apply-template shows has none)."""
    port = srv("llama3").port
    for tools, choice in ((None, None), ([TEST_TOOL], None), ([PYTHON_TOOL], "none")):
        st, doc = post_json(port, "/chat/completions", dict(
            GREEDY, messages=[CODING[0], {"role": "user", "content": "say hello world with python"}],
            tools=tools, tool_choice=choice, max_tokens=128))
        assert st == 200, doc
        msg = doc["choices"][0]["message"]
        assert msg.get("tool_calls") is None and isinstance(msg["content"], str), doc
        assert doc["choices"][0]["finish_reason"] in ("stop", "length"), doc
    st, doc = post_json(port, "/apply-template", {"messages": CODING, "tools": [PYTHON_TOOL], "tool_choice": "none"})
    assert st == 200 and "python" not in doc["prompt"] and "Environment: ipython" not in doc["prompt"], doc
    st, doc = post_json(port, "/apply-template", {"messages": CODING, "tools": [PYTHON_TOOL]})
    assert st == 200 and "Environment: ipython" in doc["prompt"] and '"name": "python"' in doc["prompt"], doc


def test_bad_tools_are_400s_naming_the_field():
    port = srv("chatml").port
    cases = [
        ({"tools": {"type": "function"}}, "'tools' must be a list"),
        ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
        ({"tools": [{"type": "function", "function": {"name": "has space"}}]}, "tools[0].function.name"),
        ({"tools": [TEST_TOOL, {"type": "function", "function": {"name": "f", "parameters": "x"}}]},
         "tools[1].function.parameters"),
        ({"tools": [TEST_TOOL], "tool_choice": "always"}, "tool_choice"),
        ({"tools": [TEST_TOOL], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "'nope'"),
        ({"tool_choice": "required"}, "needs 'tools'"),
        ({"tools": [TEST_TOOL], "tool_choice": "required", "response_format": {"type": "json_object"}}, "cannot be combined"),
        ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string", "pattern": "a"}}}],
          "tool_choice": "required"}, "tools[0].function.parameters"),
        ({"messages": CODING + [{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{oops"}}]}]},
         "messages[2].tool_calls[0].function.arguments"),
    ]
    for extra, want in cases:
        body = dict({"messages": CODING, "max_tokens": 4}, **extra)
        st, doc = post_json(port, "/v1/chat/completions", body)
        assert st == 400 and want in doc["error"]["message"], (extra, st, doc)


def test_streamed_call_as_openai_deltas():
    """Streamed, a call comes as OpenAI's delta.tool_calls (index, id, type, function name and
    arguments), then finish_reason "tool_calls" and [DONE]; a stream with tools that turns out
    to be text streams as content."""
    for family in ("llama3", "chatml", "gemma"):
        st, h, out = post(srv(family).port, "/v1/chat/completions", dict(
            GREEDY, messages=CODING, tools=[TEST_TOOL], tool_choice="required", max_tokens=256, stream=True))
        events = sse_events(out)
        assert st == 200 and events[-1] == "[DONE]", (family, out[-400:])
        chunks = events[:-1]
        calls = [c for ev in chunks for c in ev["choices"][0]["delta"].get("tool_calls", [])]
        assert len(calls) == 1 and calls[0]["index"] == 0 and calls[0]["id"].startswith("call_"), (family, chunks)
        assert calls[0]["function"]["name"] == "test", calls
        assert json.loads(calls[0]["function"]["arguments"]) == {"success": True}, calls
        assert not any(ev["choices"][0]["delta"].get("content") for ev in chunks), chunks
        assert [ev["choices"][0]["finish_reason"] for ev in chunks if ev["choices"][0]["finish_reason"]] == ["tool_calls"]
    # auto on noise: text, streamed as it comes, the same as without tools
    body = dict(GREEDY, messages=CODING, max_tokens=24, stream=True)
    plain = sse_events(post(srv("llama3").port, "/v1/chat/completions", body)[2])
    tools = sse_events(post(srv("llama3").port, "/v1/chat/completions", dict(body, tools=[TEST_TOOL]))[2])
    text = lambda evs: "".join(e["choices"][0]["delta"].get("content") or "" for e in evs[:-1])
    assert text(plain) and text(tools), (plain, tools)
    assert not any("tool_calls" in e["choices"][0]["delta"] for e in tools[:-1]), tools


def test_multi_turn_renders_calls_and_results():
    """A conversation that carries an assistant's call and the tool's result is rendered in
    the family's format (Qwen2.5's <tool_call> and <tool_response>; llama3's ipython turn) and
    answered."""
    msgs = CODING + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_6789", "type": "function", "function": {"name": "test", "arguments": "{\"success\":true}"}}]},
        {"role": "tool", "tool_call_id": "call_6789", "content": "0.55"},
    ]
    st, doc = post_json(srv("chatml").port, "/apply-template", {"messages": msgs, "tools": [TEST_TOOL]})
    want = ('<|im_start|>assistant\n<tool_call>\n{"name": "test", "arguments": {"success": true}}\n</tool_call><|im_end|>\n'
            '<|im_start|>user\n<tool_response>\n0.55\n</tool_response><|im_end|>\n<|im_start|>assistant\n')
    assert st == 200 and doc["prompt"].endswith(want) and "<tools>\n" + json.dumps(TEST_TOOL) in doc["prompt"], doc
    st, doc = post_json(srv("llama3").port, "/apply-template", {"messages": msgs})
    assert st == 200 and doc["prompt"].endswith(
        '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "test", "parameters": {"success": true}}<|eot_id|>'
        '<|start_header_id|>ipython<|end_header_id|>\n\n"0.55"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n'), doc
    for family in ("chatml", "gemma"):
        st, doc = post_json(srv(family).port, "/v1/chat/completions", dict(GREEDY, messages=msgs, tools=[TEST_TOOL],
                                                                             max_tokens=8))
        assert st == 200 and doc["choices"][0]["message"]["role"] == "assistant", (family, doc)


def test_openai_client_with_tools():
    """The official openai client: tools and tool_choice sent, tool_calls read as its types."""
    import openai
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % srv("chatml").port, api_key="x", max_retries=0)
    r = client.chat.completions.create(model="gpt-4o", messages=CODING, tools=[PYTHON_TOOL], tool_choice="required",
                                       max_tokens=256, temperature=0)
    call = r.choices[0].message.tool_calls[0]
    assert r.model == "gpt-4o" and r.choices[0].finish_reason == "tool_calls", r
    assert call.type == "function" and call.function.name == "python" and "code" in json.loads(call.function.arguments), r
    stream = client.chat.completions.create(model="gpt-4o", messages=CODING, tools=[TEST_TOOL], stream=True,
                                            tool_choice={"type": "function", "function": {"name": "test"}},
                                            max_tokens=256, temperature=0)
    name, args, finish = "", "", None
    for chunk in stream:
        for tc in chunk.choices[0].delta.tool_calls or []:
            name += tc.function.name or ""
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "test" and json.loads(args) == {"success": True} and finish == "tool_calls", (name, args, finish)


if __name__ == "__main__":
    try:
        run([test_chat_template_file_names_a_family, test_required_call_has_openai_shape,
             test_named_tool_is_the_one_called, test_no_call_without_tools_or_with_none,
             test_bad_tools_are_400s_naming_the_field, test_streamed_call_as_openai_deltas,
             test_multi_turn_renders_calls_and_results, test_openai_client_with_tools])
    finally:
        for s in _servers.values():
            s.__exit__(None, None, None)
