"""docs/cuda-trainer.md's speed switches against the trainer's tables. Its "## Speed switches" table
against llmc/cuda/speed_switches.def: the same switches, in the same order, with the same values (the
default first), each with why it is a switch (a real choice for a user, or what a GPU has yet to
measure) and a "measured on a GPU" entry (a figure or "not yet"). Its "### Settled by GPU runs" table
against retired_speed_switches (speed_switches.cpp, beside the .def): the same variables, each with
the path kept and the measurement that settled it.

    python3 tests/lib/speed_switch_docs.py llmc/cuda/speed_switches.def docs/cuda-trainer.md
"""
import os
import re
import sys


def table_rows(definition):
    rows = []
    text = open(definition).read()
    for line in text.splitlines():
        m = re.match(r'LLMC_SPEED_SWITCH\([^,]*,[^,]*,\s*"([A-Z0-9_]+)",\s*"([^"]*)",\s*".*"\)$', line)
        if m:
            rows.append((m.group(1), m.group(2).split("|")))
    if len(rows) != text.count("\nLLMC_SPEED_SWITCH("):
        sys.exit(f"{definition}: {text.count(chr(10) + 'LLMC_SPEED_SWITCH(')} rows, {len(rows)} of them on one line "
                 "in the form the scripts read (each row must be one line)")
    return rows


def retired_variables(source):
    text = open(source).read()
    m = re.search(r"retired_speed_switches\(\) \{(.*?)\n\}", text, re.S)
    if not m:
        sys.exit(f"{source}: no retired_speed_switches()")
    return re.findall(r'\{"(LLMC_[A-Z0-9_]+)",', m.group(1))


def section(text, heading, doc):
    """The text under `heading` (a line of its own) up to the next heading of any level."""
    m = re.search(r"^" + re.escape(heading) + r"$(.*?)(?=^#)", text + "\n#", re.M | re.S)
    if not m:
        sys.exit(f"{doc}: no '{heading}' section")
    return m.group(1)


def doc_rows(text, cells_wanted, doc, heading):
    """The rows of the table under `heading` whose first cell is `LLMC_...`: their cells."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(LLMC_[A-Z0-9_]+)`", cells[0]) if cells else None
        if m:
            if len(cells) != cells_wanted:
                sys.exit(f"{doc} ({heading}): the row of {m.group(1)} has {len(cells)} cells, not {cells_wanted}")
            rows.append([m.group(1)] + cells[1:])
    return rows


def main():
    definition, doc = sys.argv[1], sys.argv[2]
    source = os.path.join(os.path.dirname(definition), "speed_switches.cpp")
    want = table_rows(definition)
    if not want:
        sys.exit(f"{definition}: no LLMC_SPEED_SWITCH rows")
    retired = retired_variables(source)
    text = open(doc).read()
    got = doc_rows(section(text, "## Speed switches", doc), 5, doc, "Speed switches")
    settled = doc_rows(section(text, "### Settled by GPU runs", doc), 3, doc, "Settled by GPU runs")
    errors = []
    if [w[0] for w in want] != [g[0] for g in got]:
        errors.append(f"switches: {definition} has {[w[0] for w in want]}, {doc} {[g[0] for g in got]}")
    for (variable, values), (doc_variable, values_cell, _, reason, measured) in zip(want, got):
        if variable != doc_variable:
            continue
        doc_values = re.findall(r"`([^`]+)`", values_cell)
        if values != doc_values:
            errors.append(f"{variable}: values {values} in {definition}, {doc_values} in {doc}")
        if not reason:
            errors.append(f"{variable}: no reason in {doc} (why it is a choice, or what a GPU has to measure)")
        if not measured:
            errors.append(f"{variable}: no 'measured on a GPU' entry in {doc} (a figure or 'not yet')")
    if sorted(retired) != sorted(s[0] for s in settled):
        errors.append(f"settled: {source} retires {sorted(retired)}, {doc} lists {sorted(s[0] for s in settled)}")
    for variable, kept, measurement in settled:
        if not kept or not measurement:
            errors.append(f"{variable}: the path kept and the measurement that settled it, both, in {doc}")
    if errors:
        sys.exit("\n".join(errors))
    print(f"speed switches: {len(want)} documented in {doc} as in {definition}, and the {len(retired)} retired "
          f"ones of {source}")


main()
