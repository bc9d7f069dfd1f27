#!/usr/bin/env python3
"""The layout of src/ (the rules are written in src/README.md, "Rules between
folders").

Checks, and exits 1 naming every break:
  1. which folder's headers each folder may include (RULES below, and the
     single headers of HEADER_CROSSINGS);
  2. every header is owned by one folder and has at most 300 lines;
  3. the graph of which file calls which, read from the symbols of the
     built objects (`nm`: a file calls another when it has an undefined
     symbol that the other defines), has no cycle, and crosses between
     folders only as RULES allow, or by a symbol CALL_CROSSINGS names;
  4. a watch's state (struct KwWatch, transfer/kw_watch.h) is changed by
     STATE_OWNER only: no other file of transfer/ assigns a KwWatch field
     (read from the sources; see check_watch_state for what it sees);
  5. every file and kw_ name a comment of src/ names exists
     (check_comments.py, which says what it sees);
  6. inside STATE_OWNER, a watch's phase (KwWatch.phase, KwWatchPhase) is
     assigned only by PHASE_SETTERS: its transitions are in one place
     (check_watch_phase).

Usage: check_layout.py [--no-objects]   (run from the top of the tree, after
`make`; --no-objects checks the includes and the sources only).
"""
import collections
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_comments  # noqa: E402  (test/layout/check_comments.py)

SRC = 'src'
MAX_HEADER_LINES = 300

# folder -> the folders whose headers it may include (its own always).
# Read as: a layer sees what is below it, never beside or above it, except
# through the channel.
RULES = {
    'common':    set(),
    'cluster':   {'common'},
    'decode':    {'common'},
    'channel':   {'common'},
    'transfer':  {'common', 'cluster', 'decode', 'channel'},
    'apply':     {'common', 'cluster', 'decode', 'channel'},
    'live':      {'common', 'cluster', 'decode'},
    'functions': {'common', 'cluster', 'decode', 'apply', 'channel'},
    # the request sender: sends what kwatch.apply() queued (sender/sender.c)
    'sender':    {'common', 'cluster'},
    # the module entry (_PG_init) starts every part
    '.':         {'common', 'cluster', 'decode', 'channel', 'transfer',
                  'apply', 'live', 'functions', 'sender'},
}

# Headers a folder may include beyond RULES: live/ reads the event ring
# that apply/ writes (kwatch.events, the foreign table over it).
HEADER_CROSSINGS = {
    'live': {'kw_events.h'},
}

# The only calls between folders that RULES does not allow, by name
# (src/README.md says why each one).
CALL_CROSSINGS = {
    # the worker's process, at its start and between rounds (kw_apply.h)
    ('transfer', 'apply'): {'kw_events_writer_init', 'kw_events_restore',
                            'kw_history_prune_targets'},
    # kwatch.events reads the ring (kw_events.h)
    ('live', 'apply'): {'kw_events_available', 'kw_events_last_seq',
                        'kw_events_oldest_seq', 'kw_events_read',
                        'kw_events_ring_slots', 'kw_events_scan_bound'},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)

# The one file of STATE_FOLDER that changes a KwWatch: the others read it
# and call its transition functions (kw_watch.h; src/README.md).
STATE_FOLDER = 'transfer'
STATE_OWNER = 'watch.c'

# The functions of STATE_OWNER that assign KwWatch.phase: the transition
# function, and the watch's creation (its initial phase).
PHASE_SETTERS = {'watch_set_phase', 'kw_watch_create'}
FUNCTION_START = re.compile(r'^([A-Za-z_]\w*)\s*\(', re.M)

COMMENT_OR_LITERAL = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"'
                                r"|'(?:\\.|[^'\\\n])*'", re.S)
KWWATCH_VARIABLE = re.compile(r'\bKwWatch\s*\*\s*(?:const\s+)?(\w+)')
ASSIGNMENT = r'(?:<<=|>>=|[-+*/%&|^]?=(?!=)|\+\+|--)'


def folder_of(path):
    d = os.path.relpath(os.path.dirname(path), SRC)
    return d


def sources():
    return sorted(glob.glob(os.path.join(SRC, '*.[ch]')) +
                  glob.glob(os.path.join(SRC, '*', '*.[ch]')))


def check_includes(errors):
    files = sources()
    headers = collections.defaultdict(list)
    for f in files:
        if f.endswith('.h'):
            headers[os.path.basename(f)].append(f)
    for name, paths in headers.items():
        if len(paths) > 1:
            errors.append('header %s is in several folders: %s' % (name, ', '.join(paths)))
    for f in files:
        if f.endswith('.h'):
            n = sum(1 for _ in open(f))
            if n > MAX_HEADER_LINES:
                errors.append('%s has %d lines (at most %d)' % (f, n, MAX_HEADER_LINES))
    for f in files:
        here = folder_of(f)
        if here not in RULES:
            errors.append('%s: folder %s has no rule in %s' % (f, here, __file__))
            continue
        text = open(f).read()
        for name in INCLUDE.findall(text):
            if name not in headers:
                continue    # PostgreSQL's or a library's
            there = folder_of(headers[name][0])
            if (there != here and there not in RULES[here]
                    and name not in HEADER_CROSSINGS.get(here, ())):
                errors.append('%s (%s/) includes %s of %s/, which the rule of %s/ does not allow'
                              % (f, here, name, there, here))


def blanked(text):
    """`text` with its comments and literals as spaces, newlines kept."""
    return COMMENT_OR_LITERAL.sub(lambda m: re.sub(r'[^\n]', ' ', m.group(0)), text)


def takes_address(text, at):
    """Whether the & at `at` is unary (an address), not && nor a bitwise and."""
    if text[at + 1:at + 2] == '&':
        return False
    before = text[:at].rstrip()
    return not before or not (before[-1].isalnum() or before[-1] in '_)]&')


def check_watch_state(errors):
    """
    No file of STATE_FOLDER but STATE_OWNER changes a field of a KwWatch.
    Read from each source with its comments and literals blanked: every
    name declared `KwWatch *name` in the file (parameters and locals; in
    practice `w`) is followed, and a change is `name->field`, with any
    `.member` or `[index]` after it, followed by an assignment operator
    (=, +=, ..., ++, --), or preceded by ++ or --, or its address taken
    (`&name->field`: a callee may write through it, as set_str does).
    `name->field->x` is not the watch's own field (w->slot->x is the
    shared status slot, which watch_status.c writes) and is not counted.
    What it cannot see: a KwWatch reached otherwise (a cast in place,
    `((KwWatch *) arg)->x = 1`; a pointer of another type; a macro
    argument in parentheses, `(w)->x`); a memset or memcpy over a whole
    KwWatch; a field's address taken without `&` (an array field); a field
    changed by a function outside the folder that was given the KwWatch.
    It guards the plain case; a reviewer reads the rest.
    """
    for f in sorted(glob.glob(os.path.join(SRC, STATE_FOLDER, '*.[ch]'))):
        if os.path.basename(f) == STATE_OWNER:
            continue
        text = blanked(open(f).read())
        names = set(KWWATCH_VARIABLE.findall(text))
        if not names:
            continue
        field = (r'\b(?:%s)\s*->\s*(\w+)(?:\s*(?:\.\s*\w+|\[[^\]]*\]))*'
                 % '|'.join(sorted(names)))
        changes = {}
        for pattern in (field + r'\s*' + ASSIGNMENT,
                        r'(?:\+\+|--)\s*' + field,
                        r'&\s*' + field + r'(?!\s*->)'):
            for m in re.finditer(pattern, text):
                if m.group(0).startswith('&') and not takes_address(text, m.start()):
                    continue
                line = text.count('\n', 0, m.start()) + 1
                changes.setdefault((line, m.group(1)), m.group(0))
        for (line, name), what in sorted(changes.items()):
            errors.append('%s:%d changes KwWatch field %s (%s): only %s/%s changes a '
                          'watch\'s state; call one of its functions (kw_watch.h)'
                          % (f, line, name, ' '.join(what.split()), STATE_FOLDER, STATE_OWNER))


def check_watch_phase(errors):
    """
    In STATE_OWNER, `->phase` is assigned (=, or its address taken) only in
    the functions PHASE_SETTERS names.  A function is the one whose
    definition (its name at the start of a line, PostgreSQL's style) comes
    last before the assignment, read with comments and literals blanked.
    """
    f = os.path.join(SRC, STATE_FOLDER, STATE_OWNER)
    text = blanked(open(f).read())
    for pattern in (r'->\s*phase\s*' + ASSIGNMENT, r'&\s*\w+\s*->\s*phase\b'):
        for m in re.finditer(pattern, text):
            if m.group(0).startswith('&') and not takes_address(text, m.start()):
                continue
            starts = list(FUNCTION_START.finditer(text, 0, m.start()))
            func = starts[-1].group(1) if starts else '(file scope)'
            if func not in PHASE_SETTERS:
                line = text.count('\n', 0, m.start()) + 1
                errors.append('%s:%d: %s assigns a watch\'s phase: only %s do; call '
                              'watch_set_phase' % (f, line, func, ', '.join(sorted(PHASE_SETTERS))))


def built_objects():
    """The objects the Makefile's OBJS names (not stale ones of old paths)."""
    text = open('Makefile').read()
    m = re.search(r'^OBJS\s*=((?:.*\\\n)*.*)$', text, re.M)
    names = re.findall(r'(src/\S+\.o)', m.group(1)) if m else []
    return [o for o in names if os.path.exists(o)], names


def call_graph():
    objs, _ = built_objects()
    defined, undefined = {}, {}
    for o in objs:
        out = subprocess.run(['nm', o], capture_output=True, text=True,
                             check=True).stdout
        d, u = set(), set()
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in 'TDBRCG':
                d.add(p[2])
            elif len(p) == 2 and p[0] == 'U':
                u.add(p[1])
        defined[o], undefined[o] = d, u
    owner = {s: o for o, d in defined.items() for s in d}
    graph = collections.defaultdict(dict)
    for o, u in undefined.items():
        for s in u:
            if s in owner and owner[s] != o:
                graph[o].setdefault(owner[s], []).append(s)
    return objs, graph


def cycles(nodes, graph):
    """Tarjan's strongly connected components with more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return out


def check_calls(errors):
    objs, graph = call_graph()
    _, names = built_objects()
    if len(objs) != len(names) or not names:
        errors.append('objects missing (%d of %d built): run make first (or --no-objects)'
                      % (len(objs), len(names)))
        return
    for a in objs:
        fa = folder_of(a)
        for b, syms in sorted(graph[a].items()):
            fb = folder_of(b)
            if fb == fa or fb in RULES.get(fa, ()):
                continue
            extra = set(syms) - CALL_CROSSINGS.get((fa, fb), set())
            if extra:
                errors.append('%s (%s/) calls %s of %s/ (%s), which neither the rule of %s/ '
                              'nor CALL_CROSSINGS allows'
                              % (a, fa, b, fb, ', '.join(sorted(extra)), fa))
    for comp in cycles(objs, graph):
        lines = []
        for a in comp:
            for b, syms in sorted(graph[a].items()):
                if b in comp:
                    lines.append('    %s -> %s (%s)' % (a, b, ', '.join(sorted(syms)[:4])))
        errors.append('files that call each other (a cycle):\n' + '\n'.join(lines))


def main():
    errors = []
    check_includes(errors)
    check_watch_state(errors)
    check_comments.check_comment_names(errors)
    check_watch_phase(errors)
    if '--no-objects' not in sys.argv:
        check_calls(errors)
    for e in errors:
        print('layout: ' + e)
    if errors:
        print('layout: %d break(s) of the rules in src/README.md' % len(errors))
        return 1
    print('layout: the include rules hold, no header over %d lines, no cycle between files, '
          'only %s/%s changes a KwWatch, only %s set its phase, every name a comment gives exists'
          % (MAX_HEADER_LINES, STATE_FOLDER, STATE_OWNER, ', '.join(sorted(PHASE_SETTERS))))
    return 0


if __name__ == '__main__':
    sys.exit(main())
