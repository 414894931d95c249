// Asks each Kafka broker for the metadata it serves clients, with a MetadataRequest sent to that broker alone, and
// prints one JSON object a line per broker and round: its live brokers, its topics with their ids, and each
// partition's leader, leader epoch, replicas and ISR. It is the broker's own metadata cache (an admin client asks
// whichever broker it likes). Kafka's own request and response classes, over a plain socket.
// Usage: java -cp 'KAFKA_LIB/*' BrokerMetadata.java ROUNDS INTERVAL_MS ID=HOST:PORT ...
// Asks every broker once a round, for at most ROUNDS rounds INTERVAL_MS apart, and stops early once a round answers
// exactly as the one before it (the caches have settled). A broker that cannot be asked is a line with "error".
// Run by properties/kafka/cluster.py; exits 0.
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.kafka.common.message.MetadataResponseData.MetadataResponseBroker;
import org.apache.kafka.common.message.MetadataResponseData.MetadataResponsePartition;
import org.apache.kafka.common.message.MetadataResponseData.MetadataResponseTopic;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.MetadataRequest;
import org.apache.kafka.common.requests.MetadataResponse;
import org.apache.kafka.common.requests.RequestHeader;

public class BrokerMetadata {
    // v12 carries topic ids; every release from 3.1 to 4.x takes it (4.0 dropped v0 to v3 only)
    static final short VERSION = 12;
    static final int TIMEOUT_MS = 5000;
    static int correlation = 0;

    public static void main(String[] args) throws Exception {
        int rounds = Integer.parseInt(args[0]);
        long interval = Long.parseLong(args[1]);
        List<String> previous = null;
        for (int round = 0; round < rounds; round++) {
            if (round > 0) {
                Thread.sleep(interval);
            }
            List<String> answers = new ArrayList<>();
            long time = System.currentTimeMillis();
            for (int i = 2; i < args.length; i++) {
                String[] target = args[i].split("=", 2);
                answers.add("\"broker\":" + target[0] + "," + ask(target[1]));
            }
            for (String answer : answers) {
                System.out.println("{\"channel\":\"broker-metadata\",\"time\":" + time + ",\"round\":" + round + ","
                        + answer + "}");
            }
            System.out.flush();
            if (answers.equals(previous)) {
                break;
            }
            previous = answers;
        }
    }

    static String ask(String address) {
        int colon = address.lastIndexOf(':');
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress(address.substring(0, colon),
                    Integer.parseInt(address.substring(colon + 1))), TIMEOUT_MS);
            socket.setSoTimeout(TIMEOUT_MS);
            RequestHeader header = new RequestHeader(ApiKeys.METADATA, VERSION, "kraftcheck", ++correlation);
            ByteBuffer request = MetadataRequest.Builder.allTopics().build(VERSION).serializeWithHeader(header);
            DataOutputStream out = new DataOutputStream(socket.getOutputStream());
            byte[] bytes = new byte[request.remaining()];
            request.get(bytes);
            out.writeInt(bytes.length);
            out.write(bytes);
            out.flush();
            DataInputStream in = new DataInputStream(socket.getInputStream());
            byte[] body = new byte[in.readInt()];
            in.readFully(body);
            MetadataResponse response = (MetadataResponse) AbstractResponse.parseResponse(ByteBuffer.wrap(body), header);
            return json(response);
        } catch (Exception e) {
            return "\"error\":\"" + (e.getClass().getSimpleName() + ": " + e.getMessage()).replace("\\", "\\\\")
                    .replace("\"", "'") + "\"";
        }
    }

    static String json(MetadataResponse response) {
        StringBuilder out = new StringBuilder("\"brokers\":[");
        List<MetadataResponseBroker> brokers = new ArrayList<>(response.data().brokers());
        brokers.sort(Comparator.comparingInt(MetadataResponseBroker::nodeId));
        for (int i = 0; i < brokers.size(); i++) {
            out.append(i > 0 ? "," : "").append(brokers.get(i).nodeId());
        }
        out.append("],\"topics\":[");
        List<MetadataResponseTopic> topics = new ArrayList<>(response.data().topics());
        topics.sort(Comparator.comparing(MetadataResponseTopic::name));
        for (int t = 0; t < topics.size(); t++) {
            MetadataResponseTopic topic = topics.get(t);
            // topic names are [a-zA-Z0-9._-] (Topic.validate): nothing to escape
            out.append(t > 0 ? "," : "").append("{\"name\":\"").append(topic.name())
               .append("\",\"id\":\"").append(topic.topicId()).append("\",\"error\":").append(topic.errorCode())
               .append(",\"partitions\":[");
            List<MetadataResponsePartition> partitions = new ArrayList<>(topic.partitions());
            partitions.sort(Comparator.comparingInt(MetadataResponsePartition::partitionIndex));
            for (int p = 0; p < partitions.size(); p++) {
                MetadataResponsePartition partition = partitions.get(p);
                out.append(p > 0 ? "," : "").append("{\"partition\":").append(partition.partitionIndex())
                   .append(",\"leader\":").append(partition.leaderId())
                   .append(",\"leader_epoch\":").append(partition.leaderEpoch())
                   .append(",\"replicas\":").append(partition.replicaNodes())
                   .append(",\"isr\":").append(partition.isrNodes())
                   .append(",\"error\":").append(partition.errorCode()).append('}');
            }
            out.append("]}");
        }
        return out.append(']').toString();
    }
}
