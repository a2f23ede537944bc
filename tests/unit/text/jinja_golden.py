#!/usr/bin/env python3
"""Writes jinja_golden.h: small templates rendered by jinja2 the way Hugging
Face transformers renders chat templates (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, raise_exception, strftime_now and
transformers' tojson), for test_jinja.c to compare src/text/jinja.c's
interpreter against, byte for byte. A case jinja2 refuses (any exception)
is written with err = 1 and, for raise_exception, its message.

Run (needs Debian's python3-jinja2; the header is committed, so the test
does not): python3 tests/unit/text/jinja_golden.py > tests/unit/text/jinja_golden.h
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ref"))
from jinja_ref import Raised as RaisedError, TemplateError, make_env  # noqa: E402


MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Ünïcödé ✓ 日本"}]

# (name, template, context)
CASES = [
    # output and literals
    ("text", "plain text", {}),
    ("var", "{{ x }}", {"x": "v"}),
    ("ints", "{{ 1 }} {{ -3 }} {{ 1_000 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2**3**2 }}", {}),
    ("floats", "{{ 1.0 }} {{ 0.1 }} {{ 1e20 }} {{ 1.5e-7 }} {{ 1/2 }} {{ 4/2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 2**0.5 }} {{ 1/3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
    ("json_numbers", "{{ a }} {{ b }} {{ c }} {{ d }} {{ a is integer }} {{ b is float }} {{ e }}", {"a": 1, "b": 1.0, "c": 2.5e-8, "d": -0.0, "e": 123456789012}),
    ("consts", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }} [{{ undefined_thing }}]", {}),
    ("strings", "{{ 'a\\'b' }} {{ \"q\\\"d\" }} {{ 'tab\\tnl\\n' }} {{ 'x' 'y' }} {{ '\\u00e9\\x41' }}", {}),
    ("repr_list", "{{ [1, 'a', none, true, 1.5, {'k': \"it's\"}, [\"q\\\"\"]] }}", {}),
    ("repr_tuple", "{{ (1,) }} {{ ('a', 'b') }} {{ () }} {{ (1, 2) + (3,) }}", {}),
    ("repr_dict", "{{ {'a': 1, 'b': [none, false]} }} {{ {} }}", {}),
    ("repr_json", "{{ m }}", {"m": {"role": "user", "content": "l'été\n", "n": [1, 2.0, None, True]}}),
    ("repr_escapes", "{{ ['a\\\\b', 'c\\rd', '\\x01', \"both'\\\"\"] }}", {}),
    ("print_tuple", "{{ 1, 2 }}", {}),
    # arithmetic and operators
    ("concat", "{{ 'a' ~ 1 ~ none ~ true ~ [1] ~ nothing }}", {}),
    ("add", "{{ 'a' + 'b' }} {{ [1] + [2] }} {{ 1 + 2.5 }} {{ true + 1 }} {{ 'ab' * 3 }} {{ 2 * [0] }}", {}),
    ("compare", "{{ 1 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ 'a' in 'cat' }} {{ 3 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 1 }} {{ not 0 }} {{ none or [] }} {{ not x is defined }}", {}),
    ("condexpr", "{{ 'a' if true else 'b' }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
    ("unary", "{{ -x }} {{ -1|abs }} {{ +3 }} {{ - 2 ** 2 }}", {"x": 5}),
    # attribute and item access
    ("attr_item", "{{ m.role }} {{ m['content'] }} {{ l[0] }} {{ l[-1] }} [{{ l[9] }}] [{{ m.nope }}] {{ s[1] }} {{ s[-1] }}", {"m": {"role": "user", "content": "c"}, "l": [1, 2, 3], "s": "héllo"}),
    ("attr_on_none", "[{{ n.foo }}][{{ 'str'.foo }}][{{ 5.bar }}]", {"n": None}),
    ("item_precedence", "{{ d.items()|list }} {{ d['items'] }} {{ d.get('x', 'dflt') }} {{ d.get('items') }} {{ d.get('zz') }}", {"d": {"items": 7, "x": None}}),
    ("slices", "{{ s[1:3] }} {{ s[::-1] }} {{ s[-2:] }} {{ s[:-2] }} {{ l[::2] }} {{ l[1:] }} {{ l[5:] }} {{ l[::-1] }} {{ l[-2::-1] }} {{ s[1:4:2] }}", {"s": "añbc日e", "l": [1, 2, 3, 4]}),
    ("messages_slice", "{% for m in messages[1:] %}{{ m.role }};{% endfor %}", {"messages": MSGS}),
    # if / for
    ("if_elif", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}many{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}[{{ loop.previtem }}-{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}x{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ '' if loop.last else ',' }}{% endfor %} {% for m in messages if m.role == 'user' %}{{ loop.index }}/{{ loop.length }} {% endfor %}", {"messages": MSGS}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
    ("for_dict", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_undefined", "[{% for x in nothing %}x{% endfor %}]", {}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    # set and scoping
    ("set", "{% set x = 1 %}{% set y = x + 1 %}{{ x }}{{ y }}", {}),
    ("set_tuple", "{% set a, b = 1, 2 %}{% set c, d = [3, 4] %}{{ a }}{{ b }}{{ c }}{{ d }}", {}),
    ("set_block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]", {}),
    ("set_in_loop_does_not_leak", "{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}({{ x }}){% endfor %}{{ x }}", {}),
    ("set_in_loop_fresh_each_iteration", "{% for i in [1, 2] %}[{{ y }}]{% set y = i %}{% endfor %}[{{ y }}]", {}),
    ("set_in_if_leaks", "{% if true %}{% set x = 3 %}{% endif %}{{ x }}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.count = ns.count + 1 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} {{ ns.missing is defined }}", {"messages": MSGS}),
    ("namespace_dict_arg", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]", {}),
    ("macro_sees_globals", "{% macro m() %}{{ bos_token }}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{% for i in [1] %}{% set x = 2 %}{{ m() }}{% endfor %}", {"bos_token": "<s>"}),
    ("macro_recursive", "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(5) }}", {}),
    ("macro_default_uses_arg", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}", {}),
    ("macro_trims", "{% macro m(x) -%}\n  [{{ x }}]\n{%- endmacro %}\n{{ m(1) }}|{{ m(2) | trim }}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}", {}),
    ("raw", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}", {}),
    ("comment", "a{# comment {{ x }} #}b", {}),
    # whitespace control
    ("ws_minus", "a  {{- 'b' -}}  c\n  {%- if true -%}  d  {%- endif -%}  e", {}),
    ("ws_trim_lstrip", "<\n  {% if true %}\n  x\n  {% endif %}\n  {# c #}\n>\n", {}),
    ("ws_plus", "a\n  {%+ if true %}b{% endif +%}\nc", {}),
    ("ws_var_no_trim", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws_trailing_newlines", "x\n\n", {}),
    ("ws_lstrip_mid_line", "a {% if true %}b{% endif %} c\n   {% if true %}d{% endif %}", {}),
    ("ws_comment_line", "a\n  {#- c -#}\n  b\n{# x #}\nc", {}),
    ("ws_raw", "a\n  {% raw %}\n  r\n  {% endraw %}\nb", {}),
    ("ws_lstrip_after_var", "{{ 'a' }}  {% if true %}b{% endif %}\n", {}),
    ("ws_tabs", "x\n\t {% if true %}\ty\n\t{% endif %}\tz", {}),
    # filters
    ("f_trim", "[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ ' é '|trim }}]", {}),
    ("f_length", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|count }} {{ nothing|length }}", {}),
    ("f_first_last", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ 'abc'|last }} [{{ []|first }}]", {}),
    ("f_join", "{{ [1, 'a', none]|join(', ') }} {{ 'abc'|join('-') }} {{ users|join(', ', attribute='name') }} {{ [1, 2]|join }}", {"users": [{"name": "x"}, {"name": "y"}]}),
    ("f_case", "{{ 'hello world'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD-x (y)'|title }} {{ 'hELLO wORLD'|capitalize }} {{ 'éa'|upper }}", {}),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}", {}),
    ("f_default", "{{ x|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ 0|d('z', boolean=true) }} {{ 'v'|default('d') }}", {}),
    ("f_items_list", "{{ d|items|list }} {{ 'ab'|list }} {{ d|list }} {{ nothing|items|list }}", {"d": {"a": 1, "b": 2}}),
    ("f_string_int_float", "{{ 3|string }}{{ (3|string) is string }} {{ '42'|int }} {{ ' 7 '|int }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'x'|float }} {{ 2|float }} {{ true|int }}", {}),
    ("f_abs_round", "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ 7|round }}", {}),
    ("f_map", "{{ users|map(attribute='name')|list }} {{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='age', default=0)|list }} {{ [' a ', 'b ']|map('trim')|join(',') }}", {"users": [{"name": "x", "age": 3}, {"name": "y"}]}),
    ("f_select", "{{ range(10)|select('odd')|list }} {{ range(10)|reject('even')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ [1, 2, 3]|select('gt', 1)|list }} {{ [1, 2, 3]|select('equalto', 2)|list }} {{ ['a', 'b']|reject('in', ['a'])|list }}", {}),
    ("f_selectattr", "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ messages|rejectattr('role', 'eq', 'user')|list|length }} {{ tools|selectattr('f')|list }} {{ tools|selectattr('f', 'defined')|list|length }}", {"messages": MSGS, "tools": [{"f": 1}, {"g": 0}, {"f": 0}]}),
    ("f_unique", "{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [1, 2, 1.0]|unique|list }}", {}),
    ("f_indent", "[{{ 'a\\nb\\n\\nc'|indent }}] [{{ 'a\\nb'|indent(2, true) }}] [{{ 'a\\n\\nb'|indent(2, blank=true) }}] [{{ 'x\\ny'|indent('> ') }}]", {}),
    ("f_reverse_sort", "{{ [3, 1, 2]|reverse|list }} {{ 'abc'|reverse }} {{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|join }}", {"users": [{"name": "x", "age": 3}, {"name": "y", "age": 1}, {"name": "z", "age": 2}]}),
    ("f_dictsort", "{{ d|dictsort }} {{ d|dictsort(by='value') }} {{ d|dictsort(reverse=true) }}", {"d": {"b": 1, "A": 3, "c": 2}}),
    ("f_sum_min_max", "{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ users|sum(attribute='age') }} {{ [3, 1, 2]|min }} {{ [3, 1, 2]|max }} {{ ['b', 'A']|min }} {{ users|max(attribute='age') }} [{{ []|max }}]", {"users": [{"name": "x", "age": 3}, {"name": "y", "age": 1}]}),
    ("f_escape_safe", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ '<i>'|escape }}", {}),
    ("f_wordcount_batch", "{{ 'hello big world'|wordcount }} {{ range(5)|batch(2)|list }} {{ range(5)|batch(2, 'x')|list }}", {}),
    ("f_center", "[{{ 'ab'|center(7) }}][{{ 'abc'|center(6) }}]", {}),
    ("f_tojson", "{{ d|tojson }}", {"d": {"b": [1, 2.0, None, True], "a": "é\"\\\n\t\u0001", "c": {}, "e": [], "f": 1e100}}),
    ("f_tojson_indent", "{{ d|tojson(indent=2) }}|{{ d|tojson(indent=4, sort_keys=true) }}|{{ [1, [2]]|tojson(indent=1) }}", {"d": {"z": [1, {"y": None}], "a": "x", "e": {}}}),
    ("f_tojson_separators", "{{ d|tojson(separators=(',', ':')) }} {{ 'str'|tojson }} {{ 1.5|tojson }} {{ none|tojson }} {{ (1, 2)|tojson }} {{ {1: 'int key', true: 'b'}|tojson }}", {"d": {"a": [1, 2]}}),
    ("f_chain", "{{ messages|map(attribute='role')|unique|list|length }} {{ (messages|last).content|upper }}", {"messages": MSGS}),
    ("f_markup", "{{ ('a'|safe + '<') }} {{ '<' + 'a'|safe }} {{ ('<'|safe) ~ '<' }} {{ ('<b>'|safe|upper) + '<' }} {{ ('<b>'|e)|e }} {{ ('x'|safe|trim) + '<' }} {{ 'x'|safe|replace('x', '<') }} {{ ('<'|e) is escaped }} {{ '>'|safe + d|tojson }}", {"d": {"k": "<'&>"}}),
    ("f_generators", "{{ (none|selectattr('type', 'equalto', 'x')|list|length) > 0 }} {{ none|map(attribute='a')|list }} {{ [1]|select is iterable }} {{ []|select is sequence }} {{ not ([]|select) }} {{ [1, 2]|map('string')|join }} {{ [1, 2]|reverse is sequence }}", {}),
    ("err_generator_tojson", "{{ tools|map(attribute='function')|tojson }}", {"tools": [{"function": {"name": "f"}}]}),
    ("err_generator_length", "{{ [1, 2]|map('string')|length }}", {}),
    ("err_generator_last", "{{ [1]|select|last }}", {}),
    ("err_markup_plus_int", "{{ 'a'|safe + 1 }}", {}),
    # tests
    ("tests_types", "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 's' is string }} {{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is mapping }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }} {{ true is boolean }} {{ true is true }} {{ 0 is false }} {{ nothing is iterable }}", {"x": 1}),
    ("tests_compare", "{{ 2 is eq 2 }} {{ 2 is equalto 3 }} {{ 2 is ne 3 }} {{ 1 is lt 2 }} {{ 2 is gt 1 }} {{ 2 is le 2 }} {{ 2 is ge 3 }} {{ 'a' is in 'abc' }} {{ 3 is odd }} {{ 3 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ range is callable }} {{ 'x' is callable }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'a' is not none }}", {}),
    ("tests_in_conditions", "{% if messages[0]['role'] == 'system' and messages[0].content is string and tools is not defined %}ok{% endif %}", {"messages": MSGS}),
    # methods
    ("m_strip", "[{{ '  a  '.strip() }}][{{ '  a  '.lstrip() }}][{{ '  a  '.rstrip() }}][{{ 'xxaxy'.strip('xy') }}][{{ '\\n\\ta\\n'.strip() }}]", {}),
    ("m_split", "{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ '  x  '.split() }} {{ 'a<sep>b'.split('<sep>')[1] }} {{ ''.split(',') }}", {}),
    ("m_starts_ends", "{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('x') }}", {}),
    ("m_case", "{{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'hello wORLD 1st'.title() }} {{ 'hELLO'.capitalize() }}", {}),
    ("m_misc", "{{ 'a-b-c'.replace('-', '+') }} {{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ ', '.join(['a', 'b']) }} {{ 'héllo'.rfind('l') }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }}", {}),
    ("m_dict", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('q', 0) }}", {"d": {"a": 1, "b": 2}}),
    # globals
    ("g_range", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}", {}),
    ("g_dict", "{{ dict(a=1, b='x') }}", {}),
    ("g_strftime", "{{ strftime_now('%Y') is string }}", {}),
    # real-template idioms
    ("idiom_system_split", "{% if messages[0]['role'] == 'system' %}{% set sys = messages[0]['content'] %}{% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}{{ sys }}|{% for m in loop_messages %}{{ m['role'] }}:{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
    ("idiom_tool_calls", "{% for m in messages %}{% if m.tool_calls %}{% for tc in m.tool_calls %}{% set f = tc.function %}{{ f.name }}({{ f.arguments|tojson }}){% endfor %}{% endif %}{% endfor %}", {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "get", "arguments": {"city": "Paris", "n": 2}}}]}]}),
    ("idiom_content_string_or_list", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}{% if c.type == 'text' %}{{ c.text }}{% endif %}{% endfor %}{% endif %};{% endfor %}", {"messages": [{"role": "user", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "t"}, {"type": "image"}]}]}),
    ("idiom_date", "{% if not date_string is defined %}{% set date_string = '26 Jul 2024' %}{% endif %}{{ date_string }}", {}),
    ("idiom_date_given", "{% if not date_string is defined %}{% set date_string = '26 Jul 2024' %}{% endif %}{{ date_string }}", {"date_string": "01 Jan 2025"}),
    ("non_ascii", "{{ s|length }} {{ s[0] }} {{ s[-1] }} {{ s|upper }} {{ s|tojson }} {{ [s] }}", {"s": "日本語ü"}),
    # errors (jinja2 refuses each)
    ("err_raise", "{% if true %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}", {}),
    ("err_undefined_attr", "{{ nothing.attr }}", {}),
    ("err_undefined_item", "{{ nothing['a'] }}", {}),
    ("err_undefined_add", "{{ nothing + 'a' }}", {}),
    ("err_undefined_call", "{{ nothing() }}", {}),
    ("err_append", "{% set l = [] %}{{ l.append(1) }}", {}),
    ("err_dict_update", "{{ d.update({'a': 1}) }}", {"d": {}}),
    ("err_type_add", "{{ 1 + 'a' }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_not_iterable", "{% for x in 5 %}{% endfor %}", {}),
    ("err_none_iter", "{% for x in n %}{% endfor %}", {"n": None}),
    ("err_unpack", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_set_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_tojson_undefined", "{{ nothing|tojson }}", {}),
    ("err_items_list", "{{ [1]|items|list }}", {}),
    ("err_cmp_types", "{{ 1 < 'a' }}", {}),
    ("err_macro_too_many_args", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", {}),
    ("err_syntax_endif", "{% if true %}x", {}),
    ("err_syntax_unknown_filter", "{{ x|nosuchfilter }}", {}),
    ("err_syntax_unknown_test", "{{ x is nosuchtest }}", {}),
    ("err_syntax_tag", "{% frobnicate %}", {}),
    ("err_syntax_unclosed", "{{ 'a' ", {}),
    ("err_syntax_unclosed_comment", "{# abc", {}),
    ("err_syntax_stray_endfor", "{% endfor %}", {}),
    ("err_syntax_bad_expr", "{{ 1 + }}", {}),
    ("err_range_big", "{{ range(1000000)|length }}", {}),
]


def c_str(s):
    out = []
    for ch in s.encode("utf-8"):
        if ch == 0x22:
            out.append('\\"')
        elif ch == 0x5c:
            out.append("\\\\")
        elif ch == 0x0a:
            out.append("\\n")
        elif 0x20 <= ch < 0x7f and ch != 0x3f:
            out.append(chr(ch))
        else:
            out.append("\\%03o" % ch)
    return '"' + "".join(out) + '"'


def main():
    env = make_env()
    print("/* jinja_golden.h: generated by tests/unit/text/jinja_golden.py with jinja2 "
          "in transformers' environment; do not edit. */")
    print("struct jinja_golden { const char *name, *tmpl, *ctx, *want; int err; const char *raised; };")
    print("static const struct jinja_golden jinja_goldens[] = {")
    names = set()
    for name, tmpl, ctx in CASES:
        assert name not in names, name
        names.add(name)
        ctx_json = json.dumps(ctx, ensure_ascii=False)
        want, err, raised = "", 0, None
        try:
            want = env.from_string(tmpl).render(**json.loads(ctx_json))
        except RaisedError as e:
            err, raised = 1, str(e)
        except (TemplateError, TypeError, ValueError, ZeroDivisionError, OverflowError, AttributeError) as e:
            err = 1
        assert name.startswith("err_") == bool(err), (name, want)
        print("    {%s, %s, %s, %s, %d, %s}," % (c_str(name), c_str(tmpl), c_str(ctx_json), c_str(want), err,
                                                 c_str(raised) if raised is not None else "NULL"))
    print("};")


if __name__ == "__main__":
    main()
