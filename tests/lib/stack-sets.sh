# stack_set CACHE SET BINARY: the folder of the newest complete build of the 1.36 stack's
# SET (images/stack/compile.sh) in CACHE whose BINARY runs here (the cache may also hold
# arm64 builds); nothing when there is none. Used by the tests and benchmarks that run the
# stack's binaries only if already compiled (compiling takes 40+ minutes).
stack_set() {
  local x
  for x in $(ls -td "$1"/stack/bin/"$2"/*/ 2>/dev/null); do
    [ -f "$x/.complete" ] && "$x/$3" --version >/dev/null 2>&1 && { echo "${x%/}"; return; }
  done
}
