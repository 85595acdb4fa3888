#!/usr/bin/env python3
"""Structure figures of the server crate (issue 47), printed one per line.

    python3 bench/structure.py [REPO]

1. mirrored backend lines: of the non-comment lines of each server/src/store/sqlite/X.rs,
   those that also stand in server/src/store/postgres/X.rs (`$n` and `?` read as one);
2. top-level modules of server/src in import loops (strongly connected components of the
   graph of `crate::<module>` uses outside `#[cfg(test)] mod tests`);
3. `state.store` uses in server/src/http;
4. doc-comment lines (`///`, `//!`) per code line in server/src, and doc blocks of 15+ lines;
5. `spawn_local(` calls and Leptos data primitives in app/src.
"""
import collections
import glob
import os
import re
import sys

os.chdir(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)) + "/..")


def code_lines(path):
    return [l.strip() for l in open(path) if l.strip() and not l.strip().startswith("//")]


# 1. Mirrored backend lines.
total = mirrored = 0
for sqlite in sorted(glob.glob("server/src/store/sqlite/*.rs")):
    postgres = sqlite.replace("/sqlite/", "/postgres/")
    if not os.path.exists(postgres):
        continue
    norm = lambda l: re.sub(r"\$\d+", "?", l)
    theirs = collections.Counter(norm(l) for l in code_lines(postgres))
    for line in map(norm, code_lines(sqlite)):
        total += 1
        if theirs[line] > 0:
            theirs[line] -= 1
            mirrored += 1
print(f"1. backend lines mirrored: {mirrored}/{total} = {mirrored / max(total, 1):.0%}")


# 2. Import loops among top-level modules.
def used_modules(text, modules):
    found = set()
    for m in re.finditer(r"\buse\s+crate::", text):
        i = m.end()
        if text[i] != "{":
            found.add(re.match(r"\w+", text[i:]).group(0))
            continue
        depth, start, j = 0, True, i
        while j < len(text):
            ch = text[j]
            if ch == "{":
                depth += 1
                start = depth == 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    break
            elif ch == "," and depth == 1:
                start = True
            elif depth == 1 and start and (ch.isalnum() or ch == "_"):
                word = re.match(r"\w+", text[j:]).group(0)
                found.add(word)
                start = False
                j += len(word)
                continue
            j += 1
    found |= set(re.findall(r"(?<!use )\bcrate::(\w+)", text))
    return found & modules


modules = {f[:-3] if f.endswith(".rs") else f for f in os.listdir("server/src")} - {"main", "lib"}
edges = {}
for module in modules:
    files = glob.glob(f"server/src/{module}/**/*.rs", recursive=True)
    files += [f"server/src/{module}.rs"] if os.path.exists(f"server/src/{module}.rs") else []
    used = set()
    for f in files:
        text = open(f).read().split("#[cfg(test)]\nmod tests")[0]
        text = "\n".join(l for l in text.split("\n") if not l.strip().startswith("//"))
        used |= used_modules(text, modules)
    edges[module] = used - {module}
index, low, stack, on, loops, counter = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10_000)


def visit(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w)
            low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        component = []
        while True:
            w = stack.pop()
            on.discard(w)
            component.append(w)
            if w == v:
                break
        if len(component) > 1:
            loops.append(sorted(component))


for v in sorted(modules):
    if v not in index:
        visit(v)
print(f"2. top-level modules in import loops: {sum(map(len, loops))} {loops}")

# 3. Handlers reaching the store.
uses = sum(len(re.findall(r"state\s*\.store\b", open(f).read()))
           for f in glob.glob("server/src/http/**/*.rs", recursive=True))
print(f"3. state.store in server/src/http: {uses}")

# 4. Doc density.
doc = code = blocks = 0
for f in glob.glob("server/src/**/*.rs", recursive=True):
    run = 0
    for line in list(open(f)) + [""]:
        s = line.strip()
        if s.startswith("///") or s.startswith("//!"):
            doc += 1
            run += 1
            continue
        blocks += run >= 15
        run = 0
        code += bool(s) and not s.startswith("//")
print(f"4. doc lines per code line in server/src: {doc}/{code} = {doc / code:.3f}; "
      f"doc blocks of 15+ lines: {blocks}")

# 5. Dashboard data primitives.
app = [open(f).read() for f in glob.glob("app/src/**/*.rs", recursive=True)]
counts = {k: sum(t.count(k) for t in app)
          for k in ["spawn_local(", "LocalResource", "Resource::", "Action::", "<Suspense", "<Transition"]}
print("5. app/src: " + ", ".join(f"{k.strip('(<:')} {v}" for k, v in counts.items()))
