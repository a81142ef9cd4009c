#!/usr/bin/env python3
"""The floors of docs/architecture.md, on the sources: which folder may include which.

core/ includes only core/ and schemas/ (its tests also testing/); compiler/, codegen/ and
dialects/ never include runtime/; runtime/ never includes compiler/, codegen/, dialects/ or
tools/. The link rules are checked by CMake (cmake/IngotFloors.cmake). Exits 1 listing every
include that crosses a floor.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = ('.h', '.cc', '.cpp', '.cuh', '.inc')
# What each floor may not include (by the included path's first folder).
FORBIDDEN = {
    'core': {'compiler', 'codegen', 'dialects', 'runtime', 'tools'},
    'compiler': {'runtime', 'tools', 'testing'},
    'codegen': {'runtime', 'tools', 'testing'},
    'dialects': {'runtime', 'tools', 'testing', 'compiler', 'codegen'},
    'runtime': {'compiler', 'codegen', 'dialects', 'tools'},
}


def is_test(path):
    name = path.name
    return '_test.' in name or 'Test.' in name


def violations():
    found = []
    for floor, banned in FORBIDDEN.items():
        for path in sorted((ROOT / floor).rglob('*')):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            banned_here = set(banned)
            if floor == 'core' and not is_test(path):
                banned_here.add('testing')
            text = path.read_text(errors='replace')
            for match in INCLUDE.finditer(text):
                top = match.group(1).split('/', 1)[0]
                if top in banned_here:
                    line = text.count('\n', 0, match.start()) + 1
                    found.append(f'{path.relative_to(ROOT)}:{line}: includes "{match.group(1)}"')
    return found


def main():
    found = violations()
    for line in found:
        print(line)
    print(f'check_floors: {len(found)} include(s) cross a floor')
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
