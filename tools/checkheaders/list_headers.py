#!/usr/bin/env python3
# Prints the public headers under include/ (relative to it, one a line, sorted) for the
# checkheaders target: each is compiled alone, so a header that leans on what its includer
# happened to include first fails the build.
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
for h in sorted(root.rglob('*.hpp')):
    print(h.relative_to(root).as_posix())
