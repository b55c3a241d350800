#!/usr/bin/env bash
# Fails when a module imports a module of this package that Package.swift does not list among
# its dependencies. SwiftPM lets a target import its dependencies' dependencies too; this check
# holds each module to the layers drawn in the README ("Architecture").
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - <<'PY'
import glob, os, re, sys
manifest = open("Package.swift").read()
targets = {}
for match in re.finditer(r'\.(?:target|executableTarget|testTarget|systemLibrary)\(\s*name:\s*"([^"]+)"(.*?)\)(?=,\s*(?://[^\n]*\n\s*)*(?:\.|\]))', manifest, re.S):
    name, rest = match.group(1), match.group(2)
    deps = re.search(r'dependencies:\s*\[([^\]]*)\]', rest)
    path = re.search(r'path:\s*"([^"]+)"', rest)
    kind = "Tests" if match.group(0).startswith(".testTarget") else "Sources"
    targets[name] = (set(re.findall(r'"([^"]+)"', deps.group(1))) if deps else set(),
                     path.group(1) if path else os.path.join(kind, name))
problems = []
for name, (deps, path) in targets.items():
    for file in glob.glob(os.path.join(path, "**", "*.swift"), recursive=True):
        for number, line in enumerate(open(file), 1):
            found = re.match(r'\s*(?:@testable\s+|@_spi\(\w+\)\s+)?import\s+(?:struct\s+|enum\s+|class\s+|func\s+)?(\w+)', line)
            if found and found.group(1) in targets and found.group(1) != name and found.group(1) not in deps:
                problems.append(f"{file}:{number}: {name} imports {found.group(1)}, which Package.swift does not let it use")
if problems:
    print("\n".join(problems), file=sys.stderr)
    print(f"layering check failed: {len(problems)} import(s) across a layer; add the dependency in Package.swift if it is meant, else move the code", file=sys.stderr)
    sys.exit(1)
print(f"layering check: {len(targets)} targets, every import allowed by Package.swift")
PY
