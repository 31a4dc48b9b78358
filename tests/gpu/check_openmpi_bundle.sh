#!/usr/bin/env bash
# The Open MPI runtime that `make gpu-dist` carries (scripts/bundle_openmpi.sh), on a machine whose
# own Open MPI is hidden: in a private mount namespace, Open MPI's library, plugin, help-file and
# configuration folders, PMIx's, every system copy of a library the bundle carries and Open MPI's
# programs are covered (folders by an empty folder, files by /dev/null, so that loading one fails
# loudly). There, in a clean environment (env -i), the bundle's mpirun must start two ranks of the
# collectives test (tests/dist/test_collectives.cpp, whose ranks check every collective against
# closed-form sums); and, as controls that the hiding works, the test binary alone and the bundled
# launcher without its environment (orterun called directly) must both fail.
# Skips (77) where a mount namespace cannot be made (not root, or no CAP_SYS_ADMIN).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
source "$(dirname "$0")/../lib/common.sh"
if ! unshare -m true 2>/dev/null; then
  echo "SKIP: no mount namespace here (unshare -m needs root with CAP_SYS_ADMIN) to hide the system's Open MPI in"
  exit 77
fi
make --no-print-directory -s build/mpi_tests/test_collectives
bundle=$PWD/$tmp/dist
mkdir -p "$bundle/bin"
bash scripts/bundle_openmpi.sh "$bundle" >"$tmp/bundle.log" 2>&1 ||
  { cat "$tmp/bundle.log"; echo "FAIL: scripts/bundle_openmpi.sh"; exit 1; }
cat "$tmp/bundle.log"

# What to hide, from the system's own Open MPI: its folders (ompi_info's paths, PMIx's prefix)...
info=$(ompi_info --parsable --path all)
path_of() { sed -n "s/^path:$1://p" <<<"$info" | head -n 1; }
pmix=$(readlink -f "$(ldd "$(path_of pkglibdir)"/mca_pmix_*.so | awk '/libpmix\.so/ { print $3; exit }')")
hidden_dirs=("$(path_of libdir)" "$(path_of pkglibdir)" "$(path_of pkgdatadir)" "$(path_of sysconfdir)"
  "$(dirname "$(dirname "$pmix")")")
# ...and the files: the programs, and the system copy of every library in the bundle.
hidden_files=()
for f in orterun orted ompi_info; do hidden_files+=("$(readlink -f "$(path_of bindir)/$f")"); done
loader_cache=$(ldconfig -p)
for lib in "$bundle"/openmpi/lib/*.so*; do
  system_copy=$(awk -v n="$(basename "$lib")" '$1 == n { print $NF; exit }' <<<"$loader_cache")
  [ -n "$system_copy" ] && hidden_files+=("$(readlink -f "$system_copy")")
done
mkdir -p "$tmp/empty" "$tmp/run"
# Sorted, a folder comes before what is inside it: what lies in a hidden folder is hidden with it.
printf '%s\n' "${hidden_dirs[@]}" | sort -u | awk 'n == 0 || index($0, last "/") != 1 { print; last = $0; n++ }' \
  >"$tmp/hidden_dirs.txt"
printf '%s\n' "${hidden_files[@]}" | sort -u | awk 'NR == FNR { dirs[NR] = $0; next }
  { for (i in dirs) if (index($0, dirs[i] "/") == 1) next; print }' "$tmp/hidden_dirs.txt" - >"$tmp/hidden_files.txt"

# In the namespace: hide, then the three runs; each prints "<name> exit <status>".
unshare -m --propagation private bash -s "$PWD/$tmp" "$bundle" >"$tmp/hidden.log" 2>&1 <<'EOF'
tmp=$1 bundle=$2
while read -r d; do mount --bind "$tmp/empty" "$d"; done <"$tmp/hidden_dirs.txt"
while read -r f; do mount --bind /dev/null "$f"; done <"$tmp/hidden_files.txt"
clean=(env -i PATH=/usr/bin:/bin HOME="$HOME")
"${clean[@]}" build/mpi_tests/test_collectives 1 none "$tmp/run" >"$tmp/alone.out" 2>&1
echo "alone exit $?"
# mpirun forwards its stdin to rank 0: /dev/null, not the rest of this script.
"${clean[@]}" timeout 60 "$bundle/openmpi/bin/orterun" --allow-run-as-root --oversubscribe -np 2 \
  build/mpi_tests/test_collectives 2 openmpi "$tmp/run" </dev/null >"$tmp/bare.out" 2>&1
echo "bare exit $?"
"${clean[@]}" timeout 120 "$bundle/bin/mpirun" --allow-run-as-root --oversubscribe -np 2 \
  build/mpi_tests/test_collectives 2 openmpi "$tmp/run" </dev/null >"$tmp/bundled.out" 2>&1
echo "bundled exit $?"
EOF
cat "$tmp/hidden.log"
status() { sed -n "s/^$1 exit //p" "$tmp/hidden.log"; }
# The loader's "error while loading shared libraries" (exit 127): the hidden copies are not found.
[ "$(status alone)" = 127 ] && grep -q 'libmpi.so.40' "$tmp/alone.out" ||
  fail "the collectives test alone did not fail to find libmpi: the hiding does not work ($tmp/alone.out)"
[ "$(status bare)" = 127 ] && grep -q 'libopen-rte.so.40' "$tmp/bare.out" ||
  fail "the bundled orterun without the launcher's environment did not fail to find libopen-rte ($tmp/bare.out)"
if [ "$(status bundled)" != 0 ] || ! grep -q '^collectives: .* passed on 2 ranks' "$tmp/bundled.out" ||
  grep -q -- '-----' "$tmp/bundled.out"; then
  fail "the bundled mpirun did not run 2 ranks of the collectives test (exit $(status bundled)):"
  tail -n 20 "$tmp/bundled.out"
fi
exit_if_failed
hidden="$(wc -l <"$tmp/hidden_dirs.txt") folders, $(wc -l <"$tmp/hidden_files.txt") files"
echo "bundled Open MPI: its mpirun ran 2 ranks with the system's Open MPI hidden ($hidden); without its variables, not"
