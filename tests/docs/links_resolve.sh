#!/usr/bin/env bash
# Every relative link in the repository's Markdown (README.md, BENCHMARKS.md, docs/**, and any other *.md
# outside build trees) points at a file or folder that exists inside the repository, and every #anchor
# names a heading (GitHub's slug of it) or an <a id/name> of the Markdown file it points into. Links to
# other sites are not fetched. Moving or renaming a heading or a file breaks a link here, not for a reader.
source "$(dirname "$0")/../lib.sh"
/usr/bin/python3 - "$ZT_SOURCE" <<'PY' || fail "broken links in the documents (above)"
import os, re, sys
root = os.path.realpath(sys.argv[1])
skip_dirs = {'.git', 'node_modules', 'data', 'runs', 'hf'}
docs = []
for d, subdirs, files in os.walk(root):
    subdirs[:] = sorted(s for s in subdirs if s not in skip_dirs and not s.startswith('build'))
    docs += [os.path.join(d, f) for f in sorted(files) if f.endswith('.md')]

fence = re.compile(r'^\s{0,3}(```|~~~)')
def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks, inline code spans removed."""
    inside = False
    for n, line in enumerate(open(path, encoding='utf-8'), 1):
        if fence.match(line):
            inside = not inside
            continue
        if not inside:
            yield n, line.rstrip('\n')

def slug(heading):
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link shows its text
    text = text.replace('`', '').replace('*', '').strip().lower()
    text = re.sub(r'[^\w\- ]', '', text)  # GitHub keeps letters, digits, '_', '-' and spaces
    return text.replace(' ', '-')

anchors_of = {}
def anchors(path):
    if path not in anchors_of:
        seen, found = {}, set()
        for _, line in prose_lines(path):
            m = re.match(r'^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                s = slug(m.group(1))
                k = seen.get(s, 0)
                seen[s] = k + 1
                found.add(s if k == 0 else f'{s}-{k}')
            found.update(re.findall(r'<a\s+(?:id|name)="([^"]+)"', line))
        anchors_of[path] = found
    return anchors_of[path]

link = re.compile(r'!?\[(?:[^\]]|\][^(])*?\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
refdef = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+"[^"]*")?\s*$')
problems, checked = [], 0
for doc in docs:
    rel_doc = os.path.relpath(doc, root)
    for n, line in prose_lines(doc):
        line = re.sub(r'(`+)(.+?)\1', '', line)
        targets = link.findall(line) + refdef.findall(line)
        for target in targets:
            if re.match(r'^[a-zA-Z][a-zA-Z0-9+.-]*:', target):
                continue  # another site (https:, mailto:): not fetched
            checked += 1
            path, _, anchor = target.partition('#')
            dest = os.path.realpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            where = f'{rel_doc}:{n}: ({target})'
            if os.path.commonpath([root, dest]) != root:
                problems.append(f'{where} leaves the repository')
            elif not os.path.exists(dest):
                problems.append(f'{where} names {os.path.relpath(dest, root)}, which does not exist')
            elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
                problems.append(f'{where} names #{anchor}, which no heading of {os.path.relpath(dest, root)} makes')
for p in problems:
    print('FAIL:', p)
if checked == 0:
    print('FAIL: no relative link found: the check would be vacuous')
    sys.exit(1)
print(f'{checked} relative links in {len(docs)} Markdown files; {len(problems)} broken')
sys.exit(1 if problems else 0)
PY
echo "PASS"
