// kafkajs over a secured listener for tests/cluster/secure_clients.py.
// usage: node kafkajs_secure_client.js <bootstrap> <kafkajs module dir> <topic> <count>
// stdin: {"ssl": bool, "ca": pem|null, "cert": pem|null, "key": pem|null,
//         "mechanism": "plain"|"scram-sha-512"|null, "username": .., "password": ..}
// prints one JSON line: the values consumed.
const [bootstrap, modulePath, topic, countText] = process.argv.slice(2);
const { Kafka, logLevel } = require(modulePath);
const count = Number(countText);

const input = require('fs').readFileSync(0, 'utf8');
const conf = JSON.parse(input);

(async () => {
  const options = { clientId: 'trafka-secure', brokers: [bootstrap], logLevel: logLevel.NOTHING };
  if (conf.ssl) {
    options.ssl = { ca: [conf.ca], rejectUnauthorized: true };
    if (conf.cert) { options.ssl.cert = conf.cert; options.ssl.key = conf.key; }
  }
  if (conf.mechanism) {
    options.sasl = { mechanism: conf.mechanism, username: conf.username, password: conf.password };
  }
  const kafka = new Kafka(options);
  const producer = kafka.producer({ idempotent: false });
  await producer.connect();
  const messages = [];
  for (let i = 0; i < count; i++) messages.push({ value: `js-${i}` });
  await producer.send({ topic, messages, acks: -1 });
  await producer.disconnect();
  const consumer = kafka.consumer({ groupId: `g-${topic}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timeout after ${seen.length} messages`)), 60000);
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        if (seen.length === count) { clearTimeout(timer); resolve(); }
      },
    }).catch(reject);
  });
  await consumer.disconnect();
  console.log(JSON.stringify(seen));
})().catch((error) => { console.error(error); process.exit(1); });
