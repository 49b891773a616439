// kafkajs 2.2.4 over SASL_PLAINTEXT against skiff (run by test/clients/test_sasl.py, which starts
// the broker and sets SKIFF_BOOTSTRAP to its SASL listener, SASL_MECHANISM (plain,
// scram-sha-256, scram-sha-512), SASL_USER, SASL_PASSWORD and SASL_MODE):
//   basic   admin createTopics, a producer's sends, a consumer group reading every value back
//   reauth  one producer sending for REAUTH_SECONDS against a broker with --max-reauth-ms: every
//           send must succeed (kafkajs re-authenticates, KIP-368, before its session ends)
// Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel } = require('kafkajs')

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`${k} is not set`); return v }
const bootstrap = env('SKIFF_BOOTSTRAP')
const mechanism = env('SASL_MECHANISM')
const mode = process.env.SASL_MODE || 'basic'
const suffix = Math.random().toString(16).slice(2, 10)
const topic = `kafkajs-sasl-${mechanism}-${suffix}`
const step = (msg) => console.log(`    kafkajs[${mechanism}/${mode}]: ${msg}`)

const kafka = new Kafka({
  clientId: 'skiff-kafkajs-sasl',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  // Re-authenticate when less than 1 s of the session is left (default 10 s: longer than the
  // test's whole session).
  reauthenticationThreshold: 1000,
  retry: { retries: 4, initialRetryTime: 200 },
  sasl: { mechanism, username: env('SASL_USER'), password: env('SASL_PASSWORD') },
})

async function basic () {
  const N = 300
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }), true,
    'createTopics over SASL resolves to true')
  step(`createTopics ${topic} ok`)
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const want = []
  for (let start = 0; start < N; start += 100) {
    const messages = []
    for (let i = start; i < start + 100; i++) {
      messages.push({ key: `k${i}`, value: `${mechanism}-value-${i}` })
      want.push(`${mechanism}-value-${i}`)
    }
    const res = await producer.send({ topic, acks: -1, messages })
    for (const r of res) assert.equal(r.errorCode, 0, `produce error ${JSON.stringify(r)}`)
  }
  await producer.disconnect()
  step(`produced ${N} messages`)

  const consumer = kafka.consumer({ groupId: `kafkajs-sasl-group-${suffix}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const got = []
  let resolveDone
  const done = new Promise(resolve => { resolveDone = resolve })
  await consumer.run({
    eachMessage: async ({ message }) => {
      got.push(message.value.toString())
      if (got.length >= N) resolveDone()
    },
  })
  const timer = setTimeout(() => resolveDone(), 60000)
  await done
  clearTimeout(timer)
  await consumer.disconnect()
  assert.equal(got.length, N, `consumer read ${got.length} of ${N} messages`)
  assert.deepEqual([...got].sort(), [...want].sort(), 'the consumer read exactly the values sent')
  step(`consumer group read all ${N} values back`)
  await admin.disconnect()
}

async function reauth () {
  const seconds = Number(process.env.REAUTH_SECONDS || '10')
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }), true)
  await admin.disconnect()
  // No retries: a send that fails because a session ended fails the test.
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 0 } })
  await producer.connect()
  const end = Date.now() + seconds * 1000
  let sent = 0
  while (Date.now() < end) {
    const res = await producer.send({ topic, acks: -1, messages: [{ value: `reauth-${sent}` }] })
    for (const r of res) assert.equal(r.errorCode, 0, `produce error ${JSON.stringify(r)}`)
    sent++
    await new Promise(resolve => setTimeout(resolve, 100))
  }
  await producer.disconnect()
  console.log(`REAUTH_SENT=${sent} TOPIC=${topic}`)
  step(`${sent} sends over ${seconds} s, every one acknowledged`)
}

(mode === 'reauth' ? reauth() : basic()).then(() => process.exit(0), (e) => {
  console.error(`    kafkajs[${mechanism}/${mode}] FAILED: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
