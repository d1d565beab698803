// metrics.js — live server figures from the Prometheus text endpoint of the
// process serving the dashboard: ingest events/s, messages sent to
// subscribers/s, publish-to-delivery latency (p50/p99 over the last
// interval, from histogram bucket deltas) and connected subscribers. Missing
// metrics (a fanout without ingest, or no /metrics at all) show as "–".

export class Metrics {
  constructor(url, els) { this.url = url; this.els = els; this.prev = null; }

  start() {
    if (!this.url || this.url === '-') return;
    const tick = async () => {
      try {
        const r = await fetch(this.url, { cache: 'no-store' });
        if (r.ok) this.update(parse(await r.text()), performance.now());
      } catch { /* keep the last figures */ }
    };
    tick();
    setInterval(tick, 2000);
  }

  update(m, now) {
    const cur = {
      now,
      ingest: sum(m, 'threadcast_ingest_events_total'),
      out: sum(m, 'threadcast_fanout_messages_enqueued_total'),
      buckets: buckets(m, 'threadcast_fanout_latency_seconds_bucket'),
    };
    const subs = sum(m, 'threadcast_fanout_subscribers');
    this.els.subs.textContent = subs == null ? '–' : String(subs);
    const p = this.prev;
    this.prev = cur;
    if (!p) return;
    const dt = (cur.now - p.now) / 1000;
    this.els.ingest.textContent = rate(cur.ingest, p.ingest, dt);
    this.els.out.textContent = rate(cur.out, p.out, dt);
    const d = cur.buckets.map((b, i) => ({ le: b.le, n: b.n - ((p.buckets[i] && p.buckets[i].n) || 0) }));
    const total = d.length ? d[d.length - 1].n : 0;
    this.els.lat.textContent = total > 0 ? `${fmt(quantile(d, total, 0.5))} / ${fmt(quantile(d, total, 0.99))}` : '–';
  }
}

// parse reads the Prometheus text format into [{name, labels, value}].
export function parse(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

function sum(m, name) {
  let s = null;
  for (const x of m) if (x.name === name && Number.isFinite(x.value)) s = (s || 0) + x.value;
  return s;
}

function buckets(m, name) {
  return m.filter(x => x.name === name).map(x => ({ le: x.labels.le === '+Inf' ? Infinity : Number(x.labels.le), n: x.value }))
    .sort((a, b) => a.le - b.le);
}

// quantile interpolates linearly inside the bucket holding rank q·total.
export function quantile(b, total, q) {
  const rank = q * total;
  let lo = 0, prevN = 0;
  for (const x of b) {
    if (x.n >= rank) {
      if (x.le === Infinity) return lo;
      return lo + (x.le - lo) * ((rank - prevN) / Math.max(x.n - prevN, 1e-9));
    }
    lo = x.le; prevN = x.n;
  }
  return lo;
}

function rate(a, b, dt) {
  if (a == null || b == null || dt <= 0) return '–';
  return String(Math.max(0, Math.round((a - b) / dt)));
}

function fmt(s) { return s < 1 ? `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms` : `${s.toFixed(2)} s`; }
