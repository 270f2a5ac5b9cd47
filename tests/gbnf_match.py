#!/usr/bin/env python3
"""A reference matcher for GBNF text (llama.cpp's dialect, the part
src/grammar/schema.c and regex.c write): whether a string is in a grammar's
language, by sets of positions (every way an element can end from every way
it can start), over the string's code points. Plain and slow on purpose:
it is what tests/test_schema.c and tests/test_regex.c check the converters'
grammars with, independent of the grammar engine.

Input on stdin, one JSON object a line:
  {"grammar": "root ::= ...", "text": "..."}   -> prints 1 or 0
  {"grammar": ...} with "texts": [...]         -> prints a string of 1/0
A grammar that does not parse prints "E <message>".
"""
import json, sys

sys.setrecursionlimit(100000)


class Bad(Exception):
    pass


def parse(src):
    rules = {}
    i = 0
    n = len(src)

    def ws(nl=False):
        nonlocal i
        while i < n:
            if src[i] == '#':
                while i < n and src[i] != '\n':
                    i += 1
            elif src[i] in ' \t' or (nl and src[i] in '\r\n'):
                i += 1
            else:
                break

    def name():
        nonlocal i
        j = i
        while i < n and (src[i].isalnum() or src[i] in '-_'):
            i += 1
        if j == i:
            raise Bad('name expected at %d' % i)
        return src[j:i]

    def char():
        nonlocal i
        c = src[i]
        if c != '\\':
            i += 1
            return ord(c)
        e = src[i + 1]
        i += 2
        if e in 'xuU':
            k = {'x': 2, 'u': 4, 'U': 8}[e]
            v = int(src[i:i + k], 16)
            i += k
            return v
        return ord({'n': '\n', 'r': '\r', 't': '\t'}.get(e, e))

    def seq():
        nonlocal i
        items = []
        while True:
            ws()
            if i >= n or src[i] in '|)\n\r':
                return ('seq', items)
            c = src[i]
            if c == '"':
                i += 1
                cps = []
                while src[i] != '"':
                    cps.append(char())
                i += 1
                el = ('lit', ''.join(map(chr, cps)))
            elif c == '[':
                i += 1
                neg = src[i] == '^'
                if neg:
                    i += 1
                rs = []
                while src[i] != ']':
                    lo = char()
                    hi = lo
                    if src[i] == '-' and src[i + 1] != ']':
                        i += 1
                        hi = char()
                    rs.append((lo, hi))
                i += 1
                el = ('cls', neg, rs)
            elif c == '(':
                i += 1
                el = alt(True)
                ws(True)
                if src[i] != ')':
                    raise Bad(') expected at %d' % i)
                i += 1
            else:
                el = ('ref', name())
            ws()
            if i < n and src[i] in '*+?{':
                q = src[i]
                i += 1
                if q == '*': lo, hi = 0, None
                elif q == '+': lo, hi = 1, None
                elif q == '?': lo, hi = 0, 1
                else:
                    j = src.index('}', i)
                    body = src[i:j]
                    i = j + 1
                    if ',' in body:
                        a, b = body.split(',')
                        lo, hi = int(a), (int(b) if b.strip() else None)
                    else:
                        lo = hi = int(body)
                el = ('rep', el, lo, hi)
            items.append(el)

    def alt(nested):
        nonlocal i
        alts = [seq()]
        while True:
            ws(nested)
            if i < n and src[i] == '|':
                i += 1
                ws(nested)
                alts.append(seq())
            else:
                return ('alt', alts)

    while True:
        ws(True)
        if i >= n:
            break
        nm = name()
        ws()
        if src[i:i + 3] != '::=':
            raise Bad('::= expected at %d' % i)
        i += 3
        rules[nm] = alt(False)
    if 'root' not in rules:
        raise Bad('no root')

    def refs(node):
        if node[0] == 'ref':
            if node[1] not in rules:
                raise Bad('undefined rule ' + node[1])
        elif node[0] in ('seq', 'alt'):
            for x in node[1]:
                refs(x)
        elif node[0] == 'rep':
            refs(node[1])
    for r in rules.values():
        refs(r)
    return rules


def matches(rules, s):
    memo = {}

    def m(node, starts):
        kind = node[0]
        out = set()
        if kind == 'lit':
            t = node[1]
            for p in starts:
                if s.startswith(t, p):
                    out.add(p + len(t))
        elif kind == 'cls':
            neg, rs = node[1], node[2]
            for p in starts:
                if p < len(s):
                    c = ord(s[p])
                    if any(lo <= c <= hi for lo, hi in rs) != neg:
                        out.add(p + 1)
        elif kind == 'seq':
            cur = set(starts)
            for el in node[1]:
                cur = m(el, cur)
                if not cur:
                    break
            out = cur
        elif kind == 'alt':
            for a in node[1]:
                out |= m(a, starts)
        elif kind == 'ref':
            for p in starts:
                key = (node[1], p)
                if key not in memo:
                    memo[key] = set()  # a left recursion would find nothing new
                    memo[key] = m(rules[node[1]], {p})
                out |= memo[key]
        elif kind == 'rep':
            el, lo, hi = node[1], node[2], node[3]
            cur = set(starts)
            for _ in range(lo):
                cur = m(el, cur)
            out = set(cur)
            k = lo
            while cur and (hi is None or k < hi):
                cur = m(el, cur) - out
                out |= cur
                k += 1
        return out

    return len(s) in m(rules['root'], {0})


def main():
    for line in sys.stdin:
        q = json.loads(line)
        try:
            rules = parse(q['grammar'])
        except (Bad, IndexError, ValueError) as e:
            print('E ' + str(e), flush=True)
            continue
        if 'texts' in q:
            print(''.join('1' if matches(rules, t) else '0' for t in q['texts']), flush=True)
        else:
            print('1' if matches(rules, q['text']) else '0', flush=True)


if __name__ == '__main__':
    main()
