// Reads an Iceberg table with icebird (an independent JavaScript Iceberg reader over hyparquet)
// and prints JSON: {"version", "snapshots", "schema", "rows": [...]} with every row's fields;
// bytes as hex, bigints as strings. Usage: node verify_iceberg.mjs TABLE_URL [METADATA_FILE]
// (run with the working directory test/clients/node so the pinned packages resolve).
import { createRequire } from 'node:module'
import path from 'node:path'
import url from 'node:url'

const here = path.dirname(url.fileURLToPath(import.meta.url))
const nodeDir = path.join(here, 'node')
const { icebergRead, icebergMetadata } = await import(path.join(nodeDir, 'node_modules/icebird/src/index.js'))
void createRequire

function plain(v) {
  if (v === null || v === undefined) return null
  if (typeof v === 'bigint') return v.toString()
  if (v instanceof Uint8Array) return Buffer.from(v).toString('hex')
  if (v instanceof Date) return v.toISOString()
  if (Array.isArray(v)) return v.map(plain)
  if (typeof v === 'object') {
    const o = {}
    for (const [k, x] of Object.entries(v)) o[k] = plain(x)
    return o
  }
  return v
}

const [tableUrl, metadataFileName] = process.argv.slice(2)
if (!tableUrl) {
  console.error('usage: node verify_iceberg.mjs TABLE_URL [METADATA_FILE]')
  process.exit(2)
}
const metadata = await icebergMetadata({ tableUrl, metadataFileName })
let rows = []
if (metadata['current-snapshot-id'] !== -1 && metadata['current-snapshot-id'] != null) {
  rows = await icebergRead({ tableUrl, metadata })
}
const schema = metadata.schemas.find(s => s['schema-id'] === metadata['current-schema-id'])
process.stdout.write(JSON.stringify({
  snapshots: (metadata.snapshots || []).length,
  current: String(metadata['current-snapshot-id']),
  schema,
  summary: (metadata.snapshots || []).map(s => s.summary),
  rows: rows.map(plain),
}))
