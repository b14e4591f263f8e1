package trafka.javatests;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * KIP-392 with the Java consumer: {@code BOOTSTRAP TOPIC RACK COUNT}.
 *
 * <p>A consumer with {@code client.rack=RACK} reads partition 0 of TOPIC from the beginning
 * until it has COUNT records, then prints one JSON line: how many it read and whether their
 * offsets were 0..COUNT-1 in order.
 */
public final class RackConsumer {
    private RackConsumer() {}

    public static void main(String[] args) {
        String topic = args[1];
        int count = Integer.parseInt(args[3]);
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.CLIENT_RACK_CONFIG, args[2]);
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        long expected = 0;
        boolean inOrder = true;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            TopicPartition partition = new TopicPartition(topic, 0);
            consumer.assign(List.of(partition));
            consumer.seekToBeginning(List.of(partition));
            long deadline = System.currentTimeMillis() + 120_000;
            while (expected < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    inOrder &= record.offset() == expected;
                    expected++;
                }
            }
        }
        System.out.println(Json.write(Map.of("count", expected, "in_order", inOrder)));
        System.out.flush();
    }
}
