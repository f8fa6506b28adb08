#!/usr/bin/env python3
"""No `Foundation.Progress` is changed with a command's (or a graph's) lock held.

On Apple platforms `Progress` notifies its KVO observers synchronously on the changing thread,
parents included; an observer that reads a command's state or cancels it takes that command's
lock, so a change made under it deadlocks. The rule, checked here over Sources/:

1. `Progress` is changed (`completedUnitCount =`, `totalUnitCount =`/`+=`, `addChild(`) only in
   Sources/CommandCore/Platform/ProgressGuard.swift;
2. its changing functions (`ProgressGuard.report/complete/addChild/completeIfWeightless`) are
   called neither from a state machine (`*StateMachine*.swift`: every method runs under the lock)
   nor inside a `withLock` body (other than `ProgressGuard.withLock`, the progress lock itself).

`--self-test` runs the check on canaries it must reject and one it must accept.
Usage: scripts/check-progress.py [--self-test]
"""
import pathlib
import re
import sys
import tempfile

MUTATION = re.compile(r"\.(completedUnitCount|totalUnitCount)\s*(=|\+=|-=)[^=]|(?<!ProgressGuard)\.addChild\(")
CHANGER = re.compile(r"ProgressGuard\.(report|complete|addChild|completeIfWeightless)\b")
WITH_LOCK = re.compile(r"(?<!ProgressGuard\.)\bwithLock\b")
GUARD_FILE = "ProgressGuard.swift"


def strip_comments(text: str) -> str:
    """Blanks out // comments and string literals, keeping offsets (braces in them do not count)."""
    out = []
    i = 0
    while i < len(text):
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text[i] == '"':
            end = i + 1
            while end < len(text) and text[end] not in '"\n':
                end += 2 if text[end] == "\\" else 1
            out.append('"' + " " * (end - i - 1))
            i = end + 1 if end < len(text) and text[end] == '"' else end
            if i > end:
                out.append('"')
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def lock_bodies(code: str):
    """(start, end) offsets of every closure passed to a `withLock` (not the progress lock)."""
    for match in WITH_LOCK.finditer(code):
        brace = code.find("{", match.end())
        if brace < 0:
            continue
        depth = 0
        for index in range(brace, len(code)):
            if code[index] == "{":
                depth += 1
            elif code[index] == "}":
                depth -= 1
                if depth == 0:
                    yield brace, index
                    break


def check(paths) -> list:
    problems = []
    for path in paths:
        text = path.read_text()
        code = strip_comments(text)

        def line(offset: int) -> int:
            return code.count("\n", 0, offset) + 1

        if path.name != GUARD_FILE:
            for match in MUTATION.finditer(code):
                problems.append(f"{path}:{line(match.start())}: Progress changed outside {GUARD_FILE}")
        if path.name == GUARD_FILE:
            continue
        for match in CHANGER.finditer(code):
            if "StateMachine" in path.name:
                problems.append(f"{path}:{line(match.start())}: {match.group(0)} in a state machine (runs under the lock)")
        for start, end in lock_bodies(code):
            for match in CHANGER.finditer(code, start, end):
                problems.append(f"{path}:{line(match.start())}: {match.group(0)} inside a withLock body")
    return problems


def self_test() -> int:
    canaries = {
        "RejectedMutation.swift": "func f(p: Progress) { p.completedUnitCount = 1 }\n",
        "RejectedAddChild.swift": "func f(p: Progress, c: Progress) { p.addChild(c, withPendingUnitCount: 1) }\n",
        "RejectedUnderLock.swift": "func f() { machine.withLock { m in if true { ProgressGuard.complete(m.progress!) } } }\n",
        "RejectedStateMachine.swift": "struct CommandStateMachine { func end() { ProgressGuard.complete(p) } }\n",
        "Accepted.swift": (
            "func f() {\n"
            "    let p = machine.withLock { $0.progress } // withLock { ProgressGuard.complete(p) }\n"
            '    let s = "withLock { ProgressGuard.complete(p) }"\n'
            "    ProgressGuard.complete(p)\n"
            "    ProgressGuard.withLock { p.fractionCompleted }\n"
            "    if p.totalUnitCount == 0 {}\n"
            "}\n"
        ),
    }
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for name, text in canaries.items():
            path = pathlib.Path(folder) / name.replace("RejectedStateMachine", "CommandStateMachine+Canary")
            path.write_text(text)
            found = check([path])
            expected = name.startswith("Rejected")
            if bool(found) != expected:
                print(f"self-test: {name} was {'rejected' if found else 'accepted'}: {found}")
                failures += 1
    print(f"self-test: {len(canaries)} canaries, {failures} wrong")
    return 1 if failures else 0


def main() -> int:
    if "--self-test" in sys.argv:
        return self_test()
    root = pathlib.Path(__file__).resolve().parent.parent
    paths = sorted((root / "Sources").rglob("*.swift"))
    problems = check(paths)
    for problem in problems:
        print(problem)
    if problems:
        print("Progress must be changed through ProgressGuard, never with a command's or graph's lock held.")
        return 1
    print(f"Progress changes: only in {GUARD_FILE}, never under a lock ({len(paths)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
