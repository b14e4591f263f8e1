// A kafkajs consumer-group member for tests/group/members.py (same JSON lines as
// member_process.py). usage: node kafkajs_member.js <bootstrap> <kafkajs dir> <group> <topic> <session ms>
const [bootstrap, modulePath, groupId, topic, sessionText] = process.argv.slice(2);
const { Kafka, logLevel } = require(modulePath);
const emit = (fields) => process.stdout.write(JSON.stringify(fields) + '\n');

(async () => {
  const kafka = new Kafka({ clientId: 'kafkajs-member', brokers: [bootstrap], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({
    groupId, sessionTimeout: Number(sessionText), heartbeatInterval: 1000, maxWaitTimeInMs: 100,
  });
  consumer.on(consumer.events.GROUP_JOIN, (event) => {
    const partitions = (event.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
    emit({ event: 'assigned', partitions });
  });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  emit({ event: 'ready' });
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ partition, message }) => {
      await consumer.commitOffsets([{ topic, partition, offset: String(Number(message.offset) + 1) }]);
      emit({ event: 'message', partition, offset: Number(message.offset), value: message.value.toString() });
    },
  });
  const stop = async () => { await consumer.disconnect(); process.exit(0); };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
})().catch((error) => {
  process.stderr.write(`kafkajs member failed: ${error.stack || error}\n`);
  process.exit(1);
});
