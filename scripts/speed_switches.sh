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
  local variable lever out=""
  while read -r variable _ lever; do out+="${out:+ }$variable=$lever"; done < <(speed_switch_rows)
  echo "$out"
}

# "VARIABLE=LEVER ..." for the FP8 switches (LLMC_FP8_*) only: every FP8 lever on.
fp8_levers_on_env() {
  local variable lever out=""
  while read -r variable _ lever; do
    [[ $variable == LLMC_FP8_* ]] && out+="${out:+ }$variable=$lever"
  done < <(speed_switch_rows)
  echo "$out"
}
