# shellcheck shell=bash
# The speed switches' table (llmc/cuda/speed_switches.def) for the scripts that run every switch:
# sourced from the repository root.

# One line per switch: "VARIABLE default|other|... LEVER".
speed_switch_rows() {
  sed -n 's/^LLMC_SPEED_SWITCH([^,]*,[^,]*, *"\([A-Z0-9_]*\)", *"\([^"]*\)", *"\([^"]*\)".*/\1 \2 \3/p' \
    llmc/cuda/speed_switches.def
}

# "VARIABLE=LEVER ..." for every switch: every lever on at once (llmc::all_levers_on).
all_levers_on_env() {
  local variable values lever out=""
  while read -r variable values lever; do out+="${out:+ }$variable=$lever"; done < <(speed_switch_rows)
  echo "$out"
}
