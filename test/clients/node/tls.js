// kafkajs 2.2.4 over TLS against skiff (run by test/clients/test_tls.py, which starts the broker
// and sets SKIFF_BOOTSTRAP to its SSL or SASL_SSL listener, TLS_CA to the PEM file of the CA that
// signed the broker's certificate, and for SASL_SSL SASL_MECHANISM, SASL_USER, SASL_PASSWORD):
// admin createTopics, a producer's sends (acks=-1), a consumer group reading every value back.
// Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { Kafka, logLevel } = require('kafkajs')

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`${k} is not set`); return v }
const bootstrap = env('SKIFF_BOOTSTRAP')
const mechanism = process.env.SASL_MECHANISM || ''
const label = mechanism ? `SASL_SSL/${mechanism}` : 'SSL'
const suffix = Math.random().toString(16).slice(2, 10)
const topic = `kafkajs-tls-${mechanism || 'ssl'}-${suffix}`
const step = (msg) => console.log(`    kafkajs[${label}]: ${msg}`)

const config = {
  clientId: 'skiff-kafkajs-tls',
  brokers: [bootstrap],
  logLevel: logLevel.WARN,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 4, initialRetryTime: 200 },
  // Server authentication only: the broker's certificate must chain to this CA and name
  // 127.0.0.1 (rejectUnauthorized is Node's default).
  ssl: { ca: [fs.readFileSync(env('TLS_CA'))], rejectUnauthorized: true },
}
if (mechanism) {
  config.sasl = { mechanism, username: env('SASL_USER'), password: env('SASL_PASSWORD') }
}
const kafka = new Kafka(config)

async function main () {
  const N = 300
  const admin = kafka.admin()
  await admin.connect()
  assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true }), true,
    'createTopics over TLS resolves to true')
  assert.ok((await admin.listTopics()).includes(topic), 'listTopics shows the new topic')
  step(`createTopics ${topic} ok`)

  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const want = []
  for (let start = 0; start < N; start += 100) {
    const messages = []
    for (let i = start; i < start + 100; i++) {
      messages.push({ key: `k${i}`, value: `${label}-value-${i}-` + 'x'.repeat(i % 300) })
      want.push(messages[messages.length - 1].value)
    }
    const res = await producer.send({ topic, acks: -1, messages })
    for (const r of res) assert.equal(r.errorCode, 0, `produce error ${JSON.stringify(r)}`)
  }
  await producer.disconnect()
  step(`produced ${N} messages`)

  const consumer = kafka.consumer({ groupId: `kafkajs-tls-group-${suffix}` })
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
  // a moment for duplicates, if any, to arrive
  await new Promise(resolve => setTimeout(resolve, 1000))
  await consumer.disconnect()
  assert.equal(got.length, N, `consumer read ${got.length} of ${N} messages`)
  assert.deepEqual([...got].sort(), [...want].sort(), 'the consumer read exactly the values sent')
  step(`consumer group read all ${N} values back exactly`)
  await admin.disconnect()
}

main().then(() => process.exit(0), (e) => {
  console.error(`    kafkajs[${label}] FAILED: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
