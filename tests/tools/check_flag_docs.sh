#!/usr/bin/env bash
# README.md's "Trainer flags" table, written by hand, against `./train_gpt2 --help`, printed from
# the flag table in llmc/train/options.cpp: both must list the same flags with the same defaults.
# A README row is "| `FLAG` | meaning | `DEFAULT` |", or "none" in place of `DEFAULT` when there is
# no default; a --help line is "  FLAG <value> meaning (default DEFAULT)" or "... (default: none)".
# --help itself takes no value and has no default, so it is in neither comparison.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"

./train_gpt2 --help >"$tmp/help.txt"
python3 tests/lib/flag_docs.py README.md "$tmp/help.txt"
# The speed switches (environment variables, not flags): docs/cuda-trainer.md's table against the table
# the trainer reads them from.
python3 tests/lib/speed_switch_docs.py llmc/cuda/speed_switches.def docs/cuda-trainer.md
