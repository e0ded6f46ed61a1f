#!/usr/bin/env python3
"""The runtime's layering check: a module of `runtime/src` may import only from its own layer or a
lower one, the top-level modules form no import cycle, and no two files import each other
(directly or through others).

    python3 .ci/layers.py              # check runtime/src; exit 1 on a violation
    python3 .ci/layers.py --self-test  # show that the check fails on a tree that breaks the rules

An import is any path `crate::x...` in code (a `use` item, braces included, or a path written
inline); comments, doc links and unit tests (`#[cfg(test)]` modules, which may use the test
helpers of any layer) do not count. A name the crate root re-exports
(`pub use array::{Array, WeakArray}` in lib.rs) counts as its defining module, and an exported
`macro_rules!` as the module that defines it. The layers are the table below; ARCHITECTURE.md
draws the same picture. Between files, a path counts as an import of the file that defines what
it names (re-exports followed), so a module's `mod.rs` can be a facade of re-exports that its
children import through, but a child cannot use what its parent defines while the parent uses
the child.
"""

import os
import re
import sys
import tempfile

# Lowest first. Every top-level module of runtime/src must be listed.
LAYERS = [
    ("base", ["env", "error", "dtype", "scalar", "layout", "device", "sync", "random", "ops_macros", "window"]),
    ("storage backends", ["op", "builtin_kernels", "launch_plan", "cpu", "cuda", "storage", "memory"]),
    ("config", ["config"]),
    ("array", ["array", "elementwise_kernel", "reduction_kernel", "raw_kernel", "nccl"]),
    ("graph", ["graph"]),
    ("functions", ["functions", "macro_support"]),
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


def block_end(code, open_brace):
    """The index just past the `}` that closes the `{` at `open_brace`."""
    depth, j = 0, open_brace
    while j < len(code):
        depth += code[j] == "{"
        depth -= code[j] == "}"
        j += 1
        if depth == 0:
            break
    return j


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
        code = code[: m.start()] + code[block_end(code, m.end() - 1):]


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
    for cycle in file_cycles(src):
        problems.append("import cycle between files: " + cycle)
    for p in problems:
        print("layers: " + p, file=out)
    if not problems:
        print(
            f"layers: {len(files)} files in {len(modules)} modules import only downward, "
            "and no files import each other in a cycle",
            file=out,
        )
    return not problems


# ---------------------------------------------------------------------------------------------
# File-level import cycles: no two files of runtime/src import each other, directly or through
# others (the switch of a backend and its drivers included). A file imports another when one of
# its paths (`use` trees, and `crate::`/`super::`/`self::` or child-module paths written inline)
# names an item that file defines; a name a module re-exports or imports (`use`) is followed to
# the file that defines it, so `use super::Foo` through a parent's `pub use sibling::Foo` is an
# import of the sibling. Declaring a child (`mod x;`) imports nothing.
# ---------------------------------------------------------------------------------------------

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def module_files(src, stub=False):
    """Module path (a tuple) -> file, for every file of the crate. With `stub`, the files in
    STUBS stand in for their modules (the build without the feature)."""
    mods = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(d, f)
            rel = os.path.relpath(path, src).replace(os.sep, "/")[:-3].split("/")
            if rel[-1] in ("mod", "lib"):
                rel = rel[:-1]
            top = rel[0] if rel else None
            if top in STUBS:
                if stub:
                    mods[(STUBS[top],) + tuple(rel[1:])] = path
                continue
            key = tuple(rel)
            if stub and key and key[0] in STUBS.values():
                continue
            mods[key] = path
    return mods


def use_trees(code):
    """Every `use` item of `code` (`pub`/`pub(crate)`/plain) as full paths: lists of segments,
    the last possibly `*`; with the name each is bound to (`as` aliases applied)."""
    out = []
    for m in re.finditer(r"(?:\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]+);", code):
        def expand(prefix, tree):
            tree = tree.strip()
            if not tree:
                return
            brace = tree.find("{")
            if brace >= 0 and tree.rstrip().endswith("}") and "::" in tree[:brace] + "::" :
                head = [p for p in tree[:brace].strip().rstrip(":").split("::") if p.strip()]
                for part in split_top(tree[brace + 1: tree.rstrip().rfind("}")]):
                    expand(prefix + [h.strip() for h in head], part)
                return
            name = None
            if " as " in tree:
                tree, name = [t.strip() for t in tree.split(" as ", 1)]
            segs = [t.strip() for t in tree.split("::") if t.strip()]
            if segs == ["self"]:
                segs = []
            elif segs and segs[-1] == "self":
                segs = segs[:-1]
            full = prefix + segs
            if not full:
                return
            out.append((full, name or full[-1]))
        expand([], m.group(1))
    return out


def inline_paths(code):
    """Paths written in code (outside `use` items) that start with `crate`, `super`, `self` or
    any identifier followed by `::`."""
    body = re.sub(r"(?:\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+[^;]+;", " ", code)
    out = []
    for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:" + IDENT + r"\s*::\s*)+" + IDENT + ")", body):
        out.append([s.strip() for s in m.group(1).split("::")])
    return out


INLINE_MOD = re.compile(r"\bmod\s+(" + IDENT + r")\s*\{")


def inline_modules(code):
    """`code` without its inline `mod x { .. }` blocks, and those blocks as (name, body) pairs:
    paths written inside `mod x { .. }` are relative to `x` (`super::` is the file's module)."""
    blocks = []
    while True:
        m = INLINE_MOD.search(code)
        if not m:
            return code, blocks
        j = block_end(code, m.end() - 1)
        blocks.append((m.group(1), code[m.end(): j - 1]))
        code = code[: m.start()] + code[j:]


def file_graph(src, stub=False):
    mods = module_files(src, stub)
    skipped, codes = set(), {}
    for key, path in mods.items():
        codes[key] = without_tests(strip_comments(open(path).read()), path, skipped)
    live = {k: p for k, p in mods.items() if os.path.normpath(p) not in skipped}
    inline = {}
    for k in live:
        codes[k], inline[k] = inline_modules(codes[k])
    uses = {k: {} for k in live}
    for k in live:
        for full, name in use_trees(codes[k]):
            if full[-1] != "*":
                uses[k][name] = full

    def absolute(here, segs):
        """`segs` from module `here` as an absolute module path plus the rest, or None."""
        segs = list(segs)
        if not segs:
            return None
        if segs[0] == "crate":
            return [], segs[1:]
        if segs[0] in ("super", "self"):
            base = list(here)
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    if not base:
                        return None
                    base = base[:-1]
                segs = segs[1:]
            return base, segs
        if tuple(here) + (segs[0],) in mods:
            return list(here), segs
        return None

    def resolve(here, segs, depth=0):
        """The file that defines what `segs` (written in module `here`) names, or None."""
        if depth > 20:
            return None
        start = absolute(here, segs)
        if start is None:
            return None
        base, rest = start
        cur = tuple(base)
        while rest and cur + (rest[0],) in mods:
            cur, rest = cur + (rest[0],), rest[1:]
        if cur not in mods:
            return None
        if not rest:
            return mods[cur]
        alias = uses.get(cur, {}).get(rest[0])
        if alias is not None and (alias[0] in ("crate", "super", "self") or tuple(cur) + (alias[0],) in mods):
            got = resolve(cur, alias + rest[1:], depth + 1)
            return got if got is not None else mods[cur]
        if alias is not None:
            return None  # another crate's item
        return mods[cur]

    edges = {}

    def add_edges(here, path, code, blocks):
        paths = [full for full, _ in use_trees(code)] + inline_paths(code)
        for segs in paths:
            segs = [s for s in segs if s != "*"]
            target = resolve(here, segs)
            if target is None or target == path or os.path.normpath(target) in skipped:
                continue
            edges.setdefault(path, set()).add(target)
        for name, body in blocks:
            add_edges(tuple(here) + (name,), path, *inline_modules(body))

    for k, path in live.items():
        add_edges(k, path, codes[k], inline[k])
    return live, edges


def file_cycles(src):
    """Import cycles between files, in the build with every feature and in the stub build."""
    found = []
    for stub in (False, True):
        live, edges = file_graph(src, stub)
        state, stack = {}, []

        def visit(f):
            state[f] = 1
            stack.append(f)
            for t in sorted(edges.get(f, ())):
                if state.get(t) == 1:
                    cycle = stack[stack.index(t):] + [t]
                    text = " -> ".join(os.path.relpath(c, src) for c in cycle)
                    if text not in found:
                        found.append(text)
                elif t not in state:
                    visit(t)
            stack.pop()
            state[f] = 2

        for f in sorted(live.values()):
            if f not in state:
                visit(f)
    return found


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
        # File-level cycles, inside one top-level module.
        "a facade re-exporting its children, which use each other's items through it": (dict(good, **{
            "cpu/mod.rs": "mod a;\nmod b;\npub use a::A;\npub(crate) use b::B;\n",
            "cpu/a.rs": "use super::B;\npub struct A(B);\n",
            "cpu/b.rs": "pub struct B;\n",
        }), True),
        "a child using what its parent defines while the parent uses the child": (dict(good, **{
            "cpu/mod.rs": "mod a;\npub struct P;\nfn f() { a::g() }\n",
            "cpu/a.rs": "use super::P;\npub fn g() {}\n",
        }), False),
        "a switch and the driver below it importing each other": (dict(good, **{
            "cpu/mod.rs": "mod driver;\n",
            "cpu/driver/mod.rs": "mod emu;\npub(crate) type Ptr = u64;\nfn open() { emu::open() }\n",
            "cpu/driver/emu.rs": "use crate::cpu::driver::Ptr;\npub fn open() {}\n",
        }), False),
        "the same, the shared types in a leaf": (dict(good, **{
            "cpu/mod.rs": "mod driver;\n",
            "cpu/driver/mod.rs": "mod emu;\nmod types;\npub(crate) use types::Ptr;\nfn open() { emu::open() }\n",
            "cpu/driver/types.rs": "pub(crate) type Ptr = u64;\n",
            "cpu/driver/emu.rs": "use crate::cpu::driver::types::Ptr;\npub fn open() {}\n",
        }), True),
        "an inline module using its file's items through `super::`": (dict(good, **{
            "cpu/mod.rs": "mod a;\npub(crate) use a::f;\n",
            "cpu/a.rs": "pub fn f() { x::h() }\nfn g() {}\nmod x {\n    pub fn h() { super::g() }\n}\n",
        }), True),
        "an inline module reaching the parent file with `super::super::`": (dict(good, **{
            "cpu/mod.rs": "mod a;\npub struct P;\nfn f() { a::g() }\n",
            "cpu/a.rs": "pub fn g() {}\nmod x {\n    fn h() { super::super::P; }\n}\n",
        }), False),
        "siblings importing each other": (dict(good, **{
            "cpu/mod.rs": "mod a;\nmod b;\n",
            "cpu/a.rs": "pub fn f() { super::b::g() }\n",
            "cpu/b.rs": "use super::a::f;\npub fn g() {}\n",
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
