#!/usr/bin/env python3
"""The maps stay true: the README's Layout table and each module's DocC "Where things live" section
name every folder under Sources/ (and only folders that exist), and every source, test, script or
document path cited by a doc comment, an article, the README or BENCHMARKS.md exists.

Usage: scripts/check-maps.py [--self-test]. Exits 1 and lists each problem (file:line, what to do).
"""
import os
import re
import subprocess
import sys
import tempfile

ROOTED = {"Sources", "Tests", "Examples", "scripts", "Benchmarks", "docs", ".ci"}
PATH = re.compile(r"(?<![\w/.+-])((?:\.?[\w+-]+/)+[\w+-]+\.(?:swift|md|sh|py|c|h))(?![\w/])")
FOLDER = re.compile(r"`([A-Z][\w]*)/`")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if line]
    except (subprocess.CalledProcessError, FileNotFoundError):
        found = []
        for base, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".build")]
            found += [os.path.relpath(os.path.join(base, f), root) for f in files]
        return found


def modules(root):
    sources = os.path.join(root, "Sources")
    for name in sorted(os.listdir(sources)):
        path = os.path.join(sources, name)
        if os.path.isdir(path):
            folders = sorted(d for d in os.listdir(path)
                             if os.path.isdir(os.path.join(path, d)) and not d.endswith(".docc") and d != "include")
            yield name, folders


def readme_row(readme_lines, module):
    for number, line in enumerate(readme_lines, 1):
        if line.startswith(f"| `Sources/{module}` |"):
            return number, line
    return None, None


def docc_section(root, module):
    path = os.path.join(root, "Sources", module, f"{module}.docc", f"{module}.md")
    if not os.path.exists(path):
        return None, None, None
    lines = open(path, encoding="utf-8").read().splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "### Where things live"), None)
    if start is None:
        return path, 0, ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return path, start + 1, "\n".join(lines[start:end])


def check_map(problems, where, text, module, folders):
    named = set(FOLDER.findall(text))
    for folder in folders:
        if folder not in named:
            problems.append(f"{where}: the map of {module} has no `{folder}/` (Sources/{module}/{folder}): "
                            "add a line saying what it holds")
    for folder in sorted(named - set(folders)):
        problems.append(f"{where}: the map of {module} names `{folder}/`, which is not a folder of "
                        f"Sources/{module}: remove it or correct the name")


def cited_paths(root, files):
    suffixes = set()
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            suffixes.add("/".join(parts[i:]))
    folders = set()
    for f in files:
        folders.update(f.split("/")[:-1])
    scanned = [f for f in files
               if (f.endswith((".swift", ".md", ".sh", ".py")) or f.startswith(".ci/"))
               and not f.startswith("scripts/check-maps")]
    problems = []
    for f in scanned:
        try:
            lines = open(os.path.join(root, f), encoding="utf-8").read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(lines, 1):
            for match in PATH.finditer(line):
                path = match.group(1)
                first = path.split("/")[0]
                if first in ROOTED:
                    if not os.path.exists(os.path.join(root, path)):
                        problems.append(f"{f}:{number}: cites {path}, which does not exist: correct the path")
                elif first in folders and path not in suffixes:
                    problems.append(f"{f}:{number}: cites {path}, which no file of the project ends with: "
                                    "correct the path")
    return problems


def check(root):
    problems = []
    readme = os.path.join(root, "README.md")
    readme_lines = open(readme, encoding="utf-8").read().splitlines()
    for module, folders in modules(root):
        number, row = readme_row(readme_lines, module)
        if row is None:
            problems.append(f"README.md: the Layout table has no row `Sources/{module}`: add one")
        else:
            check_map(problems, f"README.md:{number}", row, module, folders)
        path, line, section = docc_section(root, module)
        if path is not None:
            where = f"{os.path.relpath(path, root)}:{line}"
            if not section:
                problems.append(f"{where}: no '### Where things live' section: add one naming each folder")
            else:
                check_map(problems, where, section, module, folders)
    problems += cited_paths(root, tracked_files(root))
    return problems


def self_test():
    """A tree with each kind of problem must fail with each; the fixed tree must pass."""
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            open(full, "w", encoding="utf-8").write(text)
        write("Sources/Mod/Alpha/A.swift", "// see Alpha/Missing.swift and Sources/Mod/Alpha/A.swift\n")
        write("Sources/Mod/Beta/B.swift", "// see Tests/ModTests/Gone.swift\n")
        write("Sources/Mod/Mod.docc/Mod.md", "# Mod\n### Where things live\n- `Alpha/`: a\n- `Gamma/`: c\n## Topics\n")
        write("README.md", "| `Sources/Mod` | `Alpha/` a, `Beta/` b |\n")
        found = "\n".join(check(root))
        expected = ["has no `Beta/`", "names `Gamma/`", "cites Alpha/Missing.swift", "cites Tests/ModTests/Gone.swift"]
        missing = [e for e in expected if e not in found]
        if missing or "cites Sources/Mod/Alpha/A.swift" in found:
            print("check-maps self-test failed; missing:", missing, "\nfound:\n" + found)
            return False
        write("Sources/Mod/Alpha/A.swift", "// see Alpha/A.swift\n")
        write("Sources/Mod/Beta/B.swift", "// nothing\n")
        write("Sources/Mod/Mod.docc/Mod.md", "# Mod\n### Where things live\n- `Alpha/`: a\n- `Beta/`: b\n## Topics\n")
        left = check(root)
        if left:
            print("check-maps self-test: a correct tree failed:\n" + "\n".join(left))
            return False
    print("check-maps self-test passed")
    return True


def main():
    if "--self-test" in sys.argv:
        sys.exit(0 if self_test() else 1)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"check-maps: {len(problems)} problem(s)")
        sys.exit(1)
    print("check-maps: every folder mapped, every cited path exists")


if __name__ == "__main__":
    main()
