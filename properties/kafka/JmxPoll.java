// Samples the KIP-866 §Metrics gauges (and Raft's) of every Kafka process of a run over JMX, from
// outside, with no change to Kafka: one JVM for the whole cluster rather than one JmxTool per process.
// Usage: java JmxPoll.java TARGETS_FILE INTERVAL_MS  (run by properties/kafka/run.py)
// TARGETS_FILE holds "name port" lines and is read again every round, so processes added later are
// sampled too. Each sample of a process is one JSON line on stdout, written only when it differs from
// that process's last one; a process that cannot be reached (stopped, killed, paused) is one line with
// "up": false. When stdin closes, every process is sampled once more, marked "final", and the poller exits.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.InstanceNotFoundException;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class JmxPoll {
    // Yammer gauges: the attribute is "Value" (QuorumControllerMetrics, ControllerMetadataMetrics,
    // KafkaController.scala, MetadataLoaderMetrics at Kafka 3.9)
    static final String[] CONTROLLER_GAUGES = {
        "ZkMigrationState", "MigratingZkBrokerCount", "ZkWriteBehindLag", "ActiveControllerCount",
        "ActiveBrokerCount", "FencedBrokerCount", "MetadataErrorCount", "LastCommittedRecordOffset",
    };
    // Kafka metrics: one attribute each (KafkaRaftMetrics, BrokerServerMetrics)
    static final String[][] KAFKA_METRICS = {
        {"kafka.server:type=raft-metrics", "current-state", "current-leader", "current-epoch", "high-watermark"},
        {"kafka.server:type=broker-metadata-metrics", "metadata-apply-error-count", "metadata-load-error-count"},
    };

    static final Map<String, JMXConnector> connectors = new java.util.concurrent.ConcurrentHashMap<>();
    static final Map<String, String> last = new HashMap<>();

    public static void main(String[] args) throws Exception {
        Path targets = Path.of(args[0]);
        long interval = Long.parseLong(args[1]);
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        Map<String, Future<?>> busy = new HashMap<>();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() != -1) { }
            } catch (IOException ignored) { }
        });
        stdin.setDaemon(true);
        stdin.start();
        while (stdin.isAlive()) {
            for (Map.Entry<String, Integer> t : read(targets).entrySet()) {
                Future<?> running = busy.get(t.getKey());
                if (running == null || running.isDone()) {  // a paused process holds only its own thread
                    busy.put(t.getKey(), pool.submit(() -> sample(t.getKey(), t.getValue(), false)));
                }
            }
            stdin.join(interval);
        }
        for (Future<?> f : busy.values()) {
            try {
                f.get(3, TimeUnit.SECONDS);
            } catch (Exception ignored) { }
        }
        List<Future<?>> finals = new java.util.ArrayList<>();
        for (Map.Entry<String, Integer> t : read(targets).entrySet()) {
            finals.add(pool.submit(() -> sample(t.getKey(), t.getValue(), true)));
        }
        for (Future<?> f : finals) {
            try {
                f.get(5, TimeUnit.SECONDS);
            } catch (Exception ignored) { }
        }
        System.out.flush();
        System.exit(0);
    }

    static Map<String, Integer> read(Path targets) throws IOException {
        Map<String, Integer> out = new TreeMap<>();
        if (!Files.exists(targets)) return out;
        for (String line : Files.readAllLines(targets)) {
            String[] parts = line.trim().split(" ");
            if (parts.length == 2) out.put(parts[0], Integer.parseInt(parts[1]));
        }
        return out;
    }

    static void sample(String name, int port, boolean isFinal) {
        Map<String, Object> values = new TreeMap<>();
        boolean up;
        try {
            MBeanServerConnection server = connect(name, port);
            for (String gauge : CONTROLLER_GAUGES) {
                try {
                    values.put(gauge, server.getAttribute(
                        new ObjectName("kafka.controller:type=KafkaController,name=" + gauge), "Value"));
                } catch (InstanceNotFoundException absent) { }  // not this kind of process, or not this release
            }
            try {
                values.put("CurrentMetadataVersion", server.getAttribute(
                    new ObjectName("kafka.server:type=MetadataLoader,name=CurrentMetadataVersion"), "Value"));
            } catch (InstanceNotFoundException absent) { }
            for (String[] group : KAFKA_METRICS) {
                try {
                    String[] attributes = java.util.Arrays.copyOfRange(group, 1, group.length);
                    AttributeList got = server.getAttributes(new ObjectName(group[0]), attributes);
                    for (Attribute a : got.asList()) values.put(a.getName(), a.getValue());
                } catch (InstanceNotFoundException absent) { }
            }
            up = true;
        } catch (Exception e) {  // not started, killed, stopped, or paused past the RMI timeouts
            JMXConnector gone = connectors.remove(name);
            if (gone != null) {
                try {
                    gone.close();
                } catch (Exception ignored) { }
            }
            up = false;
        }
        String body = "\"up\": " + up + (up ? ", \"metrics\": " + json(values) : "");
        synchronized (last) {
            if (!isFinal && body.equals(last.get(name))) return;
            last.put(name, body);
            System.out.println("{\"channel\": \"jmx\", \"time\": " + System.currentTimeMillis()
                + ", \"process\": \"" + name + "\", " + body + (isFinal ? ", \"final\": true" : "") + "}");
            System.out.flush();
        }
    }

    // never two samples of one process at once, so no lock: a paused process must not hold up the others
    static MBeanServerConnection connect(String name, int port) throws IOException {
        JMXConnector connector = connectors.get(name);
        if (connector == null) {
            JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://127.0.0.1:" + port + "/jmxrmi");
            connector = JMXConnectorFactory.connect(url);
            connectors.put(name, connector);
        }
        return connector.getMBeanServerConnection();
    }

    static String json(Map<String, Object> values) {
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Object> e : values.entrySet()) {
            if (out.length() > 1) out.append(", ");
            out.append('"').append(e.getKey()).append("\": ");
            Object v = e.getValue();
            if (v instanceof Number) {
                double d = ((Number) v).doubleValue();
                if (Double.isNaN(d) || Double.isInfinite(d)) out.append("null");
                else out.append(d == Math.rint(d) ? String.valueOf((long) d) : String.valueOf(d));
            } else {
                out.append('"').append(String.valueOf(v).replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
            }
        }
        return out.append('}').toString();
    }
}
