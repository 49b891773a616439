// kafkajs 2.2.4 against a skiff broker with --authorizer acl (run by test/clients/test_acl.py, which
// starts the broker, adds the users and the ACLs, and sets SKIFF_BOOTSTRAP to its SASL_PLAINTEXT
// listener, SASL_USER, SASL_PASSWORD (SCRAM-SHA-512) and ACL_MODE):
//   alice     as alice (ALL on topic orders, READ on groups app-*, WRITE on topics team-a.*):
//             produce to orders and read back with group app-1-kjs; produce to secrets and a
//             consumer of secrets: TOPIC_AUTHORIZATION_FAILED; group other-1:
//             GROUP_AUTHORIZATION_FAILED; listTopics shows orders and team-a.x, not secrets;
//             produce to team-a.x
//   describe  admin.describeAcls with an ANY filter; prints ACLS=<json> (test_acl.py compares)
// Exits non-zero on the first failed check.
'use strict'
const assert = require('node:assert/strict')
const { Kafka, logLevel, AclResourceTypes, AclOperationTypes, AclPermissionTypes, ResourcePatternTypes } = require('kafkajs')

const env = (k) => { const v = process.env[k]; if (!v) throw new Error(`${k} is not set`); return v }
const user = env('SASL_USER')
const mode = env('ACL_MODE')
const suffix = Math.random().toString(16).slice(2, 10)
const step = (msg) => console.log(`    kafkajs[${user}/${mode}]: ${msg}`)

// kafkajs 2.2.4 replaces a FindCoordinator error by KafkaJSGroupCoordinatorNotFound (BrokerPool.
// withBroker drops it); its debug log 'Tried to find group coordinator' keeps it: collect the
// Kafka error types the debug log mentions, print nothing.
const loggedErrorTypes = []
const logCreator = () => ({ log }) => {
  if (log && log.error && log.error.type) loggedErrorTypes.push(log.error.type)
}

const kafka = new Kafka({
  clientId: 'skiff-kafkajs-acl',
  brokers: [env('SKIFF_BOOTSTRAP')],
  logLevel: logLevel.DEBUG,
  logCreator,
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 2, initialRetryTime: 200 },
  sasl: { mechanism: 'scram-sha-512', username: user, password: env('SASL_PASSWORD') },
})

// The Kafka error type (e.g. TOPIC_AUTHORIZATION_FAILED) somewhere in an error's cause chain.
function errorTypes (e) {
  const out = []
  for (let x = e, n = 0; x && n < 10; x = x.cause || x.originalError, n++) {
    if (x.type) out.push(x.type)
    if (Array.isArray(x.errors)) for (const y of x.errors) out.push(...errorTypes(y))
  }
  return out
}

async function expectRefused (what, type, fn) {
  loggedErrorTypes.length = 0
  try {
    await fn()
  } catch (e) {
    const types = errorTypes(e)
    if (e.name === 'KafkaJSGroupCoordinatorNotFound') types.push(...loggedErrorTypes)
    assert.ok(types.includes(type), `${what}: failed with ${e.name}: ${e.message} (types ${types}), expected ${type}`)
    step(`${what}: ${type}${e.name === 'KafkaJSGroupCoordinatorNotFound' ? ' (FindCoordinator\'s answer, in kafkajs\'s debug log)' : ''}`)
    return
  }
  assert.fail(`${what}: succeeded, expected ${type}`)
}

// Runs a consumer of `topic` in `groupId` until it has read `want` values (resolves to them) or
// it crashes / subscribe throws (rejects with that error); `timeoutMs` bounds it.
async function consume (topic, groupId, want, timeoutMs) {
  const consumer = kafka.consumer({ groupId, retry: { retries: 1, initialRetryTime: 200, restartOnFailure: async () => false } })
  const got = new Set()
  try {
    await consumer.connect()
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms with ${got.size} values`)), timeoutMs)
      consumer.on(consumer.events.CRASH, ({ payload }) => { clearTimeout(timer); reject(payload.error) })
      consumer.subscribe({ topic, fromBeginning: true }).then(() => consumer.run({
        eachMessage: async ({ message }) => {
          got.add(message.value.toString())
          if (want.every(v => got.has(v))) { clearTimeout(timer); resolve() }
        },
      })).catch((e) => { clearTimeout(timer); reject(e) })
    })
    return got
  } finally {
    await consumer.disconnect().catch(() => {})
  }
}

async function alice () {
  const producer = kafka.producer({ allowAutoTopicCreation: false, retry: { retries: 1, initialRetryTime: 200 } })
  await producer.connect()
  const values = Array.from({ length: 20 }, (_, i) => `kjs-${suffix}-${i}`)
  const res = await producer.send({ topic: 'orders', acks: -1, messages: values.map(value => ({ value })) })
  for (const r of res) assert.equal(r.errorCode, 0, `produce to orders: ${JSON.stringify(r)}`)
  step('produce to orders: ok')
  const got = await consume('orders', 'app-1-kjs', values, 60000)
  assert.ok(values.every(v => got.has(v)), 'group app-1-kjs read every value back')
  step('consumer group app-1-kjs read every value back from orders')

  await expectRefused('produce to secrets', 'TOPIC_AUTHORIZATION_FAILED',
    () => producer.send({ topic: 'secrets', acks: -1, messages: [{ value: 'nope' }] }))
  await expectRefused('consume secrets (group app-2-kjs)', 'TOPIC_AUTHORIZATION_FAILED',
    () => consume('secrets', 'app-2-kjs', ['never'], 30000))
  await expectRefused('consumer group other-1', 'GROUP_AUTHORIZATION_FAILED',
    () => consume('orders', 'other-1', ['never'], 30000))

  const admin = kafka.admin()
  await admin.connect()
  const topics = await admin.listTopics()
  await admin.disconnect()
  assert.ok(topics.includes('orders') && topics.includes('team-a.x'), `listTopics: ${topics}`)
  assert.ok(!topics.includes('secrets'), `listTopics shows secrets: ${topics}`)
  step(`listTopics: ${JSON.stringify(topics.sort())}`)

  const r2 = await producer.send({ topic: 'team-a.x', acks: -1, messages: [{ value: `kjs-team-${suffix}` }] })
  for (const r of r2) assert.equal(r.errorCode, 0, `produce to team-a.x: ${JSON.stringify(r)}`)
  step('produce to team-a.x: ok')
  await producer.disconnect()
}

async function describe () {
  const admin = kafka.admin()
  await admin.connect()
  const r = await admin.describeAcls({
    resourceType: AclResourceTypes.ANY,
    resourcePatternType: ResourcePatternTypes.ANY,
    operation: AclOperationTypes.ANY,
    permissionType: AclPermissionTypes.ANY,
  })
  await admin.disconnect()
  assert.ok(Array.isArray(r.resources), `describeAcls: ${JSON.stringify(r)}`)
  const out = []
  for (const res of r.resources) {
    for (const a of res.acls) {
      out.push([res.resourceType, res.resourceName, res.resourcePatternType, a.principal, a.host, a.operation, a.permissionType])
    }
  }
  console.log(`ACLS=${JSON.stringify(out)}`)
  step(`describeAcls: ${out.length} bindings`)
}

const modes = { alice, describe }
modes[mode]().then(() => process.exit(0), (e) => {
  console.error(`    kafkajs[${user}/${mode}] FAILED: ${e && e.stack ? e.stack : e}`)
  process.exit(1)
})
