#!/bin/sh
# docs/architecture.md is the map of src/ that CONTRIBUTING.md promises: a
# row (or a line) for every module, and no path that is not there.
#   - every module of src/ is named: a .c file or page.html, and a .h file
#     with no .c of its own (a .h beside its .c is that module's); by its
#     path (`src/kernels/tune.c`), or by its name alone in a section whose
#     heading names its folder ("The kernels (`src/kernels/`)"), with
#     shell braces (`src/kernels/matmul_{avx2,avx512}.c`) expanded;
#   - every file it names that way exists.
# Prints "check_architecture: N passed, M failed" like the test binaries.
CHECK_NAME=check_architecture
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need /usr/bin/python3
/usr/bin/python3 - << 'PY'
import os, re, sys

def expand(tok):
    m = re.search(r'\{([^{}]*)\}', tok)
    if not m:
        return [tok]
    return [x for alt in m.group(1).split(',') for x in expand(tok[:m.start()] + alt + tok[m.end():])]

named, stale, section = set(), [], None
for n, line in enumerate(open('docs/architecture.md'), 1):
    if line.startswith('#'):
        h = re.search(r'\(`(src/[a-z_]+/)`\)', line)
        section = h.group(1) if h else None
    for tok in re.findall(r'`([^`\s]+)`', line):
        for t in expand(tok):
            if t.startswith('src/') and re.search(r'\.(c|h|html)$', t):
                path = t
            elif section and re.fullmatch(r'[\w.]+\.(c|h|html)', t):
                path = section + t
            else:
                continue
            named.add(path)
            if not os.path.exists(path):
                stale.append('docs/architecture.md:%d names %s, which does not exist' % (n, path))
passed = failed = 0
for msg in stale:
    print('check_architecture: ' + msg)
    failed += 1
for d, _, files in os.walk('src'):
    for f in sorted(files):
        p = os.path.join(d, f)
        module = f.endswith(('.c', '.html')) or (f.endswith('.h') and not os.path.exists(p[:-2] + '.c'))
        if not module:
            continue
        if p in named:
            passed += 1
        else:
            print('check_architecture: %s has no row in docs/architecture.md' % p)
            failed += 1
print('check_architecture: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
PY
