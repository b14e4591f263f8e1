package trafka.javatests;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java Admin client against trafka: {@code AdminCalls BOOTSTRAP PREFIX}. Each call prints
 * one JSON line {@code {"call": NAME, "ok": true, ...}} or {@code {"call": NAME, "ok": false,
 * "error": "ExceptionClass: message"}}; a failed call does not stop the ones after it.
 */
public final class AdminCalls {
    private AdminCalls() {}

    interface Call {
        Map<String, Object> run() throws Exception;
    }

    static void call(String name, Call body) {
        Map<String, Object> out;
        try {
            out = body.run();
            out.put("ok", true);
        } catch (Exception e) {
            Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            out = Clients.obj("ok", false, "error", cause.getClass().getSimpleName() + ": " + cause.getMessage());
        }
        Map<String, Object> record = Clients.obj("call", name);
        record.putAll(out);
        Clients.emit(record);
    }

    static List<Integer> ids(Collection<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node node : nodes) out.add(node.id());
        out.sort(null);
        return out;
    }

    static Map<String, Object> partitions(TopicDescription description) {
        Map<String, Object> out = new TreeMap<>();
        for (TopicPartitionInfo info : description.partitions()) {
            List<Integer> replicas = new ArrayList<>();
            for (Node n : info.replicas()) replicas.add(n.id());
            out.put(Integer.toString(info.partition()), Clients.obj(
                    "leader", info.leader() == null ? -1 : info.leader().id(), "replicas", replicas, "isr", ids(info.isr())));
        }
        return out;
    }

    static Map<String, Object> configs(Config config, Set<String> names) {
        Map<String, Object> out = new TreeMap<>();
        for (ConfigEntry entry : config.entries()) {
            if (names.isEmpty() || names.contains(entry.name())) {
                out.put(entry.name(), Clients.obj("value", entry.value(), "source", entry.source().name(),
                        "default", entry.isDefault(), "read_only", entry.isReadOnly()));
            }
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String prefix = args[1];
        String topic = prefix + "-admin";
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(props)) {
            call("describeCluster", () -> {
                DescribeClusterResult result = admin.describeCluster();
                return Clients.obj("cluster_id", result.clusterId().get(), "controller", result.controller().get().id(),
                        "nodes", ids(result.nodes().get()));
            });
            call("createTopics.validateOnly", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 2)), new CreateTopicsOptions().validateOnly(true)).all().get();
                return Clients.obj("exists_after", admin.listTopics().names().get().contains(topic));
            });
            call("createTopics", () -> {
                NewTopic t = new NewTopic(topic, 2, (short) 2).configs(Map.of("retention.ms", "3600000"));
                var result = admin.createTopics(List.of(t, new NewTopic(prefix + "-doomed", 1, (short) 1)));
                result.all().get();
                return Clients.obj("partitions", result.numPartitions(topic).get(), "rf", (int) result.replicationFactor(topic).get(),
                        "topic_id_set", result.topicId(topic).get() != null);
            });
            call("createTopics.duplicate", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
                return Clients.obj();
            });
            call("createTopics.rf_too_big", () -> {
                admin.createTopics(List.of(new NewTopic(prefix + "-rf9", 1, (short) 9))).all().get();
                return Clients.obj();
            });
            call("listTopics", () -> Clients.obj("names", new ArrayList<>(new java.util.TreeSet<>(admin.listTopics().names().get()))));
            call("describeTopics", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return Clients.obj("internal", d.isInternal(), "partitions", partitions(d));
            });
            call("describeTopics.unknown", () -> {
                admin.describeTopics(List.of(prefix + "-nope")).allTopicNames().get();
                return Clients.obj();
            });
            ConfigResource topicResource = new ConfigResource(ConfigResource.Type.TOPIC, topic);
            call("describeConfigs.topic", () -> {
                Config c = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
                return Clients.obj("count", c.entries().size(), "configs", configs(c, Set.of("retention.ms", "cleanup.policy", "segment.bytes")));
            });
            call("incrementalAlterConfigs.topic", () -> {
                admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact,delete"), AlterConfigOp.OpType.SET)))).all().get();
                Config c = admin.describeConfigs(List.of(topicResource)).all().get().get(topicResource);
                return Clients.obj("configs", configs(c, Set.of("retention.ms", "cleanup.policy")));
            });
            call("incrementalAlterConfigs.topic_invalid", () -> {
                admin.incrementalAlterConfigs(Map.of(topicResource, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "soon"), AlterConfigOp.OpType.SET)))).all().get();
                return Clients.obj();
            });
            ConfigResource broker1 = new ConfigResource(ConfigResource.Type.BROKER, "1");
            call("describeConfigs.broker", () -> {
                Config c = admin.describeConfigs(List.of(broker1)).all().get().get(broker1);
                return Clients.obj("count", c.entries().size(), "configs", configs(c, Set.of("log.retention.ms", "num.partitions", "broker.id", "node.id")));
            });
            ConfigResource clusterDefault = new ConfigResource(ConfigResource.Type.BROKER, "");
            call("incrementalAlterConfigs.broker_default", () -> {
                admin.incrementalAlterConfigs(Map.of(clusterDefault, List.of(
                        new AlterConfigOp(new ConfigEntry("log.retention.ms", "604800001"), AlterConfigOp.OpType.SET)))).all().get();
                // every broker learns of the change through /config/changes: poll for a while
                Config c = admin.describeConfigs(List.of(clusterDefault)).all().get().get(clusterDefault);
                long deadline = System.currentTimeMillis() + 20_000;
                Config b = admin.describeConfigs(List.of(broker1)).all().get().get(broker1);
                while ((c.get("log.retention.ms") == null || !"604800001".equals(b.get("log.retention.ms").value()))
                        && System.currentTimeMillis() < deadline) {
                    Thread.sleep(200);
                    c = admin.describeConfigs(List.of(clusterDefault)).all().get().get(clusterDefault);
                    b = admin.describeConfigs(List.of(broker1)).all().get().get(broker1);
                }
                return Clients.obj("default", configs(c, Set.of("log.retention.ms")), "broker1", configs(b, Set.of("log.retention.ms")));
            });
            call("createPartitions", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all().get();
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return Clients.obj("count", d.partitions().size());
            });
            call("createPartitions.decrease", () -> {
                admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(1))).all().get();
                return Clients.obj();
            });
            // records, for offsets, delete records and log dirs
            Properties pprops = new Properties();
            pprops.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pprops.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pprops.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(pprops)) {
                for (int i = 0; i < 100; i++) producer.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
                producer.flush();
            }
            TopicPartition p0 = new TopicPartition(topic, 0);
            call("listOffsets", () -> {
                ListOffsetsResult.ListOffsetsResultInfo earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).partitionResult(p0).get();
                ListOffsetsResult.ListOffsetsResultInfo latest = admin.listOffsets(Map.of(p0, OffsetSpec.latest())).partitionResult(p0).get();
                ListOffsetsResult.ListOffsetsResultInfo maxTs = admin.listOffsets(Map.of(p0, OffsetSpec.maxTimestamp())).partitionResult(p0).get();
                return Clients.obj("earliest", earliest.offset(), "latest", latest.offset(), "max_timestamp_offset", maxTs.offset());
            });
            call("deleteRecords", () -> {
                long low = admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(40))).lowWatermarks().get(p0).get().lowWatermark();
                long earliest = admin.listOffsets(Map.of(p0, OffsetSpec.earliest())).partitionResult(p0).get().offset();
                return Clients.obj("low_watermark", low, "earliest_after", earliest);
            });
            call("deleteRecords.beyond_end", () -> {
                admin.deleteRecords(Map.of(p0, RecordsToDelete.beforeOffset(1000))).all().get();
                return Clients.obj();
            });
            call("describeLogDirs", () -> {
                Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(List.of(1, 2, 3)).allDescriptions().get();
                Map<String, Object> out = new TreeMap<>();
                for (var broker : dirs.entrySet()) {
                    Map<String, Object> replicas = new TreeMap<>();
                    for (var dir : broker.getValue().entrySet()) {
                        for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.getValue().replicaInfos().entrySet()) {
                            if (r.getKey().topic().equals(topic)) replicas.put(r.getKey().toString(), r.getValue().size());
                        }
                    }
                    out.put(Integer.toString(broker.getKey()), Clients.obj("dirs", broker.getValue().size(), "replica_sizes", replicas));
                }
                return Clients.obj("brokers", out);
            });
            // reassignment: partition 0 onto the brokers it is not on plus its current leader
            call("alterPartitionReassignments", () -> {
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                TopicPartitionInfo info = d.partitions().get(0);
                List<Integer> current = new ArrayList<>();
                for (Node n : info.replicas()) current.add(n.id());
                List<Integer> target = new ArrayList<>();
                for (int id = 1; id <= 3; id++) if (!current.contains(id)) target.add(id);
                target.add(current.get(0));
                admin.alterPartitionReassignments(Map.of(p0, Optional.of(new NewPartitionReassignment(target)))).all().get();
                long deadline = System.currentTimeMillis() + 60_000;
                Map<TopicPartition, PartitionReassignment> ongoing = admin.listPartitionReassignments().reassignments().get();
                Map<String, Object> seen = Clients.obj("listed_while_moving", ongoing.containsKey(p0));
                while (!ongoing.isEmpty() && System.currentTimeMillis() < deadline) {
                    Thread.sleep(300);
                    ongoing = admin.listPartitionReassignments().reassignments().get();
                }
                TopicDescription after = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                seen.put("from", current);
                seen.put("to", target);
                seen.put("pending_after", ongoing.size());
                seen.put("partition0", partitions(after).get("0"));
                return seen;
            });
            call("alterPartitionReassignments.cancel_none", () -> {
                admin.alterPartitionReassignments(Map.of(new TopicPartition(topic, 1), Optional.empty())).all().get();
                return Clients.obj();
            });
            call("electLeaders.preferred", () -> {
                var result = admin.electLeaders(ElectionType.PREFERRED, Set.of(p0, new TopicPartition(topic, 1))).partitions().get();
                Map<String, Object> out = new TreeMap<>();
                for (var e : result.entrySet()) out.put(e.getKey().toString(), e.getValue().map(t -> t.getClass().getSimpleName()).orElse("elected"));
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                return Clients.obj("results", out, "partition0", partitions(d).get("0"));
            });
            // consumer group offsets
            String group = prefix + "-group";
            Properties cprops = Clients.consumerProps(bootstrap, group);
            cprops.put("enable.auto.commit", "false");
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(cprops)) {
                consumer.subscribe(List.of(topic));
                long deadline = System.currentTimeMillis() + 60_000;
                while (consumer.assignment().isEmpty() && System.currentTimeMillis() < deadline) consumer.poll(Duration.ofMillis(200));
                consumer.commitSync(Map.of(p0, new OffsetAndMetadata(70, "meta"), new TopicPartition(topic, 1), new OffsetAndMetadata(0)));
                call("describeConsumerGroups.active", () -> {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                    return Clients.obj("state", d.groupState().toString(), "members", d.members().size(), "assignor", d.partitionAssignor(),
                            "coordinator", d.coordinator().id(), "simple", d.isSimpleConsumerGroup(),
                            "assigned", d.members().isEmpty() ? 0 : d.members().iterator().next().assignment().topicPartitions().size());
                });
                call("alterConsumerGroupOffsets.active", () -> {
                    admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(50))).all().get();
                    return Clients.obj();
                });
            }
            call("listGroups", () -> {
                List<String> out = new ArrayList<>();
                for (GroupListing g : admin.listGroups().all().get()) {
                    out.add(g.groupId() + ":" + g.type().map(Object::toString).orElse("?") + ":" + g.protocol() + ":" + g.groupState().map(Object::toString).orElse("?"));
                }
                out.sort(null);
                return Clients.obj("groups", out);
            });
            call("listConsumerGroupOffsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> offsets = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                Map<String, Object> out = new TreeMap<>();
                for (var e : offsets.entrySet()) out.put(e.getKey().toString(), Clients.obj("offset", e.getValue().offset(), "metadata", e.getValue().metadata()));
                return Clients.obj("offsets", out);
            });
            call("describeConsumerGroups.empty", () -> {
                ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                return Clients.obj("state", d.groupState().toString(), "members", d.members().size());
            });
            call("alterConsumerGroupOffsets", () -> {
                admin.alterConsumerGroupOffsets(group, Map.of(p0, new OffsetAndMetadata(55))).all().get();
                return Clients.obj("offset", admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get().get(p0).offset());
            });
            call("deleteConsumerGroupOffsets", () -> {
                admin.deleteConsumerGroupOffsets(group, Set.of(new TopicPartition(topic, 1))).all().get();
                Map<TopicPartition, OffsetAndMetadata> left = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                List<String> names = new ArrayList<>();
                for (TopicPartition tp : left.keySet()) names.add(tp.toString());
                names.sort(null);
                return Clients.obj("left", names);
            });
            call("deleteConsumerGroups", () -> {
                admin.deleteConsumerGroups(List.of(group)).all().get();
                List<String> names = new ArrayList<>();
                for (GroupListing g : admin.listGroups().all().get()) names.add(g.groupId());
                return Clients.obj("still_listed", names.contains(group));
            });
            call("deleteConsumerGroups.unknown", () -> {
                admin.deleteConsumerGroups(List.of(prefix + "-no-such-group")).all().get();
                return Clients.obj();
            });
            call("describeMetadataQuorum", () -> {
                QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
                List<Integer> voters = new ArrayList<>();
                for (QuorumInfo.ReplicaState r : q.voters()) voters.add(r.replicaId());
                voters.sort(null);
                return Clients.obj("leader", q.leaderId(), "epoch", q.leaderEpoch(), "high_watermark", q.highWatermark(),
                        "voters", voters, "observers", q.observers().size());
            });
            call("describeFeatures", () -> {
                FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
                return Clients.obj("finalized", new ArrayList<>(new java.util.TreeSet<>(f.finalizedFeatures().keySet())),
                        "supported", new ArrayList<>(new java.util.TreeSet<>(f.supportedFeatures().keySet())),
                        "epoch", f.finalizedFeaturesEpoch().orElse(-1L));
            });
            call("deleteTopics", () -> {
                admin.deleteTopics(List.of(prefix + "-doomed")).all().get();
                long deadline = System.currentTimeMillis() + 30_000;
                boolean gone = false;
                while (!gone && System.currentTimeMillis() < deadline) {
                    gone = !admin.listTopics().names().get().contains(prefix + "-doomed");
                    if (!gone) Thread.sleep(200);
                }
                return Clients.obj("gone", gone);
            });
            call("deleteTopics.unknown", () -> {
                admin.deleteTopics(List.of(prefix + "-never")).all().get();
                return Clients.obj();
            });
        }
    }
}
