// replay.mjs — test driver for static/viewdoc.js (run by viewchange_test.go).
// stdin: JSONL, each line {"payload": <SSE payload>, "want": <view document>
// or absent, "resync": true when the payload must be refused}. It applies
// the payloads in order and checks the held document after each.
// stdout: {"ok": n, "errors": [...]}.
import { apply, ResyncNeeded, deepEqual } from '../static/viewdoc.js';
import { readFileSync } from 'node:fs';

const lines = readFileSync(0, 'utf8').split('\n').filter(l => l.trim() !== '');
const holder = { view: null };
let ok = 0;
const errors = [];
for (const [n, line] of lines.entries()) {
  const step = JSON.parse(line);
  try {
    apply(holder, step.payload);
    if (step.resync) { errors.push(`line ${n}: accepted a payload that needs a resync`); continue; }
  } catch (e) {
    if (!(e instanceof ResyncNeeded)) { errors.push(`line ${n}: ${e.stack}`); continue; }
    if (!step.resync) { errors.push(`line ${n}: unexpected resync: ${e.message}`); continue; }
    ok++;
    continue;
  }
  if ('want' in step && !deepEqual(holder.view, step.want)) {
    errors.push(`line ${n}: held view differs\nheld: ${JSON.stringify(holder.view).slice(0, 800)}\nwant: ${JSON.stringify(step.want).slice(0, 800)}`);
    if (errors.length > 3) break;
    continue;
  }
  ok++;
}
process.stdout.write(JSON.stringify({ ok, errors }) + '\n');
