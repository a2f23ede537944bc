"""The reference renderer of chat templates: jinja2 in the environment Hugging
Face transformers renders them with (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, raise_exception, strftime_now and
transformers' tojson: json.dumps with ensure_ascii=False). hearth's Jinja
interpreter (src/text/jinja.h) is checked against it by
tests/unit/text/jinja_golden.py, tests/integration/test_jinja_templates.py and
tests/api/test_chat_jinja.py. Needs Debian's python3-jinja2 (scripts/deps.sh).
"""
import json
from datetime import datetime

from jinja2.exceptions import TemplateError  # noqa: F401 (the callers catch it)
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(Exception):
    """A template's raise_exception(message)."""


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env
