// kafkajs driver for tests/cluster/test_kafkajs.py: prints one JSON line with what it saw.
// usage: node kafkajs_client.js <bootstrap> <kafkajs module dir> <topic> <count>
const [bootstrap, modulePath, topic, countText] = process.argv.slice(2);
const { Kafka, logLevel, CompressionTypes } = require(modulePath);
const count = Number(countText);
const BASE_TS = 1700000000000;

(async () => {
  const kafka = new Kafka({ clientId: 'trafka-test', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const result = {};
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ validateOnly: true, waitForLeaders: false, topics: [{ topic, numPartitions: 2 }] });
  result.afterValidateOnly = (await admin.listTopics()).includes(topic);
  await admin.createTopics({
    topics: [{ topic, numPartitions: 2, configEntries: [{ name: 'retention.ms', value: '3600000' }] }],
  });
  const described = await admin.describeConfigs({
    includeSynonyms: false,
    resources: [{ type: 2, name: topic, configNames: ['retention.ms'] }],
  });
  result.retentionMs = described.resources[0].configEntries[0].configValue;

  const producer = kafka.producer({ idempotent: false });
  await producer.connect();
  const batchSize = 500;
  for (let start = 0; start < count; start += batchSize) {
    const messages = [];
    for (let i = start; i < Math.min(count, start + batchSize); i++) {
      messages.push({
        key: `key-${i % 97}`,
        value: `js-value-${i}-`,
        headers: { n: String(i) },
        timestamp: String(BASE_TS + i),
      });
    }
    const compression = start % 1000 === 0 ? CompressionTypes.GZIP : CompressionTypes.None;
    await producer.send({ topic, messages, compression, acks: -1 });
  }
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `g-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout after ${seen.length} messages`)), 60000);
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        seen.push([partition, Number(message.offset), message.value.toString(),
          message.key.toString(), message.headers.n.toString(), Number(message.timestamp)]);
        if (seen.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  result.received = seen;
  result.offsets = await admin.fetchTopicOffsets(topic);
  await admin.createPartitions({ topicPartitions: [{ topic, count: 3 }] });
  result.partitionsAfterAdd = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions.length;
  await admin.deleteTopics({ topics: [topic] });
  result.afterDelete = (await admin.listTopics()).includes(topic);
  await admin.disconnect();
  process.stdout.write(JSON.stringify(result) + '\n');
})().catch((error) => {
  process.stderr.write(`kafkajs failed: ${error.stack || error}\n`);
  process.exit(1);
});
