// node-pg against `skiff sql` (run by test/clients/test_sql.py): parameters through the
// extended protocol (Parse/Bind/Describe/Execute). Prints one JSON line with the results.
'use strict';
const { Client } = require('pg');

async function main() {
  const port = Number(process.argv[2]);
  const c = new Client({ host: '127.0.0.1', port, user: 'skiff', database: 'skiff' });
  await c.connect();
  const n = await c.query('SELECT count(*) AS count FROM events WHERE partition = $1 AND "offset" >= $2', [1, 10]);
  const first = await c.query(
    "SELECT json_extract(value, '$.kind') AS kind, json_extract(value, '$.i') AS i FROM events WHERE json_extract(value, '$.i') = $1",
    [0]);
  let syntax = null;
  try {
    await c.query('SELEC $1', [1]);
  } catch (e) {
    syntax = e.code;
  }
  if (syntax !== '42601') throw new Error(`a syntax error answered ${syntax}`);
  const again = await c.query('SELECT $1::text AS echo', ['still fine']);
  if (again.rows[0].echo !== 'still fine') throw new Error(`after an error: ${JSON.stringify(again.rows)}`);
  await c.end();
  console.log(JSON.stringify({ count: Number(n.rows[0].count), kind: first.rows[0].kind, i: Number(first.rows[0].i) }));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
