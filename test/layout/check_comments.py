#!/usr/bin/env python3
"""Names in src/'s comments that a reader can follow (check_layout.py runs it).

Checks, and reports every break:
  1. every C file or header (`foo.c`, `foo.h`, `dir/foo.c`) a comment names
     exists:
       - a bare name (`sync.c`): a file of this tree by that name, a header
         of PostgreSQL's server include tree (`pg_config
         --includedir-server`) or of the system's (/usr/include), or one of
         EXTERNAL: the other PostgreSQL, postgres_fdw and library sources
         that comments cite by their bare name;
       - a name with a directory part (`apply/sync.c`,
         `src/backend/commands/async.c`): a file of this tree whose path ends
         with it, or, when its first directory (after `src/`) is not one of
         this tree's (OWN_DIRS), a path in another tree (PostgreSQL's, Kubernetes'),
         which the comment names as such and which is not checked here; a
         PostgreSQL header under such a path is looked up in the include
         tree when there is one;
  2. every kwatch identifier (`kw_...`) a comment names is an identifier or
     a string of the C sources or a name in sql/ (a name ending in `_`, as
     in `kw_watch_note_*`, stands for a family and is not checked).

What it does not see: a function or file named without its suffix or
prefix ("the merge"), a name of another tree that does not exist there, a
name in prose of the SQL files or the docs.  It guards stale names left by
a rename or a split; a reviewer reads the rest.

Usage: check_comments.py   (from the top of the tree)
"""
import glob
import os
import re
import subprocess
import sys

SRC = 'src'

# The first directories of a path of this tree, as comments write them
# (src/apply/sync.c, apply/sync.c, sql/schema/...).  PostgreSQL's own
# "common/" (src/common/base64.c, common/jsonapi.h) shares a name with
# src/common/: such a name is checked as this tree's unless it is a
# PostgreSQL header found in the include tree or listed in EXTERNAL.
OWN_DIRS = {'src', 'test', 'sql', 'doc', 'debian', 'apply', 'channel',
            'cluster', 'common', 'decode', 'functions', 'live', 'sender',
            'transfer'}

# Sources of other trees that comments cite by their bare name (PostgreSQL
# 15's src/backend and contrib/postgres_fdw; src/common/hmac_openssl.c).
EXTERNAL = {
    'postgres.c', 'trigger.c', 'xact.c', 'async.c', 'applyparallelworker.c',
    'lock.c', 'lmgr.c', 'stringinfo.c', 'timestamp.c', 'pg_shdepend.c',
    'rewriteDefine.c', 'deparse.c', 'setrefs.c', 'common/hmac_openssl.c',
}

COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)
COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"', re.S)
FILE_NAME = re.compile(r'(?<![\w./-])((?:[\w-]+/)*[\w-]+\.[ch])\b(?![\w(])')
KW_NAME = re.compile(r'\b(kw_\w+)\b(?!\.[ch]\b)')


def tree_files():
    out = subprocess.run(['git', 'ls-files'], capture_output=True, text=True).stdout.split()
    untracked = subprocess.run(['git', 'ls-files', '--others', '--exclude-standard'],
                               capture_output=True, text=True).stdout.split()
    return out + untracked


def include_headers():
    """Headers of PostgreSQL's server include tree and /usr/include: paths
    relative to their tree, and bare names."""
    roots = ['/usr/include']
    try:
        roots.append(subprocess.run(['pg_config', '--includedir-server'],
                                    capture_output=True, text=True,
                                    check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    paths, names = set(), set()
    for root in roots:
        for d, _, fs in os.walk(root):
            for f in fs:
                if f.endswith('.h'):
                    paths.add(os.path.relpath(os.path.join(d, f), root))
                    names.add(f)
    return paths, names


def sources():
    return sorted(glob.glob(os.path.join(SRC, '**', '*.[ch]'), recursive=True))


def file_name_found(name, files, bases, hpaths, hnames):
    if name in EXTERNAL:
        return True
    if '/' not in name:
        return name in bases or (name.endswith('.h') and name in hnames)
    if any(f == name or f.endswith('/' + name) for f in files):
        return True
    if name.endswith('.h') and (name in hpaths or
                                any(p.endswith('/' + name) for p in hpaths)):
        return True
    parts = name.split('/')
    if parts[0] == 'src' and len(parts) > 2:
        # PostgreSQL's src/backend/..., src/include/..., src/pl/...
        return parts[1] not in OWN_DIRS
    return parts[0] not in OWN_DIRS


def check_comment_names(errors):
    files = tree_files()
    bases = {os.path.basename(f) for f in files}
    hpaths, hnames = include_headers()
    identifiers = set()
    for f in sources():
        text = open(f).read()
        code = COMMENT.sub(' ', text)      # strings kept: "kw_object"
        identifiers |= set(re.findall(r'\w+', code))
    for f in glob.glob(os.path.join('sql', '**', '*.sql*'), recursive=True):
        identifiers |= set(re.findall(r'\w+', open(f).read()))
    for f in sources():
        text = open(f).read()
        for m in COMMENT_OR_STRING.finditer(text):
            comment = m.group(0)
            if comment.startswith('"'):
                continue
            for n in FILE_NAME.finditer(comment):
                if not file_name_found(n.group(1), files, bases, hpaths, hnames):
                    line = text.count('\n', 0, m.start() + n.start()) + 1
                    errors.append('%s:%d: a comment names %s, which is not in this tree '
                                  '(nor a known file of PostgreSQL\'s, test/layout/check_comments.py)'
                                  % (f, line, n.group(1)))
            for n in KW_NAME.finditer(comment):
                name = n.group(1)
                if name.endswith('_') or name in identifiers:
                    continue
                line = text.count('\n', 0, m.start() + n.start()) + 1
                errors.append('%s:%d: a comment names %s, which nothing in src/ or sql/ defines'
                              % (f, line, name))


def main():
    errors = []
    check_comment_names(errors)
    for e in errors:
        print('comments: ' + e)
    if errors:
        return 1
    print('comments: every file and kw_ name a comment of src/ names exists')
    return 0


if __name__ == '__main__':
    sys.exit(main())
