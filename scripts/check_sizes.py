#!/usr/bin/env python3
"""Size limits on the sources: no file over 600 lines, no function over 120 lines.

Functions are measured with lizard (PyPI, pinned in scripts/test.sh): a function's length
is its lines from signature to closing brace. What is over a limit today is listed below
with its size; the check fails when anything new goes over, when a listed one grows, and
when a listed one has shrunk under the limit or gone (so the list only gets shorter).
"""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
SOURCES = ('.h', '.cc', '.cpp', '.cuh', '.cu')

# path -> lines, for files over MAX_FILE_LINES today.
KNOWN_FILES = {
}

# "path:function" -> lines, for functions over MAX_FUNCTION_LINES today.
KNOWN_FUNCTIONS = {
}


def tracked_sources():
    out = subprocess.run(['git', 'ls-files', '-co', '--exclude-standard'], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    return sorted(p for p in out if p.endswith(SOURCES) and (ROOT / p).is_file())


def function_lengths(paths):
    import lizard  # noqa: deferred so the file check runs without it
    for path in paths:
        info = lizard.analyze_file(str(ROOT / path))
        for f in info.function_list:
            yield path, f.name, f.end_line - f.start_line + 1


def check(found, known, limit, what):
    errors = []
    for key, size in sorted(found.items()):
        if key not in known:
            errors.append(f'{key}: {what} of {size} lines (limit {limit})')
        elif size > known[key]:
            errors.append(f'{key}: grew to {size} lines (listed at {known[key]}; limit {limit})')
    for key, size in sorted(known.items()):
        if key not in found:
            errors.append(f'{key}: listed at {size} lines but now within {limit} or gone: '
                          'take it off the list in scripts/check_sizes.py')
    return errors


def main():
    paths = tracked_sources()
    files = {}
    for p in paths:
        n = sum(1 for _ in open(ROOT / p, errors='replace'))
        if n > MAX_FILE_LINES:
            files[p] = n
    errors = check(files, KNOWN_FILES, MAX_FILE_LINES, 'file')
    try:
        functions = {}
        for path, name, n in function_lengths(paths):
            if n > MAX_FUNCTION_LINES:
                key = f'{path}:{name}'
                functions[key] = max(n, functions.get(key, 0))
        errors += check(functions, KNOWN_FUNCTIONS, MAX_FUNCTION_LINES, 'function')
    except ImportError:
        errors.append('lizard is not installed (python3 -m pip install lizard): '
                      'function lengths were not checked')
    for e in errors:
        print(e)
    print(f'check_sizes: {len(paths)} files, {len(files)} over {MAX_FILE_LINES} lines '
          f'(listed: {len(KNOWN_FILES)}), {len(errors)} problem(s)')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
