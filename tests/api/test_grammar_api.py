"""Grammar-constrained sampling as llama-server has it (issue 20): "grammar"
(GBNF) and "json_schema" on /completion, /v1/completions and
/v1/chat/completions, and OpenAI's response_format on chat.

stories260K writes children's stories and knows nothing of JSON: whatever
structure comes out is the grammar's doing. Every answer is checked against
the constraint it was asked for, by Python's own json module and a hand
check of the schema, or by a regular expression equivalent to the GBNF;
every grammar here has finite sentences, so the answer must end with the end
token (stop_type "eos") well within the token limit.
"""
import json
import os
import re
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from hearth_test import SHARED, Server, request, run  # noqa: E402

STORIES = os.path.join(SHARED, "models", "stories260K", "stories260K.gguf")
PROMPT = "Tom and his dog went to the"


class Main:
    srv = None


def srv():
    if Main.srv is None:
        Main.srv = Server("--model", STORIES, "--parallel", "2", "--slots", "--log-level", "warn", timeout=120)
    return Main.srv


def post(path, doc):
    st, _, out = request(srv().port, "POST", path, body=json.dumps(doc).encode(),
                         headers={"Content-Type": "application/json"}, timeout=120)
    return st, out


def post_json(path, doc):
    st, out = post(path, doc)
    return st, json.loads(out)


def sse_events(body):
    out = []
    for ev in body.decode("utf-8").split("\n\n"):
        if ev.startswith("data: ") and ev != "data: [DONE]":
            out.append(json.loads(ev[len("data: "):]))
    return out


YES_NO = 'root ::= ("yes" | "no") ", " word "."\nword ::= [a-z]{1,8}  # a short word\n'
YES_NO_RE = r"(yes|no), [a-z]{1,8}\."

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer"},
        "pet": {"enum": ["dog", "cat", "bird"]},
        "tags": {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    },
    "required": ["name", "age"],
}


def check_person(text):
    doc = json.loads(text)  # raises on anything that is not one JSON document
    assert isinstance(doc, dict), text
    assert set(doc) <= set(PERSON["properties"]), text
    assert isinstance(doc["name"], str) and len(doc["name"]) <= 12, text
    assert isinstance(doc["age"], int) and not isinstance(doc["age"], bool), text
    if "pet" in doc:
        assert doc["pet"] in ("dog", "cat", "bird"), text
    if "tags" in doc:
        assert isinstance(doc["tags"], list) and len(doc["tags"]) <= 3, text
        assert all(isinstance(t, bool) for t in doc["tags"]), text
    keys = list(doc)
    order = [k for k in PERSON["properties"] if k in doc]
    required_first = ["name", "age"] + [k for k in order if k not in ("name", "age")]
    assert keys == required_first, text  # llama.cpp's order: required ones, then the rest as declared


def test_completion_grammar_seeds():
    """Several seeds, so the grammar is not met by luck: every answer is a sentence of it."""
    for seed in range(5):
        st, doc = post_json("/completion", {"prompt": PROMPT, "n_predict": 64, "seed": seed, "grammar": YES_NO})
        assert st == 200, doc
        assert re.fullmatch(YES_NO_RE, doc["content"]), doc["content"]
        assert doc["stop_type"] == "eos", doc


def test_completion_grammar_greedy_and_streamed():
    body = {"prompt": PROMPT, "n_predict": 64, "temperature": 0, "grammar": YES_NO}
    st, doc = post_json("/completion", body)
    assert st == 200, doc
    assert re.fullmatch(YES_NO_RE, doc["content"]), doc["content"]
    st, raw = post("/completion", dict(body, stream=True))
    assert st == 200
    streamed = "".join(e.get("content", "") for e in sse_events(raw))
    assert streamed == doc["content"], (streamed, doc["content"])


def test_completion_json_schema():
    for seed in (1, 2, 3):
        st, doc = post_json("/completion", {"prompt": PROMPT, "n_predict": 400, "seed": seed, "json_schema": PERSON})
        assert st == 200, doc
        check_person(doc["content"])
        assert doc["stop_type"] == "eos", doc


def test_v1_completions_json_schema_enum():
    schema = {"enum": ["red", "green", 7, None]}
    for seed in (4, 5):
        st, doc = post_json("/v1/completions", {"prompt": PROMPT, "max_tokens": 32, "seed": seed, "json_schema": schema})
        assert st == 200, doc
        assert json.loads(doc["choices"][0]["text"]) in ("red", "green", 7, None), doc
        assert doc["choices"][0]["finish_reason"] == "stop", doc


def chat(extra, stream=False):
    body = {"messages": [{"role": "user", "content": "Tell me about a person."}], "max_tokens": 400, "seed": 9}
    body.update(extra)
    if stream:
        st, raw = post("/v1/chat/completions", dict(body, stream=True))
        assert st == 200, raw
        return "".join(e["choices"][0]["delta"].get("content") or "" for e in sse_events(raw) if e.get("choices"))
    st, doc = post_json("/v1/chat/completions", body)
    assert st == 200, doc
    assert doc["choices"][0]["finish_reason"] == "stop", doc
    return doc["choices"][0]["message"]["content"]


def test_chat_response_format_json_schema():
    text = chat({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}})
    check_person(text)
    assert chat({"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}},
                stream=True) == text


def test_chat_response_format_json_object():
    """No schema: any JSON object (llama-server's empty schema). Its strings are
    unbounded and stories260K never closes them, so the answer is cut by the
    limit: it must still be the start of an object, a key opening or the
    object closing after the brace; with a schema it ends and parses."""
    for seed in (1, 2):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 40, "seed": seed,
                "response_format": {"type": "json_object"}}
        st, doc = post_json("/v1/chat/completions", body)
        assert st == 200, doc
        text = doc["choices"][0]["message"]["content"]
        assert text.startswith("{") and text[1:].lstrip(" \n\t")[:1] in ('"', "}"), text
        if doc["choices"][0]["finish_reason"] == "stop":
            assert isinstance(json.loads(text), dict), text
    text = chat({"response_format": {"type": "json_object", "schema": PERSON}})
    check_person(text)


def test_chat_json_schema_and_grammar_fields():
    check_person(chat({"json_schema": PERSON}))
    assert re.fullmatch(YES_NO_RE, chat({"grammar": YES_NO})), "grammar on chat"


def test_parallel_requests_keep_their_grammars():
    """Two slots sampling at once, each with its own grammar (the matcher is per request)."""
    out = {}

    def go(key, body):
        out[key] = post_json("/completion", body)

    ts = [threading.Thread(target=go, args=(i, {"prompt": PROMPT, "n_predict": 400, "seed": 20 + i,
                                                "grammar" if i % 2 == 0 else "json_schema": YES_NO if i % 2 == 0 else PERSON}))
          for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for i in range(4):
        st, doc = out[i]
        assert st == 200, doc
        if i % 2 == 0:
            assert re.fullmatch(YES_NO_RE, doc["content"]), doc["content"]
        else:
            check_person(doc["content"])


def test_bad_grammar_is_a_400_with_position():
    st, doc = post_json("/completion", {"prompt": PROMPT, "grammar": 'root ::= "a" missing\n'})
    assert st == 400, doc
    assert "line 1, column 14" in doc["error"]["message"] and "missing" in doc["error"]["message"], doc
    st, doc = post_json("/completion", {"prompt": PROMPT, "grammar": 'root ::= ("a"\n'})
    assert st == 400 and "expecting ')'" in doc["error"]["message"], doc
    st, doc = post_json("/completion", {"prompt": PROMPT, "grammar": 'start ::= "a"\n'})
    assert st == 400 and "root" in doc["error"]["message"], doc


def test_bad_schema_and_response_format_are_400s():
    # A lookahead is a part of a pattern hearth cannot check (patterns
    # themselves are converted): refused, not ignored, and the message says
    # which part, so a client learns its output would not have been checked.
    lookahead = {"json_schema": {"type": "string", "pattern": "^(?=a)a$"}}
    for body in ({"json_schema": {"type": "hiccup"}},
                 lookahead,
                 {"response_format": {"type": "sound"}},
                 {"response_format": {"type": "json_object", "schema": 123}},
                 {"json_schema": PERSON, "grammar": YES_NO}):
        st, doc = post_json("/v1/chat/completions", dict(body, messages=[{"role": "user", "content": "hi"}]))
        assert st == 400, (body, doc)
        assert doc["error"]["message"], doc
        if body is lookahead:
            msg = doc["error"]["message"]
            assert "pattern" in msg and "lookaround" in msg and "offset 1" in msg, msg


def test_text_response_format_is_unconstrained():
    st, doc = post_json("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                                                 "response_format": {"type": "text"}})
    assert st == 200, doc


def test_settings_show_the_grammar():
    """generation_settings and GET /slots show the request's GBNF as llama-server does (a json_schema's
    converted one), "" without one."""
    mine = YES_NO + "# settings test\n"
    st, doc = post_json("/completion", {"prompt": PROMPT, "n_predict": 40, "grammar": mine})
    assert st == 200 and doc["generation_settings"]["grammar"] == mine, doc.get("generation_settings")
    st, _, out = request(srv().port, "GET", "/slots", timeout=30)
    assert st == 200, out
    shown = [s["params"]["grammar"] for s in json.loads(out)]
    assert mine in shown, shown
    st, doc = post_json("/completion", {"prompt": PROMPT, "n_predict": 40, "json_schema": PERSON})
    assert st == 200 and "root ::=" in doc["generation_settings"]["grammar"], doc["generation_settings"]
    st, doc = post_json("/completion", {"prompt": PROMPT, "n_predict": 2})
    assert st == 200 and doc["generation_settings"]["grammar"] == "", doc["generation_settings"]


TESTS = [test_completion_grammar_seeds, test_completion_grammar_greedy_and_streamed, test_completion_json_schema,
         test_v1_completions_json_schema_enum, test_chat_response_format_json_schema,
         test_chat_response_format_json_object, test_chat_json_schema_and_grammar_fields,
         test_parallel_requests_keep_their_grammars, test_bad_grammar_is_a_400_with_position,
         test_bad_schema_and_response_format_are_400s, test_text_response_format_is_unconstrained,
         test_settings_show_the_grammar]

if __name__ == "__main__":
    try:
        run(TESTS)
    finally:
        if Main.srv is not None:
            Main.srv.stop()
