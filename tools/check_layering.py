#!/usr/bin/env python3
"""make layering: every `#include "..."` in src/*/*.{c,h,cu,cuh} points down the folder order, and no two modules use
each other (a module = X.c or X.cu + X.h or X.cuh in one folder; module A uses B when A's files include B's header).

The folder order below is the one place the layering is written; README.md ("Layout") repeats it in words.
A folder may include its own headers and those of the folders ALLOWED lists for it, nothing else.
Calls count as uses too: module A uses B when A.c calls (or names) a function that B.c defines without `static`,
so two files whose functions call each other are a cycle even when one of them has no header of its own.
Usage: tools/check_layering.py [ROOT]   (ROOT holds src/; default: the repository of this script)
Exit 0 when clean; 1 with one `file:line: what is wrong` line per problem."""
import os
import re
import sys

# The allowed folder matrix: each folder and the folders it may include (besides its own). It is written here once;
# README.md ("Layout") repeats it in words and docs/design.md draws it. It must itself be free of cycles (checked).
# model/ and zero/ do not know each other: the model computes from resolved weights (model/weights.h), the runtime
# owns buffers and collectives; train/ joins them.
ALLOWED = {
    "core": [],
    "io": ["core"],
    "kernels": ["core"],
    "cuda": ["core", "kernels"],   # the CUDA backend (make CUDA=1): behind the seam; only cli/ opens it
    "lr": ["core"],
    "tokenizer": ["core", "io"],
    "audio": ["core", "io"],
    "dataset": ["core", "io", "tokenizer", "audio"],
    "model": ["core", "io", "kernels", "audio"],
    "zero": ["core", "io", "kernels"],
    "persist": ["core", "io", "kernels", "dataset", "model", "zero"],
    "session": ["core", "io", "kernels", "audio", "dataset", "model", "zero", "persist"],
    "train": ["core", "io", "kernels", "lr", "tokenizer", "audio", "dataset", "model", "zero", "persist", "session"],
    "infer": ["core", "io", "kernels", "tokenizer", "audio", "dataset", "model", "zero", "persist", "session"],
    "cli": ["core", "io", "kernels", "cuda", "lr", "tokenizer", "audio", "dataset", "model", "zero", "persist", "session",
            "train", "infer"],
}


def matrix_order():
    """the folders lowest first (a topological order of ALLOWED); raises ValueError on a cycle in the matrix"""
    order, left = [], dict(ALLOWED)
    while left:
        ready = sorted(f for f, uses in left.items() if all(u in order for u in uses))
        if not ready:
            raise ValueError("ALLOWED has a cycle among: " + ", ".join(sorted(left)))
        order += ready
        for f in ready:
            del left[f]
    return order


# Temporary exceptions: exact (including file, included header) pairs that break the order today, each with the
# reason and the move that removes it (issue 11). Only these pairs are let through; a NEW wrong include fails.
# An exception that no longer occurs fails too: delete it from this list when its include is gone.
EXCEPTIONS = {}

# Private headers that belong to another module (one module split over several files), "folder/stem" -> module.
PARTS = {
    "tokenizer/tok_internal": "tokenizer/tokenizer",   # the tokenizer's internals, shared by tokenizer.c and tok_*.c
    "infer/gen_seq": "infer/infer",   # generation's per-sequence steps (infer.c), shared with infer_batch.c
    # the fused attention is one module in three .cu files (CUDA cores, tensor cores, decode) sharing
    # cu_attention_tc.h: cu_attention.cu picks the path and the paths share its head sum
    "cuda/cu_attention_tc": "cuda/cu_attention",
    "cuda/cu_attention_decode": "cuda/cu_attention",
}
# the files of the tokenizer module (tokenizer.c + tok_*.c share tok_internal.h and call each other freely)
PARTS.update({"tokenizer/" + p: "tokenizer/tokenizer" for p in ("tok_bpe", "tok_encode", "tok_load", "tok_maps",
                                                                 "tok_regex")})

# Temporary exceptions to the cycle rule: the exact set of modules of a cycle, with its reason and who removes it.
# A cycle not listed fails; a listed one that no longer occurs fails too (delete it here).
CYCLE_EXCEPTIONS = {}

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# comments, string and character literals, and preprocessor lines (with their continuations): not code for calls
NOT_CODE = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|^[ \t]*#(?:[^\n]*\\\n)*[^\n]*',
                      re.S | re.M)
DEF_HEAD = re.compile(r'(\w+)\s*\([^{};=]*\)\s*$')   # what precedes the `{` of a function body
IDENT = re.compile(r'[A-Za-z_]\w*')


SOURCE_EXT = (".c", ".h", ".cu", ".cuh")   # C, and CUDA's kernels (src/cuda/*.cu) and their device headers
CODE_EXT = (".c", ".cu")                   # the files that define and call functions


def stem(name):
    """the module part of a file name: X of X.c, X.h, X.cu, X.cuh"""
    return os.path.splitext(name)[0]


def sources(root):
    src = os.path.join(root, "src")
    for folder in sorted(os.listdir(src)):
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(SOURCE_EXT):
                yield folder, name


def includes(root, folder, name):
    """(line number, header path relative to src/) of each quoted include"""
    with open(os.path.join(root, "src", folder, name), encoding="utf-8", errors="replace") as f:
        for no, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                inc = m.group(1)
                yield no, inc if "/" in inc else folder + "/" + inc


def code_of(root, folder, name):
    """the file's text without comments, literals and preprocessor lines"""
    with open(os.path.join(root, "src", folder, name), encoding="utf-8", errors="replace") as f:
        return NOT_CODE.sub(lambda m: '""' if m.group(0)[:1] in "\"'" else " ", f.read())


def exported(code):
    """the functions code defines without `static` (a `NAME(...) {` at brace depth 0)"""
    out, depth, start = set(), 0, 0
    for m in re.finditer(r"[{};]", code):
        c = m.group(0)
        if depth == 0 and c == "{":
            head = code[start:m.start()]
            h = DEF_HEAD.search(head)
            if h and not re.match(r"\s*static\b", head):
                out.add(h.group(1))
        depth += {"{": 1, "}": -1, ";": 0}[c]
        if depth == 0 and c in ";}":
            start = m.end()
    return out


def add_calls(root, graph):
    """call edges: a .c file naming a function that another module's .c defines (first use, as "file:line")"""
    code, owner = {}, {}
    for folder, name in sources(root):
        if name.endswith(CODE_EXT):
            mod = "%s/%s" % (folder, stem(name))
            code[(folder, name)] = code_of(root, folder, name)
            for fn in exported(code[(folder, name)]):
                owner[fn] = mod
    for (folder, name), text in code.items():
        mod = PARTS.get("%s/%s" % (folder, stem(name)), "%s/%s" % (folder, stem(name)))
        for m in IDENT.finditer(text):
            dep = owner.get(m.group(0))
            if dep and dep != mod and dep not in graph.setdefault(mod, {}):
                graph[mod][dep] = "src/%s/%s:%d (calls %s)" % (folder, name, text.count("\n", 0, m.start()) + 1,
                                                                m.group(0))


def find_cycle(graph, scc):
    """one cycle through the strongly connected component scc: a list of modules, first == last"""
    start = min(scc)
    prev, queue = {start: None}, [start]
    while queue:   # breadth-first inside scc from start until an edge back to start
        a = queue.pop(0)
        for b in sorted(graph.get(a, {})):
            if b == start:
                path = [a]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if b in scc and b not in prev:
                prev[b] = a
                queue.append(b)
    return [start, start]


def components(graph):
    """strongly connected components of more than one module (Tarjan, iterative)"""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = n[0]; n[0] += 1; stack.append(root); on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]; n[0] += 1; stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop(); on.discard(w); comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def check(root):
    problems, used = [], set()
    try:
        matrix_order()
    except ValueError as e:
        return ["tools/check_layering.py: %s" % e]
    graph = {}   # module "folder/stem" -> {used module: "file:line"}
    for folder, name in sources(root):
        path = "src/%s/%s" % (folder, name)
        mod = PARTS.get("%s/%s" % (folder, stem(name)), "%s/%s" % (folder, stem(name)))
        graph.setdefault(mod, {})
        for no, inc in includes(root, folder, name):
            where = "%s:%d" % (path, no)
            to = inc.split("/")[0]
            if not os.path.isfile(os.path.join(root, "src", inc)):
                problems.append('%s: #include "%s": no such header under src/' % (where, inc))
                continue
            if to not in ALLOWED or folder not in ALLOWED:
                bad = to if to not in ALLOWED else folder
                problems.append("%s: folder %s/ is not in ALLOWED of tools/check_layering.py (add it with the "
                                "folders it may use)" % (where, bad))
                continue
            if to != folder and to not in ALLOWED[folder]:
                if (path, inc) in EXCEPTIONS:
                    used.add((path, inc))
                else:
                    problems.append('%s: #include "%s": %s -> %s is not allowed (%s/ may use: %s)'
                                    % (where, inc, folder, to, folder, ", ".join(ALLOWED[folder]) or "nothing"))
            dep = stem(inc) if inc.endswith((".h", ".cuh")) else inc
            dep = PARTS.get(dep, dep)
            if dep != mod:
                graph[mod].setdefault(dep, where)
    for pair in sorted(set(EXCEPTIONS) - used):
        problems.append('%s: exception for #include "%s" no longer needed: delete it from EXCEPTIONS in '
                        "tools/check_layering.py" % pair)
    add_calls(root, graph)
    cycles = components(graph)
    for comp in sorted(set(CYCLE_EXCEPTIONS) - {frozenset(c) for c in cycles}):
        problems.append("tools/check_layering.py: cycle exception for %s no longer needed: delete it from "
                        "CYCLE_EXCEPTIONS" % " <-> ".join(sorted(comp)))
    for comp in cycles:
        if frozenset(comp) in CYCLE_EXCEPTIONS:
            continue
        cyc = find_cycle(graph, comp)
        arrows = ", ".join("%s -> %s (%s)" % (a, b, graph[a][b]) for a, b in zip(cyc, cyc[1:]))
        kind = "call" if any("(calls " in graph[a][b] for a, b in zip(cyc, cyc[1:])) else "include"
        problems.append("%s: %s cycle between modules %s: %s" % (graph[cyc[0]][cyc[1]], kind,
                                                                 " <-> ".join(sorted(comp)), arrows))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("layering: %d problem(s); the order and its exceptions are in tools/check_layering.py" % len(problems))
        return 1
    print("layering: ok (%s)" % " < ".join(matrix_order()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
