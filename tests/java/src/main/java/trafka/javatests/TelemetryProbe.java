package trafka.javatests;

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KIP-714 client telemetry and KIP-584 features against trafka: {@code BOOTSTRAP TOPIC}.
 *
 * <p>A producer left at its defaults ({@code enable.metrics.push=true}) sends one record and
 * asks for its client instance id, which the client learns from the broker's
 * GetTelemetrySubscriptions answer; the Admin client reads the cluster's features
 * (DescribeFeatures is ApiVersions). Prints one JSON line.
 */
public final class TelemetryProbe {
    private TelemetryProbe() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        Uuid instance;
        long offset;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(props)) {
            offset = producer.send(new ProducerRecord<>(topic, "k", "v")).get().offset();
            instance = producer.clientInstanceId(Duration.ofSeconds(30));
        }
        Properties adminProps = new Properties();
        adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        FeatureMetadata features;
        try (Admin admin = Admin.create(adminProps)) {
            features = admin.describeFeatures().featureMetadata().get();
        }
        System.out.println(Json.write(Map.of(
            "offset", offset,
            "client_instance_id", String.valueOf(instance),
            "finalized_features", features.finalizedFeatures().keySet().toString(),
            "supported_features", features.supportedFeatures().keySet().toString())));
        System.out.flush();
    }
}
