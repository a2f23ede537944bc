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
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import BIN, SHARED, Server, request, run  # noqa: E402

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
TMP = tempfile.mkdtemp(prefix="hearth-tools-")

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


def post(port, path, doc, timeout=120):
    st, h, out = request(port, "POST", path, body=json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json"}, timeout=timeout)
    return st, h, out


def post_json(port, path, doc, timeout=120):
    st, _, out = post(port, path, doc, timeout)
    return st, json.loads(out)


def test_chat_template_file_names_a_family():
    """--chat-template-file: the family is recognised and rendered (what /apply-template
    shows), and a file hearth cannot map to a family is refused at start, naming it."""
    with Server("--model", STORIES, "--jinja", "--chat-template-file", template_file("gemma"), "--log-level", "info",
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


if __name__ == "__main__":
    run([test_chat_template_file_names_a_family])
