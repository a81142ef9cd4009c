#!/usr/bin/env python3
"""Writes test/data/tokenizer/chat_templates/expected.json (run by hand, never in CI).

Renders every template in test/data/tokenizer/chat_templates/*.jinja over a set of
conversations the way transformers' apply_chat_template renders them: jinja2's
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols
extension, a raise_exception global that raises TemplateError, transformers' tojson filter
(json.dumps with ensure_ascii=False and an indent option), and the variables messages, tools,
documents, add_generation_prompt, bos_token, eos_token. A case the template rejects records
the exception's message under "error" instead of "expected".

Usage: pip install jinja2; python3 scripts/make_chat_template_refs.py
"""
import json
import os

import jinja2
import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "tokenizer",
                   "chat_templates")

SYSTEM = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "Hello! What is 2 + 2?"}
A1 = {"role": "assistant", "content": "2 + 2 = 4."}
U2 = {"role": "user", "content": "  And 3 * 3?\nAnswer briefly.  "}
A2 = {"role": "assistant", "content": " 9 "}
U3 = {"role": "user", "content": "Thanks."}
UNICODE = {"role": "user", "content": "Héllo wörld — 你好，世界 👋🏽 \"quotes\" \\ back\tslash"}
UNICODE_A = {"role": "assistant", "content": "こんにちは! Ça va? ✓"}

CONVERSATIONS = {
    "system_user_assistant_user": [SYSTEM, U1, A1, U2],
    "no_system": [U1],
    "multi_turn": [U1, A1, U2, A2, U3],
    "system_multi_turn": [SYSTEM, U1, A1, U2, A2, U3],
    "ends_with_assistant": [SYSTEM, U1, A1],
    "unicode": [UNICODE, UNICODE_A, U3],
}
BAD_ORDER = {
    "bad_order_user_user": [U1, U3],
    "bad_order_assistant_first": [A1, U1],
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city (°C).",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
                "detailed": {"type": "boolean"},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
            },
            "required": ["city"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time", "parameters": {"type": "object", "properties": {}}},
}
TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich and the time?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}},
        {"type": "function", "function": {"name": "get_time", "arguments": {}}},
    ]},
    {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21.5, \"sky\": \"☀\"}"},
    {"role": "tool", "name": "get_time", "content": "12:00"},
    {"role": "assistant", "content": "It is 21.5 °C and sunny; the time is 12:00."},
    {"role": "user", "content": "Thanks!"},
]
LLAMA_TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {"role": "assistant", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}},
    ]},
    {"role": "tool", "content": "{\"temp\": 21.5}"},
]

# family: template file, bos, eos, extra cases
FAMILIES = [
    ("llama2", "llama2.jinja", "<s>", "</s>", ["bad_order"]),
    ("llama3", "llama3.jinja", "<|begin_of_text|>", "<|eot_id|>", []),
    ("llama3.1", "llama3.1.jinja", "<|begin_of_text|>", "<|eot_id|>", ["llama_tools"]),
    ("mistral_v0.1", "mistral_v0.1.jinja", "<s>", "</s>", ["bad_order", "system_rejected"]),
    ("mistral_v0.2", "mistral_v0.2.jinja", "<s>", "</s>", ["bad_order"]),
    ("qwen2", "qwen2.jinja", "", "<|im_end|>", []),
    ("qwen2.5", "qwen2.5.jinja", "", "<|im_end|>", ["qwen_tools"]),
    ("smollm2", "smollm2.jinja", "", "<|im_end|>", []),
    ("chatml", "chatml.jinja", "", "<|im_end|>", []),
]


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # As transformers defines it (chat_template_utils._compile_jinja_template).
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise TemplateError(message)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source)


def render(template, messages, tools, add_generation_prompt, bos, eos):
    try:
        out = template.render(messages=messages, tools=tools, documents=None,
                              add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)
        return {"expected": out}
    except TemplateError as e:
        return {"error": str(e)}


def main():
    families = []
    for name, path, bos, eos, extras in FAMILIES:
        with open(os.path.join(DIR, path), encoding="utf-8") as f:
            template = compile_template(f.read())
        cases = []
        convs = [(k, v, None) for k, v in CONVERSATIONS.items()]
        if "bad_order" in extras:
            convs += [(k, v, None) for k, v in BAD_ORDER.items()]
        if "system_rejected" in extras:
            convs.append(("system_rejected", [SYSTEM, U1], None))
        if "qwen_tools" in extras:
            convs.append(("tools_no_system", [U1], [WEATHER_TOOL, TIME_TOOL]))
            convs.append(("tools_tool_calls", TOOL_CONVERSATION, [WEATHER_TOOL, TIME_TOOL]))
        if "llama_tools" in extras:
            convs.append(("tools_tool_call", LLAMA_TOOL_CONVERSATION, [WEATHER_TOOL]))
        for case_name, messages, tools in convs:
            for agp in (False, True):
                case = {"name": f"{case_name}/{'gen' if agp else 'nogen'}", "messages": messages,
                        "add_generation_prompt": agp}
                if tools is not None:
                    case["tools"] = tools
                case.update(render(template, messages, tools, agp, bos, eos))
                cases.append(case)
        families.append({"name": name, "template": path, "bos_token": bos, "eos_token": eos, "cases": cases})
    out = {
        "renderer": f"jinja2 {jinja2.__version__} ImmutableSandboxedEnvironment(trim_blocks=True, "
                    "lstrip_blocks=True), raise_exception and tojson as transformers defines them",
        "families": families,
    }
    with open(os.path.join(DIR, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    for fam in families:
        errors = sum("error" in c for c in fam["cases"])
        print(f"{fam['name']}: {len(fam['cases'])} cases ({errors} errors)")


if __name__ == "__main__":
    main()
