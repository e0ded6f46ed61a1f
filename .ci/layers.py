#!/usr/bin/env python3
"""The runtime's layering check: a module of `runtime/src` may import only from its own layer or a
lower one, and the top-level modules form no import cycle.

    python3 .ci/layers.py              # check runtime/src; exit 1 on a violation
    python3 .ci/layers.py --self-test  # show that the check fails on a tree that breaks the rules

An import is any path `crate::x...` in code (a `use` item, braces included, or a path written
inline); comments, doc links and unit tests (`#[cfg(test)]` modules, which may use the test
helpers of any layer) do not count. A name the crate root re-exports
(`pub use array::{Array, WeakArray}` in lib.rs) counts as its defining module, and an exported
`macro_rules!` as the module that defines it. The layers are the table below; README.md's
"Architecture" section draws the same picture.
"""

import os
import re
import sys
import tempfile

# Lowest first. Every top-level module of runtime/src must be listed.
LAYERS = [
    ("base", ["error", "dtype", "scalar", "layout", "device", "sync", "random", "ops_macros"]),
    ("storage backends", ["op", "cpu", "cuda", "storage", "memory"]),
    ("config", ["config"]),
    ("array", ["array", "kernel", "reduction_kernel", "raw_kernel"]),
    ("graph", ["graph", "macro_support"]),
    ("functions", ["functions"]),
    ("links", ["link"]),
    ("checks and entry points", ["gradient_check", "testing", "prelude", "lib"]),
]

STUBS = {"cuda_stub": "cuda"}  # files that stand in for a module under a cfg


def strip_comments(text):
    """Code without comments or string contents (so `"crate::x"` in a message is no import)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]) or text.startswith("'\\u{", i):
            j = text.find("'", i + 1)
            out.append("' '")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+([A-Za-z_][A-Za-z0-9_]*)\s*([;{])")


def without_tests(code, path, skipped):
    """The code without its `#[cfg(test)] mod x { .. }` blocks; the files of `#[cfg(test)] mod x;`
    go into `skipped`."""
    while True:
        m = TEST_MOD.search(code)
        if not m:
            return code
        if m.group(2) == ";":
            base = os.path.dirname(path)
            if os.path.basename(path) not in ("mod.rs", "lib.rs"):
                base = os.path.join(base, os.path.basename(path)[:-3])
            for f in (m.group(1) + ".rs", os.path.join(m.group(1), "mod.rs")):
                skipped.add(os.path.normpath(os.path.join(base, f)))
            code = code[: m.start()] + code[m.end():]
            continue
        depth, j = 0, m.end() - 1
        while j < len(code):
            depth += code[j] == "{"
            depth -= code[j] == "}"
            j += 1
            if depth == 0:
                break
        code = code[: m.start()] + code[j:]


def module_of(src, path):
    rel = os.path.relpath(path, src).replace(os.sep, "/")
    top = rel.split("/")[0]
    top = top[:-3] if top.endswith(".rs") else top
    return STUBS.get(top, top)


def split_top(group):
    """Splits `a, b::{c, d}, e` at its top-level commas."""
    parts, depth, cur = [], 0, ""
    for c in group:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    if cur.strip():
        parts.append(cur.strip())
    return parts


def imported_heads(code):
    """The first segment after `crate::` of every path in the code, and whether a `::` follows it
    (a leaf name may be a re-export, a segment followed by `::` is a module)."""
    heads = []
    for m in re.finditer(r"\bcrate::", code):
        rest = code[m.end():]
        if rest.startswith("{"):
            depth, j = 0, 0
            for j, c in enumerate(rest):
                depth += c == "{"
                depth -= c == "}"
                if depth == 0:
                    break
            for part in split_top(rest[1:j]):
                name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", part)
                if name:
                    heads.append((name.group(0), part[name.end():].lstrip().startswith("::")))
        else:
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", rest)
            if name:
                heads.append((name.group(0), rest[name.end():].lstrip().startswith("::")))
    return heads


def root_names(src, modules):
    """What each name at the crate root stands for: a module, a re-export, or something external."""
    lib = strip_comments(open(os.path.join(src, "lib.rs")).read())
    names = {}
    for m in re.finditer(r"pub\s+use\s+([^;]+);", lib):
        item = m.group(1).strip()
        head = item.split("::")[0].strip()
        if head not in modules:  # another crate's item (kusari_macros, kusari_kernels)
            for name in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", item.split(" as ")[-1] if " as " in item else item.split("::")[-1]):
                names[name] = None
            continue
        tail = item[len(head):].lstrip(":").strip()
        if tail.startswith("{"):
            for part in split_top(tail[1:-1]):
                alias = part.split(" as ")[-1].strip().split("::")[-1]
                names[alias] = head
        else:
            names[(tail.split(" as ")[-1]).split("::")[-1].strip()] = head
    return names


def exported_macros(src, files):
    macros = {}
    for path in files:
        text = open(path).read()
        for m in re.finditer(r"#\[macro_export\][^\n]*\n(?:\s*#\[[^\n]*\n)*\s*macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)", text):
            macros[m.group(1)] = module_of(src, path)
    return macros


def check(src, out=sys.stdout):
    files = sorted(
        os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")
    )
    layer_of = {m: i for i, (_, mods) in enumerate(LAYERS) for m in mods}
    modules = {module_of(src, p) for p in files}
    problems = []
    for m in sorted(modules - set(layer_of)):
        problems.append(f"module `{m}` is in no layer: add it to LAYERS in .ci/layers.py")
    names = root_names(src, modules)
    macros = exported_macros(src, files)
    edges, skipped, codes = {}, set(), {}
    for path in files:
        codes[path] = without_tests(strip_comments(open(path).read()), path, skipped)
    for path in files:
        if os.path.normpath(path) in skipped:
            continue
        here = module_of(src, path)
        code = codes[path]
        for head, is_path in imported_heads(code):
            if is_path and head in modules:
                there = head
            elif head in names:
                there = names[head]
            elif head in macros:
                there = macros[head]
            elif head in modules:
                there = head
            else:
                continue
            if there is None or there == here:
                continue
            edges.setdefault(here, {}).setdefault(there, set()).add(os.path.relpath(path, src))
    for here, targets in sorted(edges.items()):
        for there, where in sorted(targets.items()):
            if here in layer_of and there in layer_of and layer_of[there] > layer_of[here]:
                problems.append(
                    f"`{here}` ({LAYERS[layer_of[here]][0]}) imports `{there}` "
                    f"({LAYERS[layer_of[there]][0]}), a higher layer, in {', '.join(sorted(where))}"
                )
    # Cycles among top-level modules (within a layer; across layers the rule above catches them).
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for t in sorted(edges.get(m, {})):
            if state.get(t) == 1:
                cycle = stack[stack.index(t):] + [t]
                problems.append("import cycle: " + " -> ".join(cycle))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(modules):
        if m not in state:
            visit(m)
    for p in problems:
        print("layers: " + p, file=out)
    if not problems:
        print(f"layers: {len(files)} files in {len(modules)} modules import only downward", file=out)
    return not problems


def self_test():
    """The check must accept a well-layered tree and reject each kind of violation."""
    import io

    def tree(files):
        d = tempfile.mkdtemp()
        for name, text in files.items():
            p = os.path.join(d, name)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(text)
        return d

    lib = "mod array;\nmod cpu;\nmod functions;\npub use array::Array;\npub use kusari_macros::function_node;\n"
    good = {
        "lib.rs": lib,
        "cpu/mod.rs": "//! Uses [`crate::Array`] only in docs.\nfn f() { let s = \"crate::array\"; }\n",
        "array/mod.rs": "use crate::cpu::x;\npub struct Array;\n",
        "functions/mod.rs": "use crate::{function_node, Array};\n",
    }
    cases = {
        "good": (good, True),
        "upward use through a re-export": (dict(good, **{"cpu/mod.rs": "use crate::{Array};\n"}), False),
        "upward inline path": (dict(good, **{"cpu/mod.rs": "fn f() { crate::functions::g() }\n"}), False),
        "upward nested group": (dict(good, **{"cpu/mod.rs": "use crate::{x::y, array::{z, w}};\n"}), False),
        "module in no layer": (dict(good, **{"extra.rs": "\n"}), False),
        "unit tests may use any layer": (dict(good, **{
            "cpu/mod.rs": "#[cfg(test)]\nmod tests;\n#[cfg(test)]\nmod more {\n    use crate::Array;\n}\n",
            "cpu/tests.rs": "use crate::functions::f;\n",
        }), True),
        "code after a test block counts": (dict(good, **{
            "cpu/mod.rs": "#[cfg(test)]\nmod more { fn f() {} }\nuse crate::Array;\n",
        }), False),
    }
    ok = True
    for name, (files, expect) in cases.items():
        buf = io.StringIO()
        got = check(tree(files), buf)
        if got != expect:
            ok = False
            print(f"self-test `{name}`: expected {'pass' if expect else 'fail'}, got:\n{buf.getvalue()}")
    print("layers self-test: " + ("ok" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    if "--self-test" in sys.argv:
        sys.exit(0 if self_test() else 1)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtime", "src")
    sys.exit(0 if check(os.path.normpath(root)) else 1)
