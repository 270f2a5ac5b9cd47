#!/bin/sh
# The two maps of src/ have a row for every module and name no file that is
# not there:
# docs/architecture.md, the map of the code CONTRIBUTING.md promises:
#   - every module of src/ is named: a .c file or page.html, and a .h file
#     with no .c of its own (a .h beside its .c is that module's); by its
#     path (`src/kernels/tune.c`), or by its name alone in a section whose
#     heading names its folder ("The kernels (`src/kernels/`)"), with
#     shell braces (`src/kernels/matmul_{avx2,avx512}.c`) expanded;
#   - every file it names that way exists.
# tests/README.md's table "Which test covers what": every .c file of src/
# is in a row's first cell, by its path, by a glob (`src/kernels/matmul*.c`),
# by a folder (`src/serve/`), or by its name after a path of its folder in
# the same cell; every path and glob there matches a file.
# Prints "check_maps: N passed, M failed" like the test binaries.
CHECK_NAME=check_maps
# shellcheck source=tests/checklib.sh
. tests/checklib.sh
need /usr/bin/python3
/usr/bin/python3 - << 'PY'
import glob, os, re, sys

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
    print('check_maps: ' + msg)
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
            print('check_maps: %s has no row in docs/architecture.md' % p)
            failed += 1

# tests/README.md's table of which test covers what
lines = open('tests/README.md').read().split('\n')
start = lines.index('## Which test covers what') if '## Which test covers what' in lines else None
covered = set()
if start is None:
    print("check_maps: tests/README.md has no section '## Which test covers what'")
    failed += 1
    lines = []
else:
    lines = lines[start + 1:]
for line in lines:
    if line.startswith('## '):
        break
    cells = line.split('|')
    if not line.startswith('| ') or len(cells) < 3:
        continue
    folder = None
    for tok in re.findall(r'`([^`]+)`', cells[1]):
        if tok.startswith('src/'):
            folder = tok.rstrip('/') if tok.endswith('/') else os.path.dirname(tok)
            pattern = tok + '*' if tok.endswith('/') else tok
        elif folder and re.fullmatch(r'[\w.*]+', tok):
            pattern = os.path.join(folder, tok)
        else:
            continue
        found = glob.glob(pattern)
        if not found:
            print('check_maps: tests/README.md names %s, which matches no file' % pattern)
            failed += 1
        covered.update(found)
for d, _, files in os.walk('src'):
    for f in sorted(files):
        if f.endswith('.c'):
            p = os.path.join(d, f)
            if p in covered:
                passed += 1
            else:
                print("check_maps: %s has no row in tests/README.md's table of which test covers what" % p)
                failed += 1
print('check_maps: %d passed, %d failed' % (passed, failed))
sys.exit(1 if failed else 0)
PY
