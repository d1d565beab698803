// replay.mjs — test driver for static/viewdoc.js (run by viewchange_test.go).
// stdin: JSONL, each line {"payload": <SSE payload>, "want": <view document>
// or absent, "resync": true when the payload must be refused, "pick": the
// members of the document "want" is compared on (absent: all)}, or
// {"page": <a messages page>, ...} to put older messages in front
// (prependPage). It applies the lines in order and checks the held document
// after each.
// stdout: {"ok": n, "errors": [...]}.
import { apply, prependPage, ResyncNeeded, deepEqual } from '../static/viewdoc.js';
import { readFileSync } from 'node:fs';

const lines = readFileSync(0, 'utf8').split('\n').filter(l => l.trim() !== '');
const holder = { view: null };
let ok = 0;
const errors = [];
for (const [n, line] of lines.entries()) {
  const step = JSON.parse(line);
  try {
    if (step.page) {
      if (!prependPage(holder, step.page)) { errors.push(`line ${n}: page refused`); continue; }
    } else apply(holder, step.payload);
    if (step.resync) { errors.push(`line ${n}: accepted a payload that needs a resync`); continue; }
  } catch (e) {
    if (!(e instanceof ResyncNeeded)) { errors.push(`line ${n}: ${e.stack}`); continue; }
    if (!step.resync) { errors.push(`line ${n}: unexpected resync: ${e.message}`); continue; }
    ok++;
    continue;
  }
  const held = step.pick ? Object.fromEntries(step.pick.map(k => [k, holder.view[k]])) : holder.view;
  const want = step.pick && step.want ? Object.fromEntries(step.pick.map(k => [k, step.want[k]])) : step.want;
  if ('want' in step && !deepEqual(held, want)) {
    errors.push(`line ${n}: held view differs at ${firstDiff(held, want)}\nheld: ${JSON.stringify(held).slice(0, 800)}\nwant: ${JSON.stringify(want).slice(0, 800)}`);
    if (errors.length > 3) break;
    continue;
  }
  ok++;
}
process.stdout.write(JSON.stringify({ ok, errors }) + '\n');

// firstDiff names the first place where a and b differ, as a JSON pointer.
function firstDiff(a, b, at = '') {
  if (deepEqual(a, b)) return null;
  if (a && b && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b)) {
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      if (!deepEqual(a[k], b[k])) return firstDiff(a[k], b[k], `${at}/${k}`);
    }
  }
  return `${at || '/'} (held ${JSON.stringify(a)?.slice(0, 200)}, want ${JSON.stringify(b)?.slice(0, 200)})`;
}
