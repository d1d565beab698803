// threadlist.js — the tenant's thread list, however many threads it has.
//
// Rows are keyed by thread id: a thread's row is one element for as long as
// it is in view, and an update (status, last activity) changes that
// element's text in place. The list is virtualized: every row has the same
// height (rowHeight, which app.css repeats), the list element is as tall as
// all rows together, and only the rows in view (plus overscan above and
// below) are in the DOM, each placed at its position. Ten thousand threads
// cost the page a few dozen elements.
//
// Order: the most recent activity first (ties by thread id). Re-sorting
// moves rows under the reader, so it happens at most every resortMs, never
// while the pointer is over the list or pressed on it (a row must stay under
// the pointer from mouse-down to mouse-up for the click to land), and, when
// the list is scrolled away from its top, keeps the first row in view where
// it is. A thread first seen while the order is held goes at the end until
// the next re-sort.

import { h, ago } from './dom.js';

export const rowHeight = 34; // px; app.css: .thread-list li { height }
const overscan = 8;          // rows drawn beyond each edge of the view
const resortMs = 500;

export class ThreadList {
  // scroller is the element that scrolls, ol the list inside it, count the
  // element showing how many threads there are; open(id) opens a thread,
  // schedule() asks for a draw() at the next animation frame.
  constructor(scroller, ol, count, open, schedule) {
    this.scroller = scroller;
    this.ol = ol;
    this.count = count;
    this.threads = new Map(); // id -> {id, status, last (ms), live, v (version)}
    this.order = [];          // ids in list order (filtered)
    this.moved = new Set();   // ids with new activity since the last re-sort
    this.full = true;         // the next re-sort sorts everything
    this.rows = new Map();    // id -> {el, pill, when, v, at, sel, whenText}
    this.spare = [];          // row elements out of view, for reuse
    this.filter = '';
    this.selected = null;
    this.sortDue = true;      // the order needs a re-sort
    this.sortedAt = 0;
    this.hover = false;       // the pointer is over the list
    this.pressed = false;     // a button is down on the list
    this.dirty = true;        // draw() has something to do
    this.schedule = schedule;
    this.timer = 0;           // a draw at the end of resortMs is due
    ol.setAttribute('role', 'list');
    scroller.addEventListener('pointerenter', () => { this.hover = true; });
    scroller.addEventListener('pointerleave', () => { this.hover = false; this.touch(); });
    scroller.addEventListener('pointerdown', () => { this.pressed = true; });
    // The button may come up anywhere, even outside the window.
    const up = () => { if (this.pressed) { this.pressed = false; this.touch(); } };
    window.addEventListener('pointerup', up);
    window.addEventListener('pointercancel', up);
    scroller.addEventListener('scroll', () => this.touch(), { passive: true });
    new ResizeObserver(() => this.touch()).observe(scroller);
    ol.addEventListener('click', e => {
      const li = e.target.closest('li[data-thread]');
      if (li) open(li.dataset.thread);
    });
    ol.addEventListener('keydown', e => {
      const li = e.target.closest('li[data-thread]');
      if (li && (e.key === 'Enter' || e.key === ' ')) { e.preventDefault(); open(li.dataset.thread); }
    });
  }

  get held() { return this.hover || this.pressed; }

  // touch marks the list for a draw and asks for one.
  touch() { this.dirty = true; this.schedule(); }

  clear() {
    this.threads.clear();
    this.order = [];
    this.moved.clear();
    this.full = true;
    for (const r of this.rows.values()) r.el.remove();
    this.rows.clear();
    this.spare = [];
    this.ol.style.height = '0px';
    this.scroller.scrollTop = 0;
    this.sortDue = true;
    this.touch();
  }

  // live records a thread's update from the live list stream.
  live(id, status) {
    const t = this.get(id);
    if (status) t.status = status;
    t.last = Date.now();
    t.live = true;
    t.v++;
    this.moved.add(id);
    this.sortDue = true;
    this.touch();
  }

  // listed records a thread from a page of GET /v1/threads: what it says is
  // older than anything the live stream said, so it only fills gaps.
  listed(id, status, last) {
    const t = this.get(id);
    if (!t.live) {
      if (status) t.status = status;
      if (last > t.last) t.last = last;
      t.v++;
      this.full = this.sortDue = true;
      this.touch();
    }
  }

  // setStatus records the status of the open thread's view, which is newer
  // than the list's.
  setStatus(id, status) {
    const t = this.threads.get(id);
    if (t && status && t.status !== status) { t.status = status; t.v++; this.touch(); }
  }

  select(id) { this.selected = id; this.touch(); }

  setFilter(f) {
    f = f.trim().toLowerCase();
    if (f !== this.filter) { this.filter = f; this.full = this.sortDue = true; this.sortedAt = 0; this.touch(); }
  }

  // tick redraws the "time since" column.
  tick() { this.touch(); }

  get(id) {
    let t = this.threads.get(id);
    if (!t) {
      t = { id, status: '', last: 0, live: false, v: 0, i: -1 }; // i: position in order, -1 when not in it
      this.threads.set(id, t);
      if (this.held && this.matches(id)) { t.i = this.order.length; this.order.push(id); }
    }
    return t;
  }

  matches(id) { return !this.filter || id.toLowerCase().includes(this.filter); }

  // resort puts the list in order, keeping the first row in view in its
  // place when the list is scrolled away from its top. Live activity is
  // the newest there is, so between full sorts (after a listing page or a
  // filter change) the threads that had some move to the front, in O(n)
  // without sorting.
  resort(now) {
    const s = this.scroller;
    let anchor = null, offset = 0;
    if (s.scrollTop > 0 && this.order.length) {
      const i = Math.min(this.order.length - 1, Math.floor(s.scrollTop / rowHeight));
      anchor = this.order[i];
      offset = s.scrollTop - i * rowHeight;
    }
    const newer = (a, b) => (b.last - a.last) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
    const list = [];
    if (this.full) {
      for (const t of this.threads.values()) if (this.matches(t.id)) list.push(t);
      list.sort(newer);
    } else {
      for (const id of this.moved) if (this.matches(id)) list.push(this.threads.get(id));
      list.sort(newer);
      for (const id of this.order) if (!this.moved.has(id)) list.push(this.threads.get(id));
    }
    for (const t of this.threads.values()) t.i = -1;
    this.order = list.map((t, i) => { t.i = i; return t.id; });
    this.moved.clear();
    this.full = this.sortDue = false;
    this.sortedAt = now;
    this.ol.style.height = `${this.order.length * rowHeight}px`;
    const a = anchor != null && this.threads.get(anchor);
    if (a && a.i >= 0) s.scrollTop = a.i * rowHeight + offset;
  }

  // draw brings the rows in view up to date; it returns false when there
  // was nothing to do.
  draw() {
    const now = Date.now();
    if (this.sortDue && !this.held) {
      const wait = this.sortedAt + resortMs - now;
      if (wait <= 0) this.resort(now);
      else if (!this.timer) this.timer = setTimeout(() => { this.timer = 0; this.touch(); }, wait);
    }
    if (!this.dirty) return false;
    this.dirty = false;
    this.ol.style.height = `${this.order.length * rowHeight}px`;
    const s = this.scroller;
    const top = s.scrollTop;
    const first = Math.max(0, Math.floor(top / rowHeight) - overscan);
    const last = Math.min(this.order.length, Math.ceil((top + s.clientHeight) / rowHeight) + overscan);
    const want = new Set(this.order.slice(first, last));
    for (const [id, r] of this.rows) {
      if (!want.has(id)) { r.el.remove(); this.spare.push(r); this.rows.delete(id); }
    }
    const size = String(this.order.length);
    for (let i = first; i < last; i++) {
      const id = this.order[i];
      const t = this.threads.get(id);
      let r = this.rows.get(id);
      if (!r) {
        r = this.spare.pop() || this.row();
        r.v = -1; r.at = -1; r.sel = null; r.whenText = null;
        r.el.dataset.thread = id;
        r.el.title = id;
        r.tid.data = id;
        this.rows.set(id, r);
        this.ol.append(r.el);
      }
      if (r.at !== i) {
        r.at = i;
        r.el.style.transform = `translateY(${i * rowHeight}px)`;
        r.el.setAttribute('aria-posinset', String(i + 1));
      }
      if (r.size !== size) { r.size = size; r.el.setAttribute('aria-setsize', size); }
      if (r.v !== t.v) {
        r.v = t.v;
        r.pill.className = `pill ${t.status}`;
        r.pill.textContent = t.status || '·';
      }
      const sel = id === this.selected;
      if (r.sel !== sel) { r.sel = sel; r.el.classList.toggle('selected', sel); }
      const w = t.last ? ago(t.last, now) : '';
      if (r.whenText !== w) { r.whenText = w; r.when.data = w; }
    }
    const n = this.threads.size;
    this.count.textContent = this.filter ? `${this.order.length} of ${n}` : `${n}`;
    return true;
  }

  row() {
    const pill = h('span', { class: 'pill' });
    const tid = document.createTextNode('');
    const when = document.createTextNode('');
    const el = h('li', { role: 'listitem' }, pill, h('span', { class: 'tid' }, tid), h('span', { class: 'when' }, when));
    el.tabIndex = 0;
    return { el, pill, tid, when };
  }
}
