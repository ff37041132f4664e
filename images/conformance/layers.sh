# shellcheck shell=bash
# Sourced by test-images.sh (and part of its cache key): the helpers that copy a program
# from the extracted Debian packages into a layer folder, with exactly the shared
# libraries it loads. They read `triplet`, `packages`, `deb` (the extracted packages),
# `below` (the layers under the one being filled) and `L_busybox`, and stop the build
# with `die`.

# chase ROOT PATH prints PATH and, while it is a symbolic link, the path it points to (as
# seen inside ROOT), so that copying each keeps links as links and brings their targets.
chase() {
  local root=$1 p=$2 t n=0
  while :; do
    echo "$p"
    [ -L "$root$p" ] || return 0
    t=$(readlink "$root$p")
    case $t in /*) ;; *) t=$(dirname "$p")/$t ;; esac
    p=$(realpath -m -s "$t")
    n=$((n + 1))
    [ "$n" -lt 40 ] || die "$root$2: too many levels of symbolic links"
  done
}
# The loader's folders in an image without /etc/ld.so.cache (none has one), in its order.
lib_dirs=("/lib/$triplet" "/usr/lib/$triplet" /lib /usr/lib)
# libs ROOT FILE... prints FILE... and every shared library they load, recursively: each
# NEEDED name looked up as the loader does (RUNPATH, then lib_dirs) in ROOT. A name found
# nowhere stops the build: the image would not start.
libs() {
  local root=$1
  shift
  local -A seen=()
  local queue=("$@") f real dyn runpath name d hit
  local -a dirs rp
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    real=$(chase "$root" "$f" | tail -n 1)
    [ -z "${seen[$real]:-}" ] || continue
    seen[$real]=1
    echo "$f"
    dyn=$(readelf -dW "$root$real" 2>/dev/null) || continue # a script or data file
    runpath=$(sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p' <<<"$dyn")
    rp=()
    [ -z "$runpath" ] || IFS=: read -ra rp <<<"${runpath//\$ORIGIN/$(dirname "$real")}"
    dirs=("${rp[@]}" "${lib_dirs[@]}")
    while read -r name; do
      # The loader itself (the program interpreter, in the base layer) is never searched for.
      case $name in ld-linux-*) continue ;; esac
      hit=""
      for d in "${dirs[@]}"; do
        if [ -e "$root$d/$name" ]; then
          hit=$d/$name
          break
        fi
      done
      [ -n "$hit" ] || die "$name, which $real loads, is in none of the extracted packages' library folders"
      queue+=("$hit")
    done < <(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<<"$dyn")
  done
}
# put [-f] ROOT LAYER PATH... copies each PATH (with its links' targets) from ROOT into the
# layer folder LAYER, except what a layer below it (the array `below`) already holds: a
# library the image has already. With -f it copies them anyway: a program that is to
# replace the busybox applet of its name (iproute2's /bin/ip).
below=()
put() {
  local force="" root layer p q d skip
  if [ "$1" = -f ]; then
    force=1
    shift
  fi
  root=$1 layer=$2
  shift 2
  for p in "$@"; do
    [ -e "$root$p" ] || [ -L "$root$p" ] || die "$p is not in the extracted packages (${packages[*]})"
    while read -r q; do
      [ -e "$layer$q" ] || [ -L "$layer$q" ] && continue
      skip=""
      for d in "${below[@]}"; do
        if [ -z "$force" ] && { [ -e "$d$q" ] || [ -L "$d$q" ]; }; then skip=1; fi
      done
      [ -n "$skip" ] && continue
      mkdir -p "$layer$(dirname "$q")"
      cp -a "$root$q" "$layer$q"
    done < <(chase "$root" "$p")
  done
}
# put_programs LAYER PATH... puts programs, and the libraries they load that the layers
# below lack.
put_programs() {
  local layer=$1 list
  shift
  list=$(libs "$deb" "$@") || exit 1
  put -f "$deb" "$layer" "$@"
  # shellcheck disable=SC2086 # paths in the packages have no spaces
  put "$deb" "$layer" $list
}
# shadow LAYER: a program the layer adds under /usr/bin or /usr/sbin whose name is also a
# busybox applet gets a /bin link too, so `/bin/NAME` reaches the same program as PATH does.
shadow() {
  local layer=$1 f name
  for f in "$layer"/usr/bin/* "$layer"/usr/sbin/*; do
    [ -e "$f" ] || continue
    name=$(basename "$f")
    if [ -L "$L_busybox/bin/$name" ] && [ ! -e "$layer/bin/$name" ] && [ ! -L "$layer/bin/$name" ]; then
      mkdir -p "$layer/bin"
      ln -s "${f#"$layer"}" "$layer/bin/$name"
    fi
  done
}
