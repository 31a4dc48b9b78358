#!/usr/bin/env bash
# llmc_snapshot.sh DEST: llm.c's train_gpt2cu for the side-by-side benchmark, built here (no GPU
# needed) and copied to DEST with its COMMIT and the snapshots it came from (DEST/snapshots, so that
# a GPU machine where the binary does not start can build it again: scripts/gpu_session.sh). This is
# what `make gpu-dist` carries as build/gpu-dist/llmc.
# The sources: LLMC_EXTERNAL/llm.c and LLMC_EXTERNAL/cudnn-frontend (default external/, git-ignored;
# nothing of theirs is committed), unpacked first when missing from the snapshots in LLMC_SNAPSHOTS
# (default ../shared/external: llm.c-<commit>.tar.gz and cudnn-frontend-<version>-include.tar.gz,
# both MIT). The build is dev/bench/vs_llmc.sh's (VS_LLMC_BUILD_ONLY=1) in LLMC_WORK (default
# build/vs_llmc), for sm_90 unless GPU_COMPUTE_CAPABILITY says otherwise; a build newer than all its
# inputs is kept.
set -u
cd "$(dirname "$0")/.." || exit 1
die() { echo "llmc_snapshot: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: scripts/llmc_snapshot.sh DEST"
dest=$1
snapshots=${LLMC_SNAPSHOTS:-../shared/external}
external=${LLMC_EXTERNAL:-external}
work=${LLMC_WORK:-build/vs_llmc}
mkdir -p "$external"
tarballs=()
unpack() {  # unpack NAME PATTERN: $external/NAME from the snapshot matching PATTERN, unless it is there
  local tarball
  tarball=$(ls "$snapshots"/$2 2>/dev/null | head -n 1)
  [ -n "$tarball" ] && tarballs+=("$tarball")
  [ -d "$external/$1" ] && return 0
  [ -n "$tarball" ] || die "$external/$1 is missing and $snapshots has no $2 to unpack it from (LLMC_SNAPSHOTS)"
  tar xzf "$tarball" -C "$external" || die "could not unpack $tarball"
  [ -d "$external/$1" ] || die "$tarball did not unpack to $1/"
}
unpack llm.c 'llm.c-*.tar.gz'
unpack cudnn-frontend 'cudnn-frontend-*-include.tar.gz'
built=$work/llm.c/train_gpt2cu
# Built already, after every input changed: kept (the build takes a minute of nvcc).
if [ -x "$built" ] && [ -f "$work/llm.c/COMMIT" ] && [ -z "${GPU_COMPUTE_CAPABILITY:-}" ] &&
  [ -z "$(find dev/bench/vs_llmc.sh scripts/llmc_snapshot.sh "$external/llm.c" "$external/cudnn-frontend" \
    -newer "$built" -print -quit)" ]; then
  echo "llmc_snapshot: $built is up to date"
else
  VS_LLMC_BUILD_ONLY=1 VS_LLMC_WORK=$work GPU_COMPUTE_CAPABILITY=${GPU_COMPUTE_CAPABILITY:-90} \
    bash dev/bench/vs_llmc.sh "$external/llm.c" "$external/cudnn-frontend" || die "building llm.c failed"
fi
rm -rf "$dest"
mkdir -p "$dest/snapshots"
cp "$built" "$work/llm.c/COMMIT" "$dest/" || die "no train_gpt2cu or COMMIT in $work/llm.c"
[ ${#tarballs[@]} -eq 0 ] || cp "${tarballs[@]}" "$dest/snapshots/"
echo "llmc_snapshot: llm.c $(cat "$dest/COMMIT") in $dest (snapshots: ${#tarballs[@]})"
