package trafka.javatests;

import java.io.FileInputStream;
import java.io.InputStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.Future;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client over a secured listener: {@code SecureClients BOOTSTRAP SECURITY_PROPERTIES
 * TOPIC COUNT}. SECURITY_PROPERTIES holds Kafka's client security settings (security.protocol,
 * sasl.*, ssl.* with PEM stores, inline or as files) and is applied to every client. An admin
 * creates TOPIC (2 partitions) and describes it and the cluster; an idempotent acks=all producer
 * sends COUNT records; a classic-protocol group consumer reads them and commits. Prints one JSON
 * line with what each step saw.
 */
public final class SecureClients {
    private SecureClients() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        Properties security = new Properties();
        try (InputStream in = new FileInputStream(args[1])) {
            security.load(in);
        }
        String topic = args[2];
        int count = Integer.parseInt(args[3]);
        Map<String, Object> result = Clients.obj("topic", topic);

        Properties adminProps = new Properties();
        adminProps.putAll(security);
        adminProps.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(adminProps)) {
            admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            TopicDescription description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            result.put("partitions", description.partitions().size());
            DescribeClusterResult cluster = admin.describeCluster(new DescribeClusterOptions());
            result.put("cluster_id", cluster.clusterId().get());
            result.put("nodes", cluster.nodes().get().size());
        }

        Properties producerProps = new Properties();
        producerProps.putAll(security);
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        int sent = 0;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, "k" + i, "java-" + i)));
            }
            producer.flush();
            for (Future<RecordMetadata> future : futures) {
                future.get();
                sent++;
            }
        }
        result.put("sent", sent);

        String group = topic + "-group";
        Properties consumerProps = new Properties();
        consumerProps.putAll(security);
        consumerProps.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerProps.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerProps.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        consumerProps.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerProps.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        consumerProps.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        consumerProps.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        TreeSet<String> values = new TreeSet<>();
        long committed = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 120_000;
            while (values.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    values.add(record.value());
                }
            }
            consumer.commitSync();
            Map<TopicPartition, OffsetAndMetadata> offsets = consumer.committed(
                    new java.util.HashSet<>(List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1))));
            for (OffsetAndMetadata offset : offsets.values()) {
                if (offset != null) committed += offset.offset();
            }
        }
        result.put("received", values.size());
        result.put("committed_total", committed);
        try (Admin admin = Admin.create(adminProps)) {
            result.put("group_listed", admin.listConsumerGroups().all().get().stream()
                    .anyMatch(listing -> listing.groupId().equals(group)));
        }
        Clients.emit(result);
    }
}
