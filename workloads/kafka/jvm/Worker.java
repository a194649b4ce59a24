package queuecheck;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.AppInfoParser;
import org.apache.kafka.common.utils.ProducerIdAndEpoch;

/**
 * One Kafka client of a queuecheck run (workloads/kafka/java.py drives it):
 * the Apache kafka-clients producer or consumer, one per process, so a crash
 * fault kills exactly one client. It reads commands as JSON lines on stdin
 * and answers each with one line on stdout: {"q": n, "ok": ...} or
 * {"q": n, "error": [class, message, retriable]}. The first line it reads is
 * {"role": "producer" | "consumer" | "share", "config": {...}}; it answers {"ready":
 * version}, or {"ready": null, "error": [...]} if the client cannot be made. Values travel as ISO-8859-1 text (a byte per char: the bytes
 * come back as they were), keys as UTF-8. End of stdin ends it. A producer
 * configured with a transactional.id also takes init_transactions,
 * begin_transaction (answered with whether it speaks transactions v2),
 * send_offsets_to_transaction (a consumer's offsets, with the group metadata
 * a consumer's group_metadata gave), commit_transaction and abort_transaction.
 */
public final class Worker {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    private static OutputStream out;

    public static void main(String[] args) throws Exception {
        // The protocol owns stdout; whatever a library prints goes to stderr.
        out = new FileOutputStream(FileDescriptor.out);
        System.setOut(System.err);
        if (args.length > 0 && "warm".equals(args[0])) {
            warm();
            return;
        }
        if (args.length > 0) {
            prewarm(args[0]);
        }
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 16);
        JsonNode hello = JSON.readTree(in.readLine());
        Properties props = new Properties();
        Iterator<Map.Entry<String, JsonNode>> it = hello.get("config").fields();
        while (it.hasNext()) {
            Map.Entry<String, JsonNode> e = it.next();
            props.put(e.getKey(), e.getValue().asText());
        }
        ObjectNode ready = NODES.objectNode();
        Role role;
        try {
            role = make(hello.get("role").asText(), props);
        } catch (Exception e) { // a setting the client refuses: said, then the process ends
            ready.putNull("ready");
            ready.set("error", error(e, true));
            write(ready);
            System.exit(2);
            return;
        }
        ready.put("ready", AppInfoParser.getVersion());
        write(ready);
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode cmd = JSON.readTree(line);
            long q = cmd.get("q").asLong();
            try {
                JsonNode result = role.handle(q, cmd);
                if (result != null) {
                    answer(q, result);
                }
            } catch (Exception e) {
                fail(q, e);
            }
            if (cmd.has("close")) {
                break;
            }
        }
        out.flush();
        System.exit(0);
    }

    static Role make(String role, Properties props) {
        switch (role) {
            case "producer":
                return new Producer(props);
            case "share":
                return new Share(props);
            default:
                return new Consumer(props);
        }
    }

    /**
     * Makes one client of each kind and one of each answer, so the JVM loads
     * every class a run's clients load (the build archives them: a client
     * then starts in a fraction of the time). Reaches for loopback's
     * discard port only.
     */
    static void warm() throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", "127.0.0.1:9");
        props.put("group.id", "warm");
        new Producer(props).producer.close(Duration.ZERO);
        new Consumer(props).consumer.close(Duration.ZERO);
        new Share(props).consumer.close(Duration.ZERO);
        answer(0, JSON.readTree("[[0, 0]]"));
        fail(0, new RetriableException("warm") {});
        out.flush();
        System.exit(0);
    }

    /**
     * A JVM started ahead of need makes and closes one client of the role it
     * will have before it reads which client it is: the classes are then
     * initialized and their code run once, and the real client is made in a
     * fraction of the time (ten made at once beside three brokers on two
     * cores took 4 to 6 s each). Reaches for loopback's discard port only.
     */
    static void prewarm(String role) {
        Properties props = new Properties();
        props.put("bootstrap.servers", "127.0.0.1:9");
        props.put("group.id", "prewarm");
        props.put("client.id", "prewarm");
        try {
            Role r = make(role, props);
            if (r instanceof Producer) {
                ((Producer) r).producer.close(Duration.ZERO);
            } else if (r instanceof Share) {
                ((Share) r).consumer.close(Duration.ZERO);
            } else {
                ((Consumer) r).consumer.close(Duration.ZERO);
            }
        } catch (RuntimeException e) {
            System.err.println("prewarm: " + e); // only slower, never wrong
        }
    }

    static synchronized void write(JsonNode node) {
        try {
            out.write(JSON.writeValueAsBytes(node));
            out.write('\n');
            out.flush();
        } catch (Exception e) {
            System.exit(3); // the harness is gone: so is this client
        }
    }

    static void answer(long q, JsonNode result) {
        ObjectNode o = NODES.objectNode();
        o.put("q", q);
        o.set("ok", result);
        write(o);
    }

    static void fail(long q, Throwable e) {
        ObjectNode o = NODES.objectNode();
        o.put("q", q);
        o.set("error", error(e, false));
        write(o);
    }

    /** [class, message, retriable, not queued]: what Python classifies. */
    static ArrayNode error(Throwable e, boolean notQueued) {
        ArrayNode a = NODES.arrayNode();
        a.add(e.getClass().getSimpleName());
        a.add(String.valueOf(e.getMessage()));
        a.add(e instanceof RetriableException);
        a.add(notQueued);
        return a;
    }

    /** A consumed record, added to `records` as [partition, offset, key, value]. */
    static ArrayNode record(ArrayNode records, ConsumerRecord<byte[], byte[]> r) {
        ArrayNode a = records.addArray().add(r.partition()).add(r.offset());
        if (r.key() == null) {
            a.addNull();
        } else {
            a.add(new String(r.key(), StandardCharsets.UTF_8));
        }
        a.add(new String(r.value(), StandardCharsets.ISO_8859_1));
        return a;
    }

    static Duration millis(JsonNode cmd, String field) {
        return Duration.ofMillis(cmd.get(field).asLong());
    }

    /** {"topic": t, "offsets": {partition: next offset}} as the client takes offsets. */
    static Map<TopicPartition, OffsetAndMetadata> offsets(JsonNode c) {
        String topic = c.get("topic").asText();
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        c.get("offsets").fields().forEachRemaining(e -> offsets.put(
                new TopicPartition(topic, Integer.parseInt(e.getKey())),
                new OffsetAndMetadata(e.getValue().asLong())));
        return offsets;
    }

    /**
     * A consumer's group metadata as its group_metadata gave it (the broker
     * fences offsets from a member that lost its partitions, KIP-447), or a
     * bare group id (assign mode: no member to fence).
     */
    static ConsumerGroupMetadata groupMetadata(JsonNode g) {
        if (g.isTextual()) {
            return new ConsumerGroupMetadata(g.asText());
        }
        JsonNode instance = g.get("group_instance_id");
        return new ConsumerGroupMetadata(
                g.get("group_id").asText(),
                g.get("generation_id").asInt(),
                g.get("member_id").asText(),
                instance == null || instance.isNull() ? Optional.empty() : Optional.of(instance.asText()));
    }

    interface Role {
        /** The answer, or null when it comes later (a send's delivery reports). */
        JsonNode handle(long q, JsonNode cmd) throws Exception;
    }

    /** A producer: a send is answered once every record's report came. */
    static final class Producer implements Role {
        private final KafkaProducer<byte[], byte[]> producer;
        // Set while send() runs on this thread: a report made inside it is
        // the client refusing the record before it was queued (metadata wait,
        // size), so nothing left the process.
        private boolean inSend;

        Producer(Properties props) {
            producer = new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer());
        }

        /**
         * The transaction under way as the client holds it, read from its
         * transaction manager (the client does not expose it): "v2", whether
         * it speaks KIP-890's transactions v2 (chosen at begin from the
         * brokers' finalized transaction.version), and "producer_id" /
         * "epoch", which its writes and EndTxn carry (a fence compares them);
         * null where this client has no such field.
         */
        private JsonNode transactionState() {
            ObjectNode state = NODES.objectNode();
            Object manager;
            try {
                Field tm = KafkaProducer.class.getDeclaredField("transactionManager");
                tm.setAccessible(true);
                manager = tm.get(producer);
            } catch (ReflectiveOperationException | RuntimeException e) {
                return state.putNull("v2").putNull("producer_id").putNull("epoch");
            }
            try {
                Field v2 = manager.getClass().getDeclaredField("isTransactionV2Enabled");
                v2.setAccessible(true);
                state.put("v2", v2.getBoolean(manager));
            } catch (ReflectiveOperationException | RuntimeException e) {
                state.putNull("v2");
            }
            try {
                Field held = manager.getClass().getDeclaredField("producerIdAndEpoch");
                held.setAccessible(true);
                ProducerIdAndEpoch ids = (ProducerIdAndEpoch) held.get(manager);
                state.put("producer_id", ids.producerId).put("epoch", ids.epoch);
            } catch (ReflectiveOperationException | RuntimeException e) {
                state.putNull("producer_id").putNull("epoch");
            }
            return state;
        }

        @Override
        public JsonNode handle(long q, JsonNode cmd) {
            if (cmd.has("close")) {
                producer.close(millis(cmd, "close"));
                return NODES.nullNode();
            }
            // Transactions: each call blocks up to max.block.ms at most.
            if (cmd.has("init_transactions")) {
                producer.initTransactions();
                return NODES.nullNode();
            }
            if (cmd.has("begin_transaction")) {
                producer.beginTransaction();
                return transactionState();
            }
            if (cmd.has("send_offsets_to_transaction")) {
                JsonNode c = cmd.get("send_offsets_to_transaction");
                producer.sendOffsetsToTransaction(offsets(c), groupMetadata(c.get("group")));
                return NODES.nullNode();
            }
            if (cmd.has("commit_transaction")) {
                producer.commitTransaction();
                return NODES.nullNode();
            }
            if (cmd.has("abort_transaction")) {
                producer.abortTransaction();
                return NODES.nullNode();
            }
            JsonNode send = cmd.get("send");
            String topic = send.get("topic").asText();
            JsonNode records = send.get("records");
            int n = records.size();
            JsonNode[] results = new JsonNode[n];
            AtomicInteger left = new AtomicInteger(n);
            Thread caller = Thread.currentThread();
            for (int i = 0; i < n; i++) {
                final int at = i;
                JsonNode r = records.get(i);
                byte[] key = r.get(0).isNull() ? null : r.get(0).asText().getBytes(StandardCharsets.UTF_8);
                byte[] value = r.get(1).asText().getBytes(StandardCharsets.ISO_8859_1);
                try {
                    inSend = true;
                    producer.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                        boolean early = inSend && Thread.currentThread() == caller;
                        results[at] = e == null ? NODES.arrayNode().add(md.partition()).add(md.offset()) : error(e, early);
                        if (left.decrementAndGet() == 0) {
                            answer(q, NODES.arrayNode().addAll(List.of(results)));
                        }
                    });
                } catch (Exception e) {
                    results[at] = error(e, true);
                    if (left.decrementAndGet() == 0) {
                        answer(q, NODES.arrayNode().addAll(List.of(results)));
                    }
                } finally {
                    inSend = false;
                }
            }
            return null;
        }
    }

    /** A consumer: a group member, a manually assigned reader, or the drain. */
    static final class Consumer implements Role {
        private final KafkaConsumer<byte[], byte[]> consumer;
        private final ArrayNode events = NODES.arrayNode(); // rebalances not yet handed over
        // What a poll got beyond what its caller wanted (the drain asks for
        // fewer than max.poll.records): handed over first next time.
        private final ArrayDeque<ConsumerRecord<byte[], byte[]>> kept = new ArrayDeque<>();

        Consumer(Properties props) {
            consumer = new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        private void note(String f, Collection<TopicPartition> parts, boolean always) {
            if (parts.isEmpty() && !always) {
                return; // also called with nothing before a first assignment
            }
            List<Integer> ps = new ArrayList<>();
            for (TopicPartition tp : parts) {
                ps.add(tp.partition());
            }
            ps.sort(null);
            ArrayNode e = NODES.arrayNode().add(f);
            ArrayNode a = e.addArray();
            ps.forEach(a::add);
            events.add(e);
        }

        private List<TopicPartition> partitions(JsonNode cmd) {
            String topic = cmd.get("topic").asText();
            List<TopicPartition> tps = new ArrayList<>();
            for (JsonNode p : cmd.get("partitions")) {
                tps.add(new TopicPartition(topic, p.asInt()));
            }
            return tps;
        }

        private static ObjectNode byPartition(Map<TopicPartition, Long> offsets) {
            ObjectNode o = NODES.objectNode();
            offsets.forEach((tp, off) -> o.put(Integer.toString(tp.partition()), off));
            return o;
        }

        @Override
        public JsonNode handle(long q, JsonNode cmd) {
            if (cmd.has("subscribe")) {
                consumer.subscribe(List.of(cmd.get("subscribe").asText()), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        note("revoke", parts, false);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        note("assign", parts, true);
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        note("revoke", parts, false);
                    }
                });
                return NODES.nullNode();
            }
            if (cmd.has("assign")) {
                consumer.assign(partitions(cmd.get("assign")));
                return NODES.nullNode();
            }
            if (cmd.has("poll")) {
                return poll(cmd.get("poll"));
            }
            if (cmd.has("commit")) {
                JsonNode c = cmd.get("commit");
                consumer.commitSync(offsets(c), millis(c, "timeout_ms"));
                return NODES.nullNode();
            }
            if (cmd.has("group_metadata")) {
                ConsumerGroupMetadata g = consumer.groupMetadata();
                ObjectNode o = NODES.objectNode();
                o.put("group_id", g.groupId());
                o.put("generation_id", g.generationId());
                o.put("member_id", g.memberId());
                o.put("group_instance_id", g.groupInstanceId().orElse(null));
                return o;
            }
            if (cmd.has("ends")) {
                JsonNode c = cmd.get("ends");
                return byPartition(consumer.endOffsets(partitions(c), millis(c, "timeout_ms")));
            }
            if (cmd.has("starts")) {
                JsonNode c = cmd.get("starts");
                return byPartition(consumer.beginningOffsets(partitions(c), millis(c, "timeout_ms")));
            }
            if (cmd.has("seek_to_beginning")) {
                consumer.seekToBeginning(partitions(cmd.get("seek_to_beginning")));
                return NODES.nullNode();
            }
            if (cmd.has("positions")) {
                JsonNode c = cmd.get("positions");
                Map<TopicPartition, Long> at = new HashMap<>();
                for (TopicPartition tp : partitions(c)) {
                    at.put(tp, consumer.position(tp, millis(c, "timeout_ms")));
                }
                return byPartition(at);
            }
            if (cmd.has("close")) {
                consumer.close(millis(cmd, "close"));
                return NODES.nullNode();
            }
            throw new IllegalArgumentException("unknown command " + cmd);
        }

        /** Records in delivery order: [partition, offset, key, value]; the rebalances seen. */
        private JsonNode poll(JsonNode cmd) {
            int most = cmd.get("max").asInt();
            if (kept.isEmpty()) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(millis(cmd, "timeout_ms"))) {
                    kept.add(r);
                }
            }
            ObjectNode o = NODES.objectNode();
            ArrayNode records = o.putArray("records");
            while (!kept.isEmpty() && records.size() < most) {
                record(records, kept.poll());
            }
            if (cmd.has("next_ms")) {
                // Where each assigned partition's reading stands: the first
                // record kept back, else the consumer's position.
                Map<TopicPartition, Long> next = new HashMap<>();
                for (TopicPartition tp : consumer.assignment()) {
                    next.put(tp, consumer.position(tp, millis(cmd, "next_ms")));
                }
                for (ConsumerRecord<byte[], byte[]> r : kept) {
                    next.merge(new TopicPartition(r.topic(), r.partition()), r.offset(), Math::min);
                }
                o.set("next", byPartition(next));
            }
            o.set("events", events.deepCopy());
            events.removeAll();
            return o;
        }
    }

    /**
     * A share group member (KIP-932) in explicit acknowledgement mode: each
     * poll's records are acknowledged one by one (accept, release, reject),
     * then committed together; the answer names each partition's outcome.
     */
    static final class Share implements Role {
        private final KafkaShareConsumer<byte[], byte[]> consumer;
        // The last poll's records by partition@offset: a record is
        // acknowledged as the record the poll returned (acknowledging by
        // offset is only for records the client could not hand over).
        private final Map<String, ConsumerRecord<byte[], byte[]>> polled = new HashMap<>();

        Share(Properties props) {
            props.putIfAbsent("share.acknowledgement.mode", "explicit");
            consumer = new KafkaShareConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer());
        }

        @Override
        public JsonNode handle(long q, JsonNode cmd) {
            if (cmd.has("subscribe")) {
                consumer.subscribe(List.of(cmd.get("subscribe").asText()));
                return NODES.nullNode();
            }
            if (cmd.has("poll")) {
                ArrayNode records = NODES.arrayNode();
                polled.clear();
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(millis(cmd.get("poll"), "timeout_ms"))) {
                    polled.put(r.partition() + "@" + r.offset(), r);
                    ArrayNode a = record(records, r);
                    r.deliveryCount().ifPresentOrElse(n -> a.add(n.intValue()), a::addNull);
                }
                return records;
            }
            if (cmd.has("acknowledge")) {
                JsonNode c = cmd.get("acknowledge");
                String topic = c.get("topic").asText();
                for (JsonNode a : c.get("acks")) {
                    ConsumerRecord<byte[], byte[]> r = polled.get(a.get(0).asInt() + "@" + a.get(1).asLong());
                    if (r == null) {
                        throw new IllegalArgumentException(topic + "/" + a.get(0) + "@" + a.get(1) + ": not in the last poll");
                    }
                    consumer.acknowledge(r, AcknowledgeType.valueOf(a.get(2).asText().toUpperCase()));
                }
                ObjectNode out = NODES.objectNode();
                consumer.commitSync(millis(c, "timeout_ms")).forEach((tp, e) -> out.set(
                        Integer.toString(tp.partition()),
                        e.isPresent() ? error(e.get(), false) : NODES.nullNode()));
                return out;
            }
            if (cmd.has("close")) {
                consumer.close(millis(cmd, "close"));
                return NODES.nullNode();
            }
            throw new IllegalArgumentException("unknown command " + cmd);
        }
    }
}
