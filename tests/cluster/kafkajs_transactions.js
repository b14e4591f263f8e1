// kafkajs transactional producer for tests/cluster/test_transactions_clients.py.
// usage: node kafkajs_transactions.js <bootstrap> <kafkajs module dir> <topic>
// Commits one transaction (committed-0..9) and aborts one (aborted-0..9), then prints
// {"ok": true} on its last line.
const [bootstrap, modulePath, topic] = process.argv.slice(2);
const { Kafka, logLevel } = require(modulePath);

(async () => {
  const kafka = new Kafka({ clientId: 'trafka-txn-test', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] });
  await admin.disconnect();
  const producer = kafka.producer({
    transactionalId: `kafkajs-${topic}`,
    maxInFlightRequests: 1,
    idempotent: true,
  });
  await producer.connect();
  const values = (prefix) => Array.from({ length: 10 }, (_, i) => ({ value: `${prefix}-${i}` }));
  const committed = await producer.transaction();
  await committed.send({ topic, messages: values('committed') });
  await committed.commit();
  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: values('aborted') });
  await aborted.abort();
  await producer.disconnect();
  console.log(JSON.stringify({ ok: true }));
})().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exit(1);
});
