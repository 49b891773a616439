// Reads Parquet files with two readers written independently of skiff and prints, as JSON,
// what each one sees, normalized so they compare with each other and with the writer's intent:
//   node verify_parquet.mjs FILE...
// prints {"files": [{"path", "duckdb_rows", "hyparquet_rows", "schema", "kv"}]} where
//   - rows come from DuckDB's read_parquet (@duckdb/node-api) and from hyparquet;
//   - schema is DuckDB's parquet_schema (name, field_id, type, repetition, converted/logical);
//   - kv is DuckDB's parquet_kv_metadata;
//   - metadata is DuckDB's parquet_metadata (per row group and column: codec, encodings,
//     value count, statistics).
// Normal form of a value: null; int32 / double / boolean as JSON; int64 and timestamps
// (microseconds) as decimal strings; dates as days; binary as lowercase hex; strings as text;
// lists as arrays; structs as objects.
// node_modules is test/clients/node/node_modules (override with SKIFF_NODE_DIR).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const nodeDir = process.env.SKIFF_NODE_DIR || path.join(here, 'node');
const mod = (p) => import(pathToFileURL(path.join(nodeDir, 'node_modules', p)).href);

const duck = await mod('@duckdb/node-api/lib/index.js');
const hyparquet = await mod('hyparquet/src/index.js');
let compressors;
try {
  ({ compressors } = await mod('hyparquet-compressors/src/index.js'));
} catch {
  // hyparquet-compressors is a transitive dependency; fzstd alone covers ZSTD.
  const fzstd = await mod('fzstd/lib/index.mjs');
  compressors = { ZSTD: (input, outputLength) => fzstd.decompress(input, new Uint8Array(outputLength)) };
}

const hex = (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');

function normDuck(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return v.toString();
  if (typeof v !== 'object') return v;
  if ('micros' in v) return v.micros.toString(); // TIMESTAMP / TIMESTAMPTZ
  if ('days' in v) return v.days; // DATE
  if (v.bytes instanceof Uint8Array) return hex(v.bytes); // BLOB
  if (Array.isArray(v.items)) return v.items.map(normDuck); // LIST
  if (v.entries && typeof v.entries === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v.entries)) o[k] = normDuck(x);
    return o;
  }
  return String(v);
}

function normHy(v) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof Uint8Array) return hex(v);
  if (Array.isArray(v)) return v.map(normHy);
  if (typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = normHy(x);
    return o;
  }
  return v;
}

function jsonSafe(v) {
  return JSON.parse(JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? x.toString() : x)));
}

const instance = await duck.DuckDBInstance.create(':memory:');
const conn = await instance.connect();
const sqlString = (s) => `'${s.replaceAll("'", "''")}'`;

const out = { files: [] };
for (const file of process.argv.slice(2)) {
  const p = sqlString(path.resolve(file));
  const rowsReader = await conn.runAndReadAll(`SELECT * FROM read_parquet(${p})`);
  const duckdbRows = rowsReader.getRowObjects().map((r) => {
    const o = {};
    for (const [k, v] of Object.entries(r)) o[k] = normDuck(v);
    return o;
  });
  const schemaReader = await conn.runAndReadAll(
    `SELECT name, field_id, type, repetition_type, num_children, converted_type, logical_type FROM parquet_schema(${p})`);
  const schema = jsonSafe(schemaReader.getRowObjectsJS());
  const kvReader = await conn.runAndReadAll(
    `SELECT decode(key) AS key, decode(value) AS value FROM parquet_kv_metadata(${p})`);
  const kv = jsonSafe(kvReader.getRowObjectsJS());

  const metaReader = await conn.runAndReadAll(
    `SELECT row_group_id, path_in_schema, compression, encodings, num_values, stats_null_count, stats_min_value,
            stats_max_value FROM parquet_metadata(${p}) ORDER BY row_group_id, column_id`);
  const metadata = jsonSafe(metaReader.getRowObjectsJS());

  const buf = fs.readFileSync(file);
  const ab = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
  const hyRows = await hyparquet.parquetReadObjects({
    file: ab,
    compressors,
    utf8: false, // BYTE_ARRAY without a STRING annotation is binary, not text
    parsers: {
      // Exact values, not Date objects that drop the microseconds.
      timestampFromMicroseconds: (micros) => BigInt(micros),
      dateFromDays: (days) => days,
    },
  });
  out.files.push({ path: file, duckdb_rows: duckdbRows, hyparquet_rows: hyRows.map(normHy), schema, kv, metadata });
}
process.stdout.write(JSON.stringify(out) + '\n');
