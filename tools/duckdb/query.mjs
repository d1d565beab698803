// Runs one SQL query with DuckDB and prints its rows on stdout as one JSON
// array of objects. Column values are DuckDB's JSON forms: BIGINT and
// TIMESTAMP come out as strings, so that no integer loses precision; the
// query casts where a test wants another form.
//
//   node query.mjs "SELECT count(*) AS n FROM 'out/runs-*.parquet'"
//
// Exit status 0 with the rows; 1 with the error on stderr.
import { DuckDBInstance } from '@duckdb/node-api';

const sql = process.argv[2];
if (!sql) {
  console.error('usage: node query.mjs SQL');
  process.exit(2);
}
try {
  const db = await DuckDBInstance.create(':memory:');
  const conn = await db.connect();
  const reader = await conn.runAndReadAll(sql);
  process.stdout.write(JSON.stringify(reader.getRowObjectsJson()) + '\n');
  conn.closeSync();
} catch (err) {
  console.error(String(err && err.message || err));
  process.exit(1);
}
