#!/usr/bin/env node
// Decodes Avro object container files with avsc (and, as a second opinion, icebird's Avro
// reader, which the Iceberg table tests use) and prints one JSON document:
//   {"files": [{"path", "schema" (the writer schema with its field-id attributes), "metadata"
//   (header keys -> UTF-8 values), "codec", "records" (avsc), "icebird_records"}]}
// bytes/fixed print as lowercase hex, longs as exact integers, icebird's dates as ISO days.
//   node verify_avro.mjs FILE...
import { createRequire } from 'module';
import { readFileSync } from 'fs';
import { dirname, join } from 'path';
import { fileURLToPath, pathToFileURL } from 'url';

const nodeDir = join(dirname(fileURLToPath(import.meta.url)), 'node');
const require = createRequire(join(nodeDir, 'package.json'));
const avro = require('avsc');
const icebird = await import(pathToFileURL(join(nodeDir, 'node_modules', 'icebird', 'src', 'index.js')).href);

// avsc decodes longs into JS numbers and refuses those past 2^53; snapshot ids need all 64 bits.
const bigLong = avro.types.LongType.__with({
  fromBuffer: (buf) => buf.readBigInt64LE(),
  toBuffer: (n) => { const b = Buffer.alloc(8); b.writeBigInt64LE(BigInt(n)); return b; },
  fromJSON: BigInt,
  toJSON: (n) => n.toString(),
  isValid: (n) => typeof n === 'bigint',
  compare: (a, b) => (a < b ? -1 : a > b ? 1 : 0),
});

function withBigLongs(s) {
  if (s === 'long') return bigLong;
  if (Array.isArray(s)) return s.map(withBigLongs);
  if (s && typeof s === 'object') {
    if (s.type === 'long') return bigLong;
    if (s.type === 'record' || s.type === 'error') return { ...s, fields: s.fields.map((f) => ({ ...f, type: withBigLongs(f.type) })) };
    if (s.type === 'array') return { ...s, items: withBigLongs(s.items) };
    if (s.type === 'map') return { ...s, values: withBigLongs(s.values) };
    if (typeof s.type === 'object') return { ...s, type: withBigLongs(s.type) };
  }
  return s;
}

// To JSON-able values; bigints become tagged strings that print as bare integers.
function plain(v) {
  if (typeof v === 'bigint') return `@@int:${v}@@`;
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('hex');
  if (v instanceof Date) return v.toISOString().slice(0, 10);
  if (Array.isArray(v)) return v.map(plain);
  if (v === undefined) return null;
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

function decodeAvsc(path) {
  return new Promise((resolve, reject) => {
    const out = { path, schema: null, metadata: {}, codec: null, records: [] };
    avro.createFileDecoder(path, { parseHook: withBigLongs })
      .on('metadata', (type, codec, header) => {
        out.codec = codec;
        for (const [k, v] of Object.entries(header.meta)) out.metadata[k] = v.toString('utf8');
        out.schema = JSON.parse(out.metadata['avro.schema']);
      })
      .on('data', (r) => out.records.push(plain(r)))
      .on('error', reject)
      .on('end', () => resolve(out));
  });
}

function decodeIcebird(path) {
  const buf = readFileSync(path);
  const reader = { view: new DataView(buf.buffer, buf.byteOffset, buf.byteLength), offset: 0 };
  const { metadata, syncMarker } = icebird.avroMetadata(reader);
  return icebird.avroRead({ reader, metadata, syncMarker }).map(plain);
}

const files = [];
for (const path of process.argv.slice(2)) {
  const f = await decodeAvsc(path);
  f.icebird_records = decodeIcebird(path);
  files.push(f);
}
console.log(JSON.stringify({ files }, null, 1).replace(/"@@int:(-?\d+)@@"/g, '$1'));
