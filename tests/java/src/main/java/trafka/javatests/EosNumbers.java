package trafka.javatests;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;

/**
 * A Kafka Streams application with {@code processing.guarantee=exactly_once_v2}:
 * {@code EosNumbers BOOTSTRAP APPLICATION_ID INPUT OUTPUT COUNTS STATE_DIR}.
 *
 * <p>INPUT holds numbered records (value: the number). Each number is copied to OUTPUT through
 * a repartition topic (APPLICATION_ID-spread-repartition, re-keyed by the number), and counted
 * per bucket (number % 10) in the state store "buckets" (changelog
 * APPLICATION_ID-buckets-changelog), every new count going to COUNTS (bucket -> count as a
 * long). Under exactly-once every number reaches OUTPUT once for read_committed consumers and
 * every bucket's last count is its exact size, whatever broker fails meanwhile: the records of
 * a task's transaction (output, repartition, changelog, consumer offsets) commit or abort
 * together. Internal topics with replication factor 3 and min.insync.replicas 2. Prints a JSON
 * line on each state change; closes when stdin closes.
 */
public final class EosNumbers {
    private EosNumbers() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String applicationId = args[1];
        String input = args[2];
        String output = args[3];
        String counts = args[4];
        String stateDir = args[5];
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        props.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        props.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
        props.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 20000);

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> numbers = builder.stream(input);
        numbers.selectKey((key, value) -> value)
                .repartition(Repartitioned.<String, String>as("spread"))
                .to(output);
        numbers.groupBy((key, value) -> String.valueOf(Long.parseLong(value) % 10), Grouped.as("buckets"))
                .count(Materialized.as("buckets"))
                .toStream()
                .to(counts, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        streams.setStateListener((now, before) -> {
            System.out.println(Json.write(Clients.obj("state", now.name(), "from", before.name())));
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println(Json.write(Clients.obj("error", e.toString())));
            System.out.flush();
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        streams.start();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (stdin.readLine() != null) {
            // wait for stdin to close
        }
        streams.close();
        System.out.println(Json.write(Clients.obj("closed", true)));
    }
}
