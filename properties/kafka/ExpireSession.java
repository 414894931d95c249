// Expires a ZooKeeper session at the server, as a session timeout would, while its process runs on:
// ZooKeeper's JMX ConnectionMXBean.terminateSession. A client cannot do this to another client's
// session (kazoo's session-stealing trick needs the session's password, which only its owner has).
// Usage: java ExpireSession.java JMX_PORT 0xSESSION_ID  (run by properties/kafka/run.py)
import java.util.Set;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class ExpireSession {
    public static void main(String[] args) throws Exception {
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://127.0.0.1:" + args[0] + "/jmxrmi");
        try (JMXConnector connector = JMXConnectorFactory.connect(url)) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            Set<ObjectName> names = server.queryNames(new ObjectName(
                "org.apache.ZooKeeperService:name0=*,name1=Connections,name2=*,name3=" + args[1]), null);
            if (names.isEmpty()) {
                System.err.println("no ZooKeeper connection holds session " + args[1]);
                System.exit(1);
            }
            for (ObjectName name : names) {
                server.invoke(name, "terminateSession", null, null);
            }
        }
    }
}
