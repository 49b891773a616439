// kafkajs 2.2.4 against skiff (run by test/clients/test_kafkajs.py, which starts the broker and
// sets SKIFF_BOOTSTRAP): admin createTopics / listTopics / fetchTopicMetadata / fetchOffsets /
// deleteTopics, a producer (plain and gzip batches, keys and headers, acks=-1) and a consumer
// group reading everything back exactly once. Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const bootstrap = process.env.SKIFF_BOOTSTRAP
if (!bootstrap) throw new Error('SKIFF_BOOTSTRAP is not set')
const suffix = Math.random().toString(16).slice(2, 10)
const topic = `kafkajs-${suffix}`
const groupId = `kafkajs-group-${suffix}`
const N = 600

const kafka = new Kafka({
  clientId: 'skiff-kafkajs-test',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 4, initialRetryTime: 200 },
})

const step = (msg) => console.log(`    kafkajs: ${msg}`)

async function waitFor (pred, ms, what) {
  const end = Date.now() + ms
  for (;;) {
    if (await pred()) return
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

function message (i) {
  const value = i % 50 === 0 ? Buffer.alloc(0) : Buffer.from(`value-${i}-` + 'x'.repeat(i % 200))
  return { key: `key-${i}`, value, headers: { seq: String(i), bin: Buffer.from([0, 255, i % 256]) } }
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()

  assert.equal(await admin.createTopics({
    topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true,
  }), true, 'createTopics of a new topic resolves to true')
  step('creating it again (kafkajs logs the TOPIC_ALREADY_EXISTS answer as an ERROR line)')
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] }), false,
    'createTopics of an existing topic resolves to false (TOPIC_ALREADY_EXISTS)')
  step('createTopics ok')

  assert.ok((await admin.listTopics()).includes(topic), 'listTopics shows the new topic')
  const md = await admin.fetchTopicMetadata({ topics: [topic] })
  assert.equal(md.topics.length, 1)
  assert.equal(md.topics[0].name, topic)
  const parts = md.topics[0].partitions.map(p => p.partitionId).sort()
  assert.deepEqual(parts, [0, 1, 2], 'fetchTopicMetadata: partitions 0..2')
  for (const p of md.topics[0].partitions) {
    assert.equal(p.partitionErrorCode, 0, `partition ${p.partitionId} error`)
    assert.ok(p.leader >= 0, `partition ${p.partitionId} has a leader`)
    assert.deepEqual(p.replicas, [p.leader], `partition ${p.partitionId} replicas`)
  }
  step('listTopics and fetchTopicMetadata ok')

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const sent = []
  for (let start = 0; start < N; start += 100) {
    const messages = []
    for (let i = start; i < start + 100; i++) messages.push(message(i))
    const res = await producer.send({
      topic, acks: -1, messages,
      compression: start % 200 === 0 ? CompressionTypes.None : CompressionTypes.GZIP,
    })
    for (const r of res) {
      assert.equal(r.errorCode, 0, `produce error ${JSON.stringify(r)}`)
      sent.push(r)
    }
  }
  await producer.disconnect()
  step(`produced ${N} messages (plain and gzip batches)`)

  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const got = new Map() // i -> {partition, offset}
  const problems = []
  const lastOffset = new Map()
  await consumer.run({
    eachMessage: async ({ partition, message: m }) => {
      const i = Number(m.headers.seq?.toString())
      const want = message(i)
      if (m.key?.toString() !== want.key) problems.push(`p${partition}@${m.offset}: key ${m.key}, expected ${want.key}`)
      if (!m.value || !m.value.equals(want.value)) problems.push(`p${partition}@${m.offset}: value ${m.value} for message ${i}`)
      if (!m.headers.bin || !Buffer.from(m.headers.bin).equals(want.headers.bin)) problems.push(`p${partition}@${m.offset}: header bin ${m.headers.bin}`)
      if (got.has(i)) problems.push(`message ${i} consumed twice (p${partition}@${m.offset})`)
      const off = Number(m.offset)
      if (lastOffset.has(partition) && off <= lastOffset.get(partition)) problems.push(`p${partition}: offset ${off} after ${lastOffset.get(partition)}`)
      lastOffset.set(partition, off)
      got.set(i, { partition, offset: off })
    },
  })
  await waitFor(() => got.size >= N || problems.length > 0, 60000, `${N} messages (have ${got.size})`)
  await new Promise(resolve => setTimeout(resolve, 1000)) // late duplicates would show now
  assert.deepEqual(problems, [], 'consumed messages are exact, once, in order')
  assert.equal(got.size, N)
  // Order within a partition follows the produce order.
  const perPartition = new Map()
  for (const [i, { partition, offset }] of [...got.entries()].sort((a, b) => a[0] - b[0])) {
    const prev = perPartition.get(partition)
    assert.ok(prev === undefined || offset > prev, `message ${i} at p${partition}@${offset} after offset ${prev}`)
    perPartition.set(partition, offset)
  }
  await consumer.disconnect() // commits what was consumed, leaves the group
  step(`consumer group read all ${N} messages exactly once`)

  const committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  const total = committed[0].partitions.reduce((s, p) => s + Number(p.offset), 0)
  assert.equal(total, N, `committed offsets ${JSON.stringify(committed)} sum to ${N}`)
  step('fetchOffsets shows the group at the end of every partition')

  assert.equal(await admin.deleteTopics({ topics: [topic], timeout: 10000 }), undefined)
  await waitFor(async () => !(await admin.listTopics()).includes(topic), 10000, 'the topic to disappear')
  step('deleteTopics ok')
  await admin.disconnect()
}

const timer = setTimeout(() => { console.error('kafkajs test: timed out after 150 s'); process.exit(1) }, 150000)
main().then(() => { clearTimeout(timer); console.log('kafkajs test: ok'); process.exit(0) },
  (e) => { console.error('kafkajs test FAILED:', e); process.exit(1) })
