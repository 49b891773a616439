// kafkajs 2.2.4 transactions against skiff (run by test/clients/test_transactions.py, which
// starts the broker and sets SKIFF_BOOTSTRAP): a transactional producer commits, aborts, and
// commits with sendOffsets; a read_committed consumer (readUncommitted: false) sees exactly the
// committed records, and the group's committed offsets are the ones sendOffsets carried.
// Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const bootstrap = process.env.SKIFF_BOOTSTRAP
if (!bootstrap) throw new Error('SKIFF_BOOTSTRAP is not set')
const suffix = Math.random().toString(16).slice(2, 10)
const topic = `kjs-txn-${suffix}`
const inTopic = `kjs-txn-in-${suffix}`
const offsetsGroup = `kjs-txn-offsets-${suffix}`
const readerGroup = `kjs-txn-reader-${suffix}`
const transactionalId = `kjs-txn-id-${suffix}`

const kafka = new Kafka({
  clientId: 'skiff-kafkajs-txn-test',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 5, initialRetryTime: 200 },
})

const step = (msg) => console.log(`    kafkajs: ${msg}`)

function batch (tag, n) {
  const out = []
  for (let i = 0; i < n; i++) out.push({ partition: i % 2, key: `${tag}-${i}`, value: `${tag}-${i}` })
  return out
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({
    topics: [{ topic, numPartitions: 2 }, { topic: inTopic, numPartitions: 2 }], waitForLeaders: true,
  }), true, 'createTopics')

  // Input records whose offsets sendOffsets commits (non-transactional).
  const plain = kafka.producer({ allowAutoTopicCreation: false })
  await plain.connect()
  await plain.send({ topic: inTopic, acks: -1, messages: batch('in', 20) })
  await plain.disconnect()

  const producer = kafka.producer({ transactionalId, maxInFlightRequests: 1, idempotent: true,
    allowAutoTopicCreation: false, transactionTimeout: 30000 })
  await producer.connect()

  let txn = await producer.transaction()
  await txn.send({ topic, messages: batch('c1', 30) })
  await txn.commit()
  step('send + commit ok')

  txn = await producer.transaction()
  await txn.send({ topic, messages: batch('a1', 30) })
  await txn.abort()
  step('send + abort ok')

  txn = await producer.transaction()
  await txn.send({ topic, messages: batch('c2', 30) })
  await txn.sendOffsets({
    consumerGroupId: offsetsGroup,
    topics: [{ topic: inTopic, partitions: [{ partition: 0, offset: '7' }, { partition: 1, offset: '10' }] }],
  })
  await txn.commit()
  step('send + sendOffsets + commit ok')

  // One more abort after the last commit: a read_committed reader stops before it.
  txn = await producer.transaction()
  await txn.send({ topic, messages: batch('a2', 10) })
  await txn.sendOffsets({
    consumerGroupId: offsetsGroup,
    topics: [{ topic: inTopic, partitions: [{ partition: 0, offset: '9' }] }],
  })
  await txn.abort()
  step('send + sendOffsets + abort ok')
  await producer.disconnect()

  const expected = new Set([...batch('c1', 30), ...batch('c2', 30)].map(m => m.value))
  const seen = []
  const consumer = kafka.consumer({ groupId: readerGroup, readUncommitted: false,
    sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  let done
  const allSeen = new Promise(resolve => { done = resolve })
  await consumer.run({
    eachMessage: async ({ partition, message }) => {
      seen.push({ partition, offset: Number(message.offset), value: message.value.toString() })
      if (seen.length >= expected.size) done()
    },
  })
  const timer = setTimeout(() => done(), 30000)
  await allSeen
  clearTimeout(timer)
  // Anything beyond the committed records (an aborted one) would arrive right behind them.
  await new Promise(resolve => setTimeout(resolve, 1500))
  await consumer.disconnect()

  const values = seen.map(s => s.value)
  const aborted = values.filter(v => v.startsWith('a'))
  assert.deepEqual(aborted, [], `read_committed consumer saw records of aborted transactions: ${aborted.slice(0, 5)}`)
  assert.equal(values.length, expected.size,
    `read_committed consumer saw ${values.length} records, expected ${expected.size}`)
  assert.deepEqual(new Set(values), expected, 'read_committed consumer saw exactly the committed records')
  for (const p of [0, 1]) {
    const offs = seen.filter(s => s.partition === p).map(s => s.offset)
    assert.ok(offs.every((o, i) => i === 0 || o > offs[i - 1]), `partition ${p}: offsets increasing`)
  }
  step(`read_committed consumer saw the ${values.length} committed records and none of the aborted`)

  const fetched = await admin.fetchOffsets({ groupId: offsetsGroup, topics: [inTopic] })
  const got = Object.fromEntries(fetched[0].partitions.map(p => [p.partition, p.offset]))
  assert.deepEqual(got, { 0: '7', 1: '10' }, `committed offsets of ${offsetsGroup}: ${JSON.stringify(got)}`)
  step('fetchOffsets shows the committed transaction\'s offsets, not the aborted one\'s')
  await admin.disconnect()
}

main().then(() => process.exit(0), (e) => {
  console.error(`    kafkajs: FAILED: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
