// jsontree.js — the live JSON tree of the agent state. Objects and arrays
// are <details>; which ones are open is remembered by JSON Pointer across
// re-renders, so a state that changes many times a second does not fold up
// under the reader's cursor.
import { h } from './dom.js';

export class JsonTree {
  constructor(root) {
    this.root = root;
    this.open = new Set(['']); // pointers of open containers
    this.depthOpen = 2;        // containers this shallow start open
    this.seen = new Set();
    root.addEventListener('toggle', e => {
      const p = e.target.dataset && e.target.dataset.ptr;
      if (p == null) return;
      if (e.target.open) this.open.add(p); else this.open.delete(p);
    }, true);
  }

  render(value) {
    this.root.replaceChildren(this.node(value, '', null, 0));
  }

  node(v, ptr, key, depth) {
    const label = key == null ? null : h('span', { class: 'k' }, `${key}: `);
    if (v !== null && typeof v === 'object') {
      const arr = Array.isArray(v);
      const entries = arr ? v.map((x, i) => [String(i), x]) : Object.entries(v);
      if (!this.seen.has(ptr)) {
        this.seen.add(ptr);
        if (depth < this.depthOpen) this.open.add(ptr);
      }
      const d = h('details', { 'data-ptr': ptr },
        h('summary', null, label, arr ? `[${entries.length}]` : `{${entries.length}}`));
      d.open = this.open.has(ptr);
      for (const [k, x] of entries) d.append(this.node(x, `${ptr}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, k, depth + 1));
      return d;
    }
    const cls = typeof v === 'string' ? 's' : typeof v === 'number' ? 'n' : typeof v === 'boolean' ? 'b' : 'z';
    return h('div', { class: 'leaf' }, label, h('span', { class: cls }, JSON.stringify(v)));
  }
}
