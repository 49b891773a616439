// kafkajs 2.2.4 against skiff (run by test/clients/test_kafkajs.py): DeleteRecords through
// admin.deleteTopicRecords (the low watermark moves, a consumer from the beginning starts there,
// past the high watermark is OFFSET_OUT_OF_RANGE) and AlterConfigs / DescribeConfigs of a topic
// (round trip, validateOnly, INVALID_CONFIG, the whole set replaced), and
// AlterPartitionReassignments / ListPartitionReassignments on one broker (a reassignment to it
// succeeds and nothing is listed in progress; an unknown broker is INVALID_REPLICA_ASSIGNMENT).
// Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs')

const bootstrap = process.env.SKIFF_BOOTSTRAP
if (!bootstrap) throw new Error('SKIFF_BOOTSTRAP is not set')
const suffix = Math.random().toString(16).slice(2, 10)
const topic = `kafkajs-admin-${suffix}`
const N = 100
const CUT = 37

const kafka = new Kafka({
  clientId: 'skiff-kafkajs-admin-test',
  brokers: [bootstrap],
  logLevel: logLevel.NOTHING, // the refusals below are expected; kafkajs would log them as errors
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 4, initialRetryTime: 200 },
})

const step = (msg) => console.log(`    kafkajs admin: ${msg}`)

async function waitFor (pred, ms, what) {
  const end = Date.now() + ms
  for (;;) {
    if (await pred()) return
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 100))
  }
}

async function topicConfigs (admin) {
  const d = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: topic }], includeSynonyms: false,
  })
  assert.equal(d.resources.length, 1)
  assert.equal(d.resources[0].errorCode, 0, `describeConfigs error ${JSON.stringify(d.resources[0])}`)
  return new Map(d.resources[0].configEntries.map(e => [e.configName, e]))
}

async function alterTopic (admin, configEntries, validateOnly = false) {
  return admin.alterConfigs({
    validateOnly, resources: [{ type: ConfigResourceTypes.TOPIC, name: topic, configEntries }],
  })
}

async function rejection (promise) {
  try {
    await promise
  } catch (e) {
    return e
  }
  throw new Error('expected the request to be refused')
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({
    topics: [{ topic, numPartitions: 1, replicationFactor: 1 }], waitForLeaders: true,
  }), true)

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  for (let start = 0; start < N; start += 25) {
    const messages = []
    for (let i = start; i < start + 25; i++) messages.push({ key: `k${i}`, value: `v${i}` })
    await producer.send({ topic, acks: -1, messages })
  }
  await producer.disconnect()
  let offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.low, o.high]), [[0, '0', String(N)]])
  step(`produced ${N} records`)

  // ---- DeleteRecords -----------------------------------------------------------------------
  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: String(CUT) }] })
  offsets = await admin.fetchTopicOffsets(topic)
  assert.deepEqual(offsets.map(o => [o.partition, o.low, o.high]), [[0, String(CUT), String(N)]],
    'fetchTopicOffsets: low is the deletion offset')
  step(`deleteTopicRecords to ${CUT}: low watermark ${offsets[0].low}`)

  const consumer = kafka.consumer({ groupId: `kafkajs-admin-${suffix}`, sessionTimeout: 10000, heartbeatInterval: 500 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  const seen = []
  await consumer.run({ eachMessage: async ({ message: m }) => { seen.push([Number(m.offset), m.value.toString()]) } })
  await waitFor(() => seen.length >= N - CUT, 30000, `${N - CUT} records from the beginning (have ${seen.length})`)
  await new Promise(resolve => setTimeout(resolve, 500))
  await consumer.disconnect()
  assert.equal(seen.length, N - CUT, 'a consumer from the beginning reads only what is left')
  assert.deepEqual(seen[0], [CUT, `v${CUT}`], 'the first record read is at the low watermark')
  step(`a consumer from the beginning starts at offset ${seen[0][0]}`)

  // kafkajs wraps the per-partition errors of a request it does not retry: they are the cause.
  const refused = await rejection(admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: String(N + 5) }] }))
  const past = refused.cause || refused
  assert.equal(past.name, 'KafkaJSDeleteTopicRecordsError', `${refused}`)
  assert.equal(past.partitions[0].error.type, 'OFFSET_OUT_OF_RANGE', `${JSON.stringify(past.partitions)}`)
  offsets = await admin.fetchTopicOffsets(topic)
  assert.equal(offsets[0].low, String(CUT), 'a refused DeleteRecords moves nothing')
  step('deleteTopicRecords past the high watermark: OFFSET_OUT_OF_RANGE')

  await admin.deleteTopicRecords({ topic, partitions: [{ partition: 0, offset: '-1' }] })
  offsets = await admin.fetchTopicOffsets(topic)
  assert.equal(offsets[0].low, String(N), 'offset -1 deletes up to the high watermark')
  step('deleteTopicRecords -1: everything')

  // ---- AlterConfigs / DescribeConfigs ---------------------------------------------------------
  let cfg = await topicConfigs(admin)
  assert.equal(cfg.get('retention.ms').isDefault, true)
  await alterTopic(admin, [{ name: 'retention.ms', value: '3600000' }, { name: 'cleanup.policy', value: 'delete' }])
  cfg = await topicConfigs(admin)
  assert.equal(cfg.get('retention.ms').configValue, '3600000')
  assert.equal(cfg.get('retention.ms').isDefault, false)
  assert.equal(cfg.get('cleanup.policy').isDefault, false)
  step('alterConfigs retention.ms=3600000: describeConfigs shows it')

  await alterTopic(admin, [{ name: 'retention.ms', value: '5000' }], true)
  assert.equal((await topicConfigs(admin)).get('retention.ms').configValue, '3600000', 'validateOnly changes nothing')
  const bad = await rejection(alterTopic(admin, [{ name: 'retention.ms', value: '-5' }]))
  assert.equal(bad.type, 'INVALID_CONFIG', `${bad}`)
  const unknown = await rejection(alterTopic(admin, [{ name: 'retention.msec', value: '5' }]))
  assert.equal(unknown.type, 'INVALID_CONFIG', `${unknown}`)
  assert.equal((await topicConfigs(admin)).get('retention.ms').configValue, '3600000', 'a refused change stores nothing')
  step('validateOnly stores nothing; retention.ms=-5 and unknown names are INVALID_CONFIG')

  // AlterConfigs sets the whole set: what is left out returns to its default.
  await alterTopic(admin, [{ name: 'max.message.bytes', value: '200000' }])
  cfg = await topicConfigs(admin)
  assert.equal(cfg.get('max.message.bytes').configValue, '200000')
  assert.equal(cfg.get('retention.ms').isDefault, true)
  assert.equal(cfg.get('cleanup.policy').isDefault, true)
  step('alterConfigs replaces the set: retention.ms back to its default')

  // Reassignments, as Kafka answers them on a one-broker cluster.
  await admin.alterPartitionReassignments({ topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [0] }] }] })
  assert.deepEqual(await admin.listPartitionReassignments({}), { topics: [] })
  assert.deepEqual(await admin.listPartitionReassignments({ topics: [{ topic, partitions: [0] }] }), { topics: [] })
  const moved = await rejection(admin.alterPartitionReassignments({
    topics: [{ topic, partitionAssignment: [{ partition: 0, replicas: [5] }] }],
  }))
  const types = (moved.errors || [moved]).map(e => e.type)
  assert.deepEqual(types, ['INVALID_REPLICA_ASSIGNMENT'], `${moved}`)
  step('alterPartitionReassignments to broker 0 succeeds, to broker 5 is INVALID_REPLICA_ASSIGNMENT; none listed')

  await admin.deleteTopics({ topics: [topic], timeout: 10000 })
  await admin.disconnect()
}

const timer = setTimeout(() => { console.error('kafkajs admin test: timed out after 120 s'); process.exit(1) }, 120000)
main().then(() => { clearTimeout(timer); console.log('kafkajs admin test: ok'); process.exit(0) },
  (e) => { console.error('kafkajs admin test FAILED:', e); process.exit(1) })
