# shellcheck shell=bash
# Sourced by the reference tests that compare with an npm package (tiktoken/run.sh, hf_tokenizer/run.sh).
# npm_ci_pinned SRC_DIR NODE_DIR MODULE: installs SRC_DIR's package.json + package-lock.json into NODE_DIR
# with `npm ci` unless that lock is already installed there with node_modules/MODULE present. Exits the
# test with 77 (skip) when node/npm are missing or npm cannot reach its registry, and with 1 when npm ci
# fails although the registry answers. The caller defines say().
npm_ci_pinned() {
  local src=$1 node_dir=$2 module=$3 log=$2/npm-ci.log
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then say "SKIP: node/npm not installed"; exit 77; fi
  mkdir -p "$node_dir"
  if cmp -s "$src/package-lock.json" "$node_dir/package-lock.json" && [ -d "$node_dir/node_modules/$module" ]; then
    return 0
  fi
  cp "$src/package.json" "$src/package-lock.json" "$node_dir/"
  if ! (cd "$node_dir" && npm ci --ignore-scripts --no-audit --no-fund >"$log" 2>&1); then
    if ! npm ping >/dev/null 2>&1; then
      say "SKIP: npm cannot reach its registry (npm ci failed: $(tail -n 2 "$log"))"
      exit 77
    fi
    cat "$log"; say "npm ci failed although the registry answers"; exit 1
  fi
}
