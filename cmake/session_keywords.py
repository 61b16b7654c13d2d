"""Writes the C side of the options table: the keywords of `_core.Session` as X-macro lists.

    python session_keywords.py magics/giltracer/options.py OUT.h

options.py (the one table) says, for each keyword the API passes to the C core, its C kind
(`Option.c`); this writes them into a header that core/py/session.h expands into the
fields of `struct gt_session_opts` and core/py/module.c into the keyword list, the
converters and the defaults of `Session.__init__`. The build runs it (CMakeLists.txt), so
the table and the C side cannot disagree. It imports options.py alone (standard library
only), not the package, which needs the extension this builds.
"""

import importlib.util
import re
import sys

# kind -> C type of the field
C_TYPES = {"bool": "int", "int": "int", "u64": "uint64_t", "object": "PyObject *",
           "str": "const char *", "choice": "int"}


def load(path):
    spec = importlib.util.spec_from_file_location("giltracer_options_table", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def identifier(text):
    name = re.sub(r"\W", "_", text).upper()
    if not re.match(r"^[A-Z_][A-Z0-9_]*$", name):
        raise SystemExit(f"session_keywords: {text!r} makes no C name")
    return name


def c_default(o):
    value = o.c_default
    if o.c == "choice":
        return f"GT_{identifier(o.keyword)}_{identifier(o.choices[value])}"
    if o.c == "bool":
        return "1" if value else "0"
    return "NULL" if o.c in ("object", "str") else "0"


def header(table):
    keywords = table.session_keywords()
    seen = set()
    for o in keywords:
        if o.c not in C_TYPES or set(C_TYPES) != set(table.C_KINDS):
            raise SystemExit(f"session_keywords: {o.keyword}: C kind {o.c!r} is none of "
                             f"{', '.join(C_TYPES)}")
        if o.keyword in seen or not re.match(r"^[a-z_][a-z0-9_]*$", o.keyword or ""):
            raise SystemExit(f"session_keywords: keyword {o.keyword!r} twice or not a C name")
        if o.c == "choice" and not o.choices:
            raise SystemExit(f"session_keywords: {o.keyword}: a choice without choices")
        seen.add(o.keyword)
    out = ["/* SPDX-License-Identifier: MIT */",
           "/* Generated at build time by cmake/session_keywords.py from",
           " * magics/giltracer/options.py (the one table of options): edit the table. */",
           "#ifndef GT_SESSION_KEYWORDS_H", "#define GT_SESSION_KEYWORDS_H", ""]
    for o in keywords:
        if o.c == "choice":
            names = ", ".join(f"GT_{identifier(o.keyword)}_{identifier(c)}" for c in o.choices)
            out.append(f"enum gt_{o.keyword}_choice {{ {names} }};")
    out += ["", "/* X(keyword, C type, kind, C default), one for each keyword of _core.Session",
            " * (what each means: its row in options.py). The kind names the converter",
            " * (module.c): a choice's is its keyword's. */",
            "#define GT_SESSION_KEYWORDS(X) \\"]
    for o in keywords:
        kind = o.keyword if o.c == "choice" else o.c
        out.append(f"    X({o.keyword}, {C_TYPES[o.c]}, {kind}, {c_default(o)}) \\")
    out += ["", "/* X(keyword, its choices, ...): the keywords of kind choice, in enum order. */",
            "#define GT_SESSION_CHOICES(X) \\"]
    for o in keywords:
        if o.c == "choice":
            quoted = ", ".join('"' + c + '"' for c in o.choices)
            out.append(f"    X({o.keyword}, {quoted}) \\")
    out += ["", "#endif /* GT_SESSION_KEYWORDS_H */", ""]
    return "\n".join(out)


def main(argv):
    if len(argv) != 3:
        raise SystemExit("usage: session_keywords.py OPTIONS.py OUT.h")
    text = header(load(argv[1]))
    with open(argv[2], "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv)
