"""docs/cuda-trainer.md's speed-switch table against llmc/cuda/speed_switches.def: the same
switches, in the same order, with the same values (the default first), each with an estimate and a
"measured on a GPU" entry (a figure or "not yet").

    python3 tests/lib/speed_switch_docs.py llmc/cuda/speed_switches.def docs/cuda-trainer.md
"""
import re
import sys


def table_rows(definition):
    rows = []
    text = open(definition).read()
    for line in text.splitlines():
        m = re.match(r'LLMC_SPEED_SWITCH\([^,]*,[^,]*,\s*"([A-Z0-9_]+)",\s*"([^"]*)",\s*"([^"]*)",\s*".*"\)$', line)
        if m:
            rows.append((m.group(1), m.group(2).split("|")))
    if len(rows) != text.count("\nLLMC_SPEED_SWITCH("):
        sys.exit(f"{definition}: {text.count(chr(10) + 'LLMC_SPEED_SWITCH(')} rows, {len(rows)} of them on one line "
                 "in the form the scripts read (each row must be one line)")
    return rows


def doc_rows(doc):
    text = open(doc).read()
    section = text.split("## Speed switches", 1)
    if len(section) < 2:
        sys.exit(f"{doc}: no '## Speed switches' section")
    rows = []
    for line in section[1].split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(LLMC_[A-Z0-9_]+)`", cells[0]) if cells else None
        if m:
            if len(cells) != 5:
                sys.exit(f"{doc}: the row of {m.group(1)} has {len(cells)} cells, not 5")
            values = re.findall(r"`([^`]+)`", cells[1])
            rows.append((m.group(1), values, cells[3], cells[4]))
    return rows


def main():
    definition, doc = sys.argv[1], sys.argv[2]
    want = table_rows(definition)
    got = doc_rows(doc)
    if not want:
        sys.exit(f"{definition}: no LLMC_SPEED_SWITCH rows")
    errors = []
    if [w[0] for w in want] != [g[0] for g in got]:
        errors.append(f"switches: {definition} has {[w[0] for w in want]}, {doc} {[g[0] for g in got]}")
    for (variable, values), (doc_variable, doc_values, estimate, measured) in zip(want, got):
        if variable != doc_variable:
            continue
        if values != doc_values:
            errors.append(f"{variable}: values {values} in {definition}, {doc_values} in {doc}")
        if not estimate:
            errors.append(f"{variable}: no estimate in {doc}")
        if not measured:
            errors.append(f"{variable}: no 'measured on a GPU' entry in {doc} (a figure or 'not yet')")
    if errors:
        sys.exit("\n".join(errors))
    print(f"speed switches: {len(want)} documented in {doc} as in {definition}")


main()
