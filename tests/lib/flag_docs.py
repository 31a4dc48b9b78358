"""README.md's "Trainer flags" table against `train_gpt2 --help` (tests/tools/check_flag_docs.sh):
  python3 tests/lib/flag_docs.py README.md HELP_TXT
exits 1 naming every flag whose row and --help line disagree."""
import re
import sys

readme_path, help_path = sys.argv[1:]
problems = []


def collect(where, candidates, pattern, expected):
    """The flag -> default text of the (place, line) candidates, each of which must match pattern
    with the flag as group 1 and the default as group 2 (None for no default)."""
    flags = {}
    for place, line in candidates:
        entry = re.fullmatch(pattern, line)
        if not entry:
            problems.append(f"{place}: not {expected}: {line}")
        elif entry[1] in flags:
            problems.append(f"{entry[1]}: listed twice in {where}")
        else:
            flags[entry[1]] = entry[2] or ""
    return flags


def readme_rows():
    in_section = False
    for number, line in enumerate(open(readme_path, encoding="utf-8"), 1):
        line = line.rstrip("\n")
        if line.startswith("## "):
            in_section = line == "## Trainer flags"
        elif in_section and line.startswith("|") and not line.startswith(("| flag |", "| --- |")):
            yield f"README.md:{number}", line


def help_lines():
    for line in open(help_path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("  -") and line.split()[0] != "--help":
            yield "--help", line


def shown(default):
    return f"`{default}`" if default else "none"


readme = collect("README.md", readme_rows(), r"\| `(-[^`]+)` \| .+ \| (?:`([^`]*)`|none) \|",
                 "a | `flag` | meaning | `default` | row")
usage = collect("--help", help_lines(), r"  (-\S+) \S+ +.* \((?:default: none|default (.*))\)",
                "a flag line ending in (default ...)")
if not readme:
    problems.append("README.md has no flag rows under '## Trainer flags'")
for flag in usage:
    if flag not in readme:
        problems.append(f"{flag}: in --help but not in README.md's flag table")
    elif readme[flag] != usage[flag]:
        problems.append(f"{flag}: default {shown(usage[flag])} in --help but {shown(readme[flag])} in README.md")
for flag in readme:
    if flag not in usage:
        problems.append(f"{flag}: in README.md's flag table but not in --help")

for problem in problems:
    print(f"FAIL: {problem}")
if problems:
    print(f"{len(problems)} failures")
    sys.exit(1)
print(f"README.md's flag table and --help list the same {len(usage)} flags with the same defaults")
