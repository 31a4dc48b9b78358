# shellcheck shell=bash
# The speed switches' table (llmc/cuda/speed_switches.def) for the scripts that run every switch:
# sourced from the repository root.

# One line per switch: "VARIABLE default|other|...".
speed_switch_rows() {
  sed -n 's/^LLMC_SPEED_SWITCH([^,]*,[^,]*, *"\([A-Z0-9_]*\)", *"\([^"]*\)", *".*")$/\1 \2/p' \
    llmc/cuda/speed_switches.def
}

# "VARIABLE=VALUE ..." for the FP8 switches (LLMC_FP8_*) only, each at its last value: every FP8
# switch on (each has two values, the default off and the path the FP8 issue's GPU run measures).
fp8_switches_on_env() {
  local variable values out=""
  while read -r variable values; do
    [[ $variable == LLMC_FP8_* ]] && out+="${out:+ }$variable=${values##*|}"
  done < <(speed_switch_rows)
  echo "$out"
}
