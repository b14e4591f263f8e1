package trafka.javatests;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java producer and consumer against trafka. Prints one JSON object per line.
 *
 * <ul>
 *   <li>{@code codecs BOOTSTRAP PREFIX COUNT}: for each of gzip, snappy, lz4, zstd a topic
 *       PREFIX-CODEC (3 partitions, RF 3), COUNT keyed records with a header through a producer
 *       left at its defaults (idempotent, acks=all) but for compression.type, then read back by
 *       a classic-protocol group consumer.
 *   <li>{@code groups BOOTSTRAP PREFIX}: range and cooperative-sticky assignment across
 *       consumers that join one after another, and static membership (a member that closes
 *       and comes back under its group.instance.id within the session timeout gets its
 *       partitions back without a new generation).
 *   <li>{@code kip848 BOOTSTRAP TOPIC}: two consumers with {@code group.protocol=consumer}
 *       (KIP-848) join one after another on an existing TOPIC; prints each one's partitions,
 *       member epoch (the consumer's generation id) and callbacks once they cover the topic.
 * </ul>
 */
public final class Clients {
    private Clients() {}

    static void emit(Map<String, Object> record) {
        System.out.println(Json.write(record));
        System.out.flush();
    }

    static Map<String, Object> obj(Object... keyValues) {
        Map<String, Object> map = new LinkedHashMap<>();
        for (int i = 0; i < keyValues.length; i += 2) map.put((String) keyValues[i], keyValues[i + 1]);
        return map;
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "codecs" -> codecs(args[1], args[2], Integer.parseInt(args[3]));
            case "groups" -> groups(args[1], args[2]);
            case "kip848" -> kip848(args[1], args[2]);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    static Admin admin(String bootstrap) {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(props);
    }

    static Properties consumerProps(String bootstrap, String group) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return props;
    }

    // ---- codecs ------------------------------------------------------------------------------
    static void codecs(String bootstrap, String prefix, int count) throws Exception {
        List<String> codecs = List.of("gzip", "snappy", "lz4", "zstd");
        try (Admin admin = admin(bootstrap)) {
            List<NewTopic> topics = new ArrayList<>();
            for (String codec : codecs) topics.add(new NewTopic(prefix + "-" + codec, 3, (short) 3));
            admin.createTopics(topics).all().get();
        }
        for (String codec : codecs) {
            String topic = prefix + "-" + codec;
            Properties props = new Properties();
            props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            props.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
            props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
            props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            Map<String, Object> result = obj("mode", "codecs", "codec", codec, "topic", topic);
            Map<Integer, List<Long>> sentOffsets = new TreeMap<>();
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    ProducerRecord<String, String> record = new ProducerRecord<>(
                            topic, null, 1_700_000_000_000L + i, "key-" + (i % 97), "value-" + i + "-" + "x".repeat(i % 50));
                    record.headers().add("n", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                    futures.add(producer.send(record));
                }
                producer.flush();
                for (Future<RecordMetadata> future : futures) {
                    RecordMetadata metadata = future.get();
                    sentOffsets.computeIfAbsent(metadata.partition(), p -> new ArrayList<>()).add(metadata.offset());
                }
            }
            boolean offsetsDense = true;
            for (List<Long> offsets : sentOffsets.values()) {
                for (int i = 0; i < offsets.size(); i++) offsetsDense &= offsets.get(i) == i;
            }
            result.put("sent", count);
            result.put("sent_offsets_dense", offsetsDense);
            // read back through a classic-protocol group consumer
            Properties cprops = consumerProps(bootstrap, "java-codecs-" + codec);
            int received = 0;
            Set<Integer> numbers = new HashSet<>();
            boolean contentOk = true;
            boolean ordered = true;
            Map<Integer, Long> lastOffset = new HashMap<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cprops)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 90_000;
                while (received < count && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                        received++;
                        Header header = record.headers().lastHeader("n");
                        int n = Integer.parseInt(new String(header.value(), StandardCharsets.UTF_8));
                        numbers.add(n);
                        contentOk &= record.key().equals("key-" + (n % 97))
                                && record.value().equals("value-" + n + "-" + "x".repeat(n % 50))
                                && record.timestamp() == 1_700_000_000_000L + n;
                        Long last = lastOffset.put(record.partition(), record.offset());
                        ordered &= last == null || last < record.offset();
                    }
                }
                consumer.commitSync();
                long committed = 0;
                Set<TopicPartition> assigned = consumer.assignment();
                for (var entry : consumer.committed(assigned).entrySet()) {
                    if (entry.getValue() != null) committed += entry.getValue().offset();
                }
                result.put("committed_total", committed);
            }
            result.put("received", received);
            result.put("distinct", numbers.size());
            result.put("content_ok", contentOk);
            result.put("ordered", ordered);
            emit(result);
        }
    }

    // ---- KIP-848 -----------------------------------------------------------------------------
    static void kip848(String bootstrap, String topic) throws Exception {
        int partitions;
        try (Admin admin = admin(bootstrap)) {
            partitions = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        }
        Properties props = consumerProps(bootstrap, topic + "-java-kip848");
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        List<Member> members = new ArrayList<>();
        members.add(new Member("kip848-a", props, topic));
        boolean one = waitFor(() -> covers(members, partitions), 60_000);
        Map<String, Object> first = snapshot(members);
        members.add(new Member("kip848-b", props, topic));
        boolean two = waitFor(() -> covers(members, partitions), 90_000);
        Map<String, Object> second = snapshot(members);
        int records = 0;
        for (Member m : members) records += m.records;
        for (Member m : members) m.close();
        emit(obj("mode", "kip848", "one_member_covers", one, "two_members_cover", two,
                "after_one", first, "after_two", second, "records", records));
    }

    // ---- groups ------------------------------------------------------------------------------
    /** A consumer on its own thread, recording its assignment and rebalance callbacks. */
    static final class Member implements Runnable {
        final String name;
        final Properties props;
        final String topic;
        final Set<TopicPartition> owned = ConcurrentHashMap.newKeySet();
        final List<String> events = new CopyOnWriteArrayList<>();
        final AtomicBoolean running = new AtomicBoolean(true);
        volatile int generation = -1;
        volatile String memberId = "";
        volatile int records = 0;
        final Thread thread;

        Member(String name, Properties props, String topic) {
            this.name = name;
            this.props = props;
            this.topic = topic;
            this.thread = new Thread(this, name);
            this.thread.start();
        }

        @Override
        public void run() {
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        events.add("revoked:" + names(partitions));
                        owned.removeAll(partitions);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        events.add("assigned:" + names(partitions));
                        owned.addAll(partitions);
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> partitions) {
                        events.add("lost:" + names(partitions));
                        owned.removeAll(partitions);
                    }
                });
                while (running.get()) {
                    ConsumerRecords<String, String> batch = consumer.poll(Duration.ofMillis(200));
                    records += batch.count();
                    generation = consumer.groupMetadata().generationId();
                    memberId = consumer.groupMetadata().memberId();
                }
            } catch (Exception e) {
                events.add("error:" + e);
            }
        }

        void close() throws InterruptedException {
            running.set(false);
            thread.join(60_000);
        }

        List<Integer> partitions() {
            List<Integer> out = new ArrayList<>();
            for (TopicPartition tp : owned) out.add(tp.partition());
            out.sort(null);
            return out;
        }
    }

    static String names(Collection<TopicPartition> partitions) {
        Set<Integer> sorted = new TreeSet<>();
        for (TopicPartition tp : partitions) sorted.add(tp.partition());
        return sorted.toString().replace(" ", "");
    }

    static boolean waitFor(java.util.function.BooleanSupplier condition, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (condition.getAsBoolean()) return true;
            Thread.sleep(100);
        }
        return condition.getAsBoolean();
    }

    static boolean covers(List<Member> members, int partitions) {
        Set<Integer> seen = new HashSet<>();
        int total = 0;
        for (Member m : members) {
            if (m.owned.isEmpty()) return false;
            for (TopicPartition tp : m.owned) {
                seen.add(tp.partition());
                total++;
            }
        }
        return seen.size() == partitions && total == partitions;
    }

    static Map<String, Object> snapshot(List<Member> members) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (Member m : members) {
            out.put(m.name, obj("partitions", m.partitions(), "generation", m.generation, "events", new ArrayList<>(m.events)));
        }
        return out;
    }

    static void groups(String bootstrap, String prefix) throws Exception {
        String topic = prefix + "-groups";
        int partitions = 6;
        try (Admin admin = admin(bootstrap)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, (short) 3))).all().get();
        }
        for (String strategy : List.of("range", "cooperative-sticky")) {
            String group = prefix + "-" + strategy;
            Properties props = consumerProps(bootstrap, group);
            props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
            props.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
                    strategy.equals("range") ? RangeAssignor.class.getName() : CooperativeStickyAssignor.class.getName());
            List<Member> members = new ArrayList<>();
            members.add(new Member(strategy + "-a", props, topic));
            boolean one = waitFor(() -> covers(members, partitions), 60_000);
            Map<String, Object> first = snapshot(members);
            members.add(new Member(strategy + "-b", props, topic));
            boolean two = waitFor(() -> covers(members, partitions), 90_000);
            Map<String, Object> second = snapshot(members);
            for (Member m : members) m.close();
            emit(obj("mode", "groups", "strategy", strategy, "one_member_covers", one, "two_members_cover", two,
                    "after_one", first, "after_two", second));
        }
        // static membership: close and come back under the same group.instance.id
        String group = prefix + "-static";
        Properties props = consumerProps(bootstrap, group);
        props.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-1");
        props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        Properties other = consumerProps(bootstrap, group);
        other.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "instance-2");
        other.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "45000");
        List<Member> members = new ArrayList<>(List.of(new Member("static-1", props, topic), new Member("static-2", other, topic)));
        boolean stable = waitFor(() -> covers(members, partitions) && members.get(0).generation == members.get(1).generation
                && members.get(0).generation > 0, 90_000);
        Map<String, Object> before = snapshot(members);
        int generationBefore = members.get(0).generation;
        List<Integer> partitionsBefore = members.get(0).partitions();
        String memberIdBefore = members.get(0).memberId;
        int otherEventsBefore = members.get(1).events.size();
        members.get(0).close();
        Member back = new Member("static-1-again", props, topic);
        boolean rejoined = waitFor(() -> !back.owned.isEmpty() && back.generation > 0, 60_000);
        Thread.sleep(1_000);
        Map<String, Object> after = snapshot(List.of(back, members.get(1)));
        emit(obj("mode", "groups", "strategy", "static", "stable", stable, "rejoined", rejoined,
                "generation_before", generationBefore, "generation_after", back.generation,
                "other_generation_after", members.get(1).generation,
                "partitions_before", partitionsBefore, "partitions_after", back.partitions(),
                "member_id_changed", !memberIdBefore.equals(back.memberId),
                "other_events_while_away", new ArrayList<>(members.get(1).events.subList(otherEventsBefore, members.get(1).events.size())),
                "before", before, "after", after));
        back.close();
        members.get(1).close();
    }
}
