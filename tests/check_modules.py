#!/usr/bin/env python3
"""The modules of src/ and how they depend on each other.

Two rules, each a test:
  layers   a file includes only headers of its own layer or of the layers
           under it: base <- model <- kernels, grammar <- pipeline (the top of src/)
           <- front <- cli, serve, api (the front-ends never include each
           other, but for the command's main including serve/run_serve.h).
  map      the folders of src/ are exactly LAYERS' (a new folder fails
           until it has a layer), and the Makefile's LIB_DIRS (what
           libgpt.a holds, what check_library.sh reads) are exactly the
           folders of the library's layers, base to pipeline.
  calls    a module calls only modules of its own layer or under it; the
           one call between cli and serve is the command's main starting
           `gpt serve` (cli/main -> serve/serve).
  headers  a module calls another's function (or reads its data) only
           through a header that both include (directly or through
           another header): a prototype written in the caller alone, or
           in a header the definition never sees, would compile after
           the definition changed and break at run time.
  messages a front-end's message on stderr (a string that starts "gpt",
           written with fprintf, vfprintf or fputs to stderr) is written
           by front/report.c alone: every front-end reports the same way.
  circles  no circle of calls between modules. A module is a .c file
           without its _avx2 / _avx512 / _scalar / _kernels suffix; module
           A calls module B when A's object file refers to a symbol B's
           defines (nm). A circle A -> B -> ... -> A fails.

Usage: check_modules.py BUILD_DIR. Prints "check_modules: N passed, M failed".
"""
import os, re, subprocess, sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
SRC = os.path.join(ROOT, 'src')
LAYERS = {'base': 0, 'model': 1, 'kernels': 2, 'grammar': 2, '': 3, 'front': 4, 'cli': 5, 'serve': 5, 'api': 5}
passed = failed = 0


def fail(msg):
    global failed
    failed += 1
    print('FAIL: ' + msg)


ALLOWED_INCLUDES = {('cli/main.c', 'serve/run_serve.h')}
LIBRARY_TOP = LAYERS['']  # the library: the layers up to the pipeline


def check_map():
    global passed
    folders = {d for d in os.listdir(SRC) if os.path.isdir(os.path.join(SRC, d))} | {''}
    for d in sorted(folders - set(LAYERS)):
        fail('src/%s has no layer: add it to LAYERS in tests/check_modules.py '
             '(and to the Makefile, CONTRIBUTING.md, docs/architecture.md)' % d)
    for d in sorted(set(LAYERS) - folders):
        fail('LAYERS names src/%s, which does not exist' % d)
    mk = open(os.path.join(ROOT, 'Makefile')).read()
    m = re.search(r'^LIB_DIRS\s*:=\s*(.*)$', mk, re.M)
    if not m:
        fail('the Makefile has no LIB_DIRS line')
        return
    lib_dirs = {os.path.relpath(p, 'src') if p != 'src' else '' for p in m.group(1).split()}
    want = {d for d, lv in LAYERS.items() if lv <= LIBRARY_TOP}
    if lib_dirs != want:
        fail("the Makefile's LIB_DIRS (%s) are not the library's layers (%s)"
             % (' '.join(sorted('src/' + d if d else 'src' for d in lib_dirs)),
                ' '.join(sorted('src/' + d if d else 'src' for d in want))))
    else:
        passed += 1


def layer_of(rel):  # rel: a path under src/
    d = os.path.dirname(rel)
    return d, LAYERS.get(d)


def source_files():
    for d in LAYERS:
        for f in sorted(os.listdir(os.path.join(SRC, d))):
            if f.endswith(('.c', '.h')):
                yield os.path.join(d, f) if d else f


def check_layers():
    global passed
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    for rel in source_files():
        d, lv = layer_of(rel)
        text = open(os.path.join(SRC, rel)).read()
        ok = True
        for name in inc.findall(text):
            here = os.path.join(SRC, d, name)
            target = os.path.relpath(here if os.path.exists(here) else os.path.join(SRC, name), SRC)
            if target.startswith('..') or not os.path.exists(os.path.join(SRC, target)):
                continue  # generated or outside src/
            td, tl = layer_of(target)
            if tl is None:
                fail('%s includes %s, in a folder with no layer' % (rel, target))
                ok = False
                continue
            if (rel, target) in ALLOWED_INCLUDES:
                continue
            if tl > lv or (tl == lv and td != d):
                fail('%s (layer %s) includes %s (layer %s): base <- model <- kernels <- pipeline '
                     '<- front <- cli, serve' % (rel, d or 'pipeline', target, td or 'pipeline'))
                ok = False
        if ok:
            passed += 1


def check_messages():
    global passed
    to_stderr = re.compile(r'\b(?:v?fprintf\s*\(\s*stderr\s*,\s*"gpt|fputs\s*\(\s*"gpt[^"]*"\s*,\s*stderr)')
    for rel in source_files():
        if layer_of(rel)[1] < LAYERS['front'] or rel == os.path.join('front', 'report.c'):
            continue
        lines = open(os.path.join(SRC, rel)).read().split('\n')
        bad = [n for n, line in enumerate(lines, 1) if to_stderr.search(line)]
        if bad:
            fail('%s writes a message to stderr itself (line %s): report it through front/report.c '
                 '(runtime_error, usage_error, warning, note)' % (rel, ', '.join(map(str, bad[:5]))))
        else:
            passed += 1


def module_of(obj_rel):
    base = re.sub(r'\.o$', '', obj_rel)
    return re.sub(r'_(avx2|avx512|scalar|kernels)$', '', base)


def includes_of(rel, memo={}):
    """The headers (paths under src/) a file includes, directly or through
    other headers of src/."""
    if rel in memo:
        return memo[rel]
    memo[rel] = set()
    inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
    out = set()
    for name in inc.findall(open(os.path.join(SRC, rel)).read()):
        here = os.path.join(SRC, os.path.dirname(rel), name)
        target = os.path.relpath(here if os.path.exists(here) else os.path.join(SRC, name), SRC)
        if not target.startswith('..') and os.path.exists(os.path.join(SRC, target)):
            out.add(target)
            out |= includes_of(target)
    memo[rel] = out
    return out


def check_headers(edges, objs):
    global passed
    headers = [h for d in LAYERS for h in (os.path.join(d, f) if d else f
               for f in sorted(os.listdir(os.path.join(SRC, d)))) if h.endswith('.h')]
    words = {h: set(re.findall(r'\w+', open(os.path.join(SRC, h)).read())) for h in headers}
    sources = defaultdict(list)  # module -> its .c files
    for o in objs:
        sources[module_of(o)].append(o[:-2] + '.c')
    for (a, b), syms in sorted(edges.items()):
        seen_a = set().union(*(includes_of(c) for c in sources[a]))
        seen_b = set().union(*(includes_of(c) for c in sources[b]))
        bad = []
        both = seen_a & seen_b
        for s in sorted(syms):
            if not any(s in words[h] for h in both if h in words):
                bad.append(s)
        if bad:
            fail('%s uses %s of %s without a header that both include' % (a, ', '.join(bad), b))
        else:
            passed += 1


def check_circles(build):
    global passed
    objs, unbuilt = [], []
    for d in LAYERS:  # every source's object: a module left out fails
        for f in sorted(os.listdir(os.path.join(SRC, d))):
            if f.endswith('.c'):
                rel = os.path.join(d, f[:-2] + '.o') if d else f[:-2] + '.o'
                (objs if os.path.exists(os.path.join(build, 'src', rel)) else unbuilt).append(rel)
    if unbuilt:
        fail('no object file under %s/src for %s: build first' % (build, ', '.join(unbuilt)))
        return
    defined, used = {}, defaultdict(set)
    for rel in objs:
        mod = module_of(rel)
        out = subprocess.run(['nm', '--defined-only', '-g', os.path.join(build, 'src', rel)],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3:
                defined[parts[2]] = mod
        out = subprocess.run(['nm', '-u', os.path.join(build, 'src', rel)],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            used[mod].add(line.split()[-1])
    graph = defaultdict(set)
    edges = defaultdict(set)  # (caller, callee) -> the symbols
    for mod, syms in used.items():
        for s in syms:
            t = defined.get(s)
            if t and t != mod:
                graph[mod].add(t)
                edges[(mod, t)].add(s)
    check_headers(edges, objs)
    allowed = {('cli/main', 'serve/serve')}
    for a in sorted(graph):
        da, la = layer_of(a)
        bad = [b for b in sorted(graph[a]) if (a, b) not in allowed and
               (layer_of(b)[1] > la or (layer_of(b)[1] == la and layer_of(b)[0] != da))]
        for b in bad:
            fail('%s calls %s, a module of a layer above it or beside it' % (a, b))
        if not bad:
            passed += 1
    # Tarjan's strongly connected components: a component of more than one
    # module is a circle
    index, low, stack, on, comps = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)
    mods = sorted(set(module_of(o) for o in objs))
    for m in mods:
        if m not in index:
            visit(m)
    for comp in comps:
        if len(comp) > 1:
            comp = sorted(comp)
            edges = ['%s -> %s' % (a, b) for a in comp for b in sorted(graph[a]) if b in comp]
            fail('a circle of calls between modules: ' + ', '.join(edges))
        else:
            passed += 1


build = sys.argv[1] if len(sys.argv) > 1 else 'build'
check_map()
check_layers()
check_messages()
check_circles(build)
print('check_modules: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
