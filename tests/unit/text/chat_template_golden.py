#!/usr/bin/env python3
"""Writes chat_template_golden.h: each family's official chat template
rendered by jinja2 the way Hugging Face transformers renders it
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, raise_exception),
for the conversations the C test renders with hearth's built-ins.

Run (needs jinja2; the header is committed, so the test does not): python3 tests/unit/text/chat_template_golden.py > tests/unit/text/chat_template_golden.h

Template texts are the "chat_template" of each model's tokenizer_config.json
on Hugging Face. Where a template is reduced or changed it says so below; the
changes are the deliberate differences documented in src/text/chat_template.c.
"""
import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

TEMPLATES = {
    # teknium/OpenHermes-2.5-Mistral-7B (also llama.cpp tests/test-chat-template.cpp's chatml case)
    "chatml": ("", "",
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"),
    # meta-llama/Meta-Llama-3-8B-Instruct
    "llama3": ("<|begin_of_text|>", "<|eot_id|>",
        "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"),
    # microsoft/Phi-3-mini-4k-instruct. Rendered with eos_token "": hearth
    # does not end a prompt without a generation prompt with EOS.
    "phi3": ("<s>", "",
        "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\\n' + message['content'] + '<|end|>\\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\\n' + message['content'] + '<|end|>\\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"),
    # google/gemma-3-4b-it, reduced to string content (the image branch removed)
    "gemma": ("<bos>", "<eos>", """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""),
    # mistralai/Mistral-7B-Instruct-v0.3, reduced to no tools, and with the
    # system message joined to the first user message (loop.first) instead of
    # the last (loop.last), as llama.cpp's built-in does.
    "mistral": ("<s>", "</s>", """{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
        {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
    {%- set ns.index = ns.index + 1 %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if loop.first and system_message is defined %}
            {{- "[INST] " + system_message + "\\n\\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""),
    # meta-llama/Llama-2-7b-chat-hf
    "llama2": ("<s>", "</s>",
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"),
}

CONVS = {
    "one": [("user", "Hello")],
    "multi": [("system", "You are a helpful assistant"), ("user", " Hello"),
              ("assistant", "  Hi there\n"), ("user", "Who are you? ")],
}


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def c_string(s):
    out = []
    for ch in s.encode():
        c = chr(ch)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif 32 <= ch < 127:
            out.append(c)
        else:
            out.append("\\x%02x\"\"" % ch)
    return '"' + "".join(out) + '"'


env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
env.globals["raise_exception"] = raise_exception
print("/* chat_template_golden.h: written by chat_template_golden.py (jinja2 %s"
      " rendering each family's official template); do not edit. */" % jinja2.__version__)
print("static const struct golden {\n    const char *family, *conv;\n    int gen;\n"
      "    const char *bos, *want;\n} goldens[] = {")
for fam, (bos, eos, src) in TEMPLATES.items():
    t = env.from_string(src)
    for conv, msgs in CONVS.items():
        for gen in (0, 1):
            text = t.render(messages=[{"role": r, "content": c} for r, c in msgs],
                            bos_token=bos, eos_token=eos, add_generation_prompt=bool(gen))
            print("    {%s, %s, %d, %s,\n     %s}," % (c_string(fam), c_string(conv), gen, c_string(bos), c_string(text)))
print("};")
