package trafka.javatests;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreatePartitionsOptions;
import org.apache.kafka.clients.admin.CreatePartitionsResult;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DeleteTopicsOptions;
import org.apache.kafka.clients.admin.DeleteTopicsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.ThrottlingQuotaExceededException;

/**
 * The controller mutation quota (KIP-599) as Kafka's Admin client meets it:
 * {@code MutationQuota BOOTSTRAP CLIENT_ID OP NAME:COUNT...} with OP one of create, delete,
 * partitions (create: NAME with COUNT partitions; partitions: grow NAME to COUNT), always
 * with {@code retryOnQuotaViolation(false)} so the error reaches the caller. Prints one JSON
 * line per topic: {@code {"topic": NAME, "ok": true}} or {@code {"topic": NAME, "ok": false,
 * "error": CLASS, "throttle_time_ms": N}} (N only for ThrottlingQuotaExceededException).
 */
public final class MutationQuota {
    private MutationQuota() {}

    static void report(String topic, KafkaFuture<?> future) throws InterruptedException {
        try {
            future.get();
            Clients.emit(Clients.obj("topic", topic, "ok", true));
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            Map<String, Object> out =
                    Clients.obj("topic", topic, "ok", false, "error", cause.getClass().getSimpleName());
            if (cause instanceof ThrottlingQuotaExceededException) {
                out.put("throttle_time_ms", ((ThrottlingQuotaExceededException) cause).throttleTimeMs());
            }
            Clients.emit(out);
        }
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, args[1]);
        String op = args[2];
        List<String> names = new ArrayList<>();
        List<Integer> counts = new ArrayList<>();
        for (int i = 3; i < args.length; i++) {
            String[] parts = args[i].split(":");
            names.add(parts[0]);
            counts.add(parts.length > 1 ? Integer.parseInt(parts[1]) : 0);
        }
        try (Admin admin = Admin.create(props)) {
            switch (op) {
                case "create": {
                    List<NewTopic> topics = new ArrayList<>();
                    for (int i = 0; i < names.size(); i++) {
                        topics.add(new NewTopic(names.get(i), counts.get(i), (short) 1));
                    }
                    CreateTopicsResult result = admin.createTopics(
                            topics, new CreateTopicsOptions().retryOnQuotaViolation(false));
                    for (String name : names) report(name, result.values().get(name));
                    break;
                }
                case "delete": {
                    DeleteTopicsResult result = admin.deleteTopics(
                            names, new DeleteTopicsOptions().retryOnQuotaViolation(false));
                    for (String name : names) report(name, result.topicNameValues().get(name));
                    break;
                }
                case "partitions": {
                    Map<String, NewPartitions> wanted = new java.util.LinkedHashMap<>();
                    for (int i = 0; i < names.size(); i++) {
                        wanted.put(names.get(i), NewPartitions.increaseTo(counts.get(i)));
                    }
                    CreatePartitionsResult result = admin.createPartitions(
                            wanted, new CreatePartitionsOptions().retryOnQuotaViolation(false));
                    for (String name : names) report(name, result.values().get(name));
                    break;
                }
                default:
                    throw new IllegalArgumentException("unknown op " + op);
            }
        }
    }
}
