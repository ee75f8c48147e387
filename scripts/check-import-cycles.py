#!/usr/bin/env python3
"""Fails when a Rust source file of core/src or worker/src uses, directly or through others, a
file that uses it back (`make test` runs it). A file's uses are the `crate::` and `super::` paths
it names anywhere in its code outside items marked `#[cfg(test)]` (comments and strings are
read past as the compiler reads them), and the paths through the modules it declares itself
(`mod name;` then `name::...`), each resolved to the longest module path that is a file.

Usage: scripts/check-import-cycles.py [ROOT ...]   (default: core/src worker/src)
"""
import os
import re
import sys

PATH = r"[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*"


def module_of(root, path):
    """`http/compat/mod.rs` -> ("http", "compat"); `lib.rs` -> ()."""
    parts = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def code_only(text):
    """`text` with its comments, strings and character literals blanked (each becomes `""` or a
    space), read token by token as the compiler reads them: a `//` inside a string, a quote
    inside a character literal or a raw string, a nested block comment do not throw it off, so
    every path written in code stays visible, however late in the file."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif raw := re.match(r'b?r(#*)"', text[i:]):
            close = '"' + raw.group(1)
            end = text.find(close, i + raw.end())
            i = n if end < 0 else end + len(close)
            out.append('""')
        elif ch == '"' or text.startswith('b"', i):
            i += 1 if ch == '"' else 2
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif char := re.match(r"b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]{1,6}\}|.)|[^\\'\n])'", text[i:]):
            # A character literal; a lone quote (a lifetime, `'a`) is kept as code.
            i += char.end()
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def without_tests(code):
    """`code` (see `code_only`) without what is marked `#[cfg(test)]`: what a test module or
    helper uses is not the file's. The marked thing ends at a `;` outside brackets, at the brace
    closing its body, or, for a field, a variant or an argument, at the `,` or closing bracket
    after it."""
    while (mark := code.find("#[cfg(test)]")) >= 0:
        end, depth, angles, opened_body = mark + len("#[cfg(test)]"), 0, 0, False
        while end < len(code):
            ch = code[end]
            # Generics' angle brackets hold commas too (`impl<A, B>`); an arrow is no bracket.
            if depth == 0 and ch == "<":
                angles += 1
            elif depth == 0 and ch == ">" and code[end - 1] not in "-=" and angles > 0:
                angles -= 1
            elif ch in "([{":
                depth += 1
                opened_body |= ch == "{" and depth == 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
                if depth == 0 and ch == "}" and opened_body:
                    end += 1
                    break
            elif depth == 0 and ch == ";" or (depth == 0 and angles == 0 and ch == ","):
                end += ch == ";"
                break
            end += 1
        code = code[:mark] + code[end:]
    return code


def without_tests_and_comments(text):
    return without_tests(code_only(text))


def expand_use(prefix, tree):
    """The paths a `use` tree names: `a::{b, c::{d}}` -> a::b, a::c::d."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        path = tree.split(" as ")[0].strip()
        return [prefix + [p for p in path.split("::") if p]]
    head = [p for p in tree[:brace].split("::") if p]
    inner, depth, item, items = tree[brace + 1 : tree.rfind("}")], 0, "", []
    for ch in inner:
        depth += ch == "{"
        depth -= ch == "}"
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    items.append(item)
    out = []
    for it in items:
        if it.strip() and it.strip() != "self":
            out += expand_use(prefix + head, it)
        elif it.strip() == "self":
            out.append(prefix + head)
    return out


def uses(module, text):
    """The module paths (absolute) that `text`, the source of `module`, names. `super` is the
    module's parent, whether it is a directory's `mod.rs` or a file; a module a file declares
    (`mod name;`) sits under that file's own module."""
    parent, here = list(module[:-1]), list(module)
    own = re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_0-9]+)\s*;", text, re.M)
    found = []
    for tree in re.findall(r"\buse\s+([^;]+);", text):
        for path in expand_use([], " ".join(tree.split())):
            if path and path[0] == "crate":
                found.append(path[1:])
            elif path and path[0] == "super":
                found.append(parent + path[1:])
            elif path and path[0] in own:
                found.append(here + path)
    for base, rest in re.findall(r"\b(crate|super)::(" + PATH + ")", text):
        found.append((parent if base == "super" else []) + rest.split("::"))
    for name in own:
        for rest in re.findall(r"(?<![:\w])" + name + r"::(" + PATH + ")", text):
            found.append(here + [name] + rest.split("::"))
    return found


def cycles(root):
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                files[module_of(root, path)] = path
    graph = {module: set() for module in files}
    for module, path in files.items():
        with open(path, encoding="utf-8") as source:
            text = without_tests_and_comments(source.read())
        for target in uses(module, text):
            for length in range(len(target), 0, -1):
                candidate = tuple(target[:length])
                if candidate in files:
                    if candidate != module and candidate != ():
                        graph[module].add(candidate)
                    break
    # Strongly connected components (Tarjan), iteratively.
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(start):
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(files[m] for m in component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def main():
    roots = sys.argv[1:] or ["core/src", "worker/src"]
    circles = [c for root in roots for c in cycles(root)]
    for circle in circles:
        print("[cycles] these files use each other:", ", ".join(circle))
    if circles:
        sys.exit(1)
    print(f"[cycles] no file uses one that uses it back ({', '.join(roots)})")


if __name__ == "__main__":
    main()
