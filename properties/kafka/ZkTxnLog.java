// Prints every transaction of a ZooKeeper server's transaction log, one JSON object a line, in zxid order, read
// with ZooKeeper's own classes (FileTxnLog, the jute records): what a client's watches cannot see, every write and
// the session that made it, failed multis included (marked "failed": ZooKeeper logs a multi whose op failed, with
// ErrorTxn from that op on, and applies none of it: DataTree.processTxn).
// Usage: java -cp zookeeper.jar ZkTxnLog.java DATA_DIR  (DATA_DIR holds version-2/log.*; run by properties/kafka/cluster.py)
// Exit 0 having printed the whole log; 2 if a record could not be read (what came before it is printed).
import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.jute.Record;
import org.apache.zookeeper.ZooDefs.OpCode;
import org.apache.zookeeper.server.ByteBufferInputStream;
import org.apache.zookeeper.server.persistence.FileTxnLog;
import org.apache.zookeeper.server.persistence.TxnLog.TxnIterator;
import org.apache.zookeeper.txn.CheckVersionTxn;
import org.apache.zookeeper.txn.CreateContainerTxn;
import org.apache.zookeeper.txn.CreateTTLTxn;
import org.apache.zookeeper.txn.CreateTxn;
import org.apache.zookeeper.txn.DeleteTxn;
import org.apache.zookeeper.txn.ErrorTxn;
import org.apache.zookeeper.txn.MultiTxn;
import org.apache.zookeeper.txn.SetDataTxn;
import org.apache.zookeeper.txn.Txn;
import org.apache.zookeeper.txn.TxnHeader;

public class ZkTxnLog {
    static final int MAX_DATA = 2048; // longer data is left out: the checks read small JSON znodes only

    public static void main(String[] args) throws Exception {
        FileTxnLog log = new FileTxnLog(new File(args[0], "version-2"));
        StringBuilder out = new StringBuilder();
        try {
            TxnIterator it = log.read(0);
            while (it.getHeader() != null) {
                TxnHeader header = it.getHeader();
                out.setLength(0);
                out.append("{\"channel\":\"zk-txn\",\"zxid\":").append(header.getZxid())
                   .append(",\"session\":").append(header.getClientId())
                   .append(",\"time\":").append(header.getTime());
                List<String> ops = new ArrayList<>();
                boolean failed = false;
                if (header.getType() == OpCode.multi) {
                    for (Txn sub : ((MultiTxn) it.getTxn()).getTxns()) {
                        Record record = subRecord(sub.getType());
                        if (record != null) {
                            ByteBufferInputStream.byteBuffer2Record(ByteBuffer.wrap(sub.getData()), record);
                        }
                        failed |= sub.getType() == OpCode.error;
                        ops.add(op(sub.getType(), record));
                    }
                    out.append(",\"type\":\"multi\"");
                } else {
                    failed = header.getType() == OpCode.error;
                    out.append(",\"type\":\"").append(name(header.getType())).append('"');
                    if (isWrite(header.getType()) || header.getType() == OpCode.error) {
                        ops.add(op(header.getType(), it.getTxn()));
                    }
                }
                out.append(",\"failed\":").append(failed).append(",\"ops\":[").append(String.join(",", ops))
                   .append("]}");
                System.out.println(out);
                if (!it.next()) {
                    break;
                }
            }
        } catch (IOException e) {
            System.out.flush();
            System.err.println("ZooKeeper's transaction log could not be read past the last transaction printed: " + e);
            System.exit(2);
        }
    }

    static boolean isWrite(int type) {
        return type == OpCode.create || type == OpCode.create2 || type == OpCode.createContainer
            || type == OpCode.createTTL || type == OpCode.setData || type == OpCode.delete
            || type == OpCode.deleteContainer || type == OpCode.check;
    }

    static Record subRecord(int type) {
        switch (type) {
            case OpCode.create: case OpCode.create2: return new CreateTxn();
            case OpCode.createContainer: return new CreateContainerTxn();
            case OpCode.createTTL: return new CreateTTLTxn();
            case OpCode.setData: return new SetDataTxn();
            case OpCode.delete: case OpCode.deleteContainer: return new DeleteTxn();
            case OpCode.error: return new ErrorTxn();
            case OpCode.check: return new CheckVersionTxn();
            default: return null;
        }
    }

    static String op(int type, Record record) {
        StringBuilder s = new StringBuilder("{\"op\":\"").append(name(type)).append('"');
        if (record instanceof CreateTxn) {
            CreateTxn t = (CreateTxn) record;
            s.append(",\"path\":").append(quote(t.getPath())).append(",\"ephemeral\":").append(t.getEphemeral());
            data(s, t.getData());
        } else if (record instanceof CreateContainerTxn) {
            s.append(",\"path\":").append(quote(((CreateContainerTxn) record).getPath()));
        } else if (record instanceof CreateTTLTxn) {
            s.append(",\"path\":").append(quote(((CreateTTLTxn) record).getPath()));
        } else if (record instanceof SetDataTxn) {
            SetDataTxn t = (SetDataTxn) record;
            // the version the write gave the znode
            s.append(",\"path\":").append(quote(t.getPath())).append(",\"version\":").append(t.getVersion());
            data(s, t.getData());
        } else if (record instanceof DeleteTxn) {
            s.append(",\"path\":").append(quote(((DeleteTxn) record).getPath()));
        } else if (record instanceof CheckVersionTxn) {
            // PrepRequestProcessor.checkAndIncVersion logs the checked version plus one: printed as checked
            CheckVersionTxn t = (CheckVersionTxn) record;
            s.append(",\"path\":").append(quote(t.getPath())).append(",\"version\":").append(t.getVersion() - 1);
        } else if (record instanceof ErrorTxn) {
            s.append(",\"error\":").append(((ErrorTxn) record).getErr());
        }
        return s.append('}').toString();
    }

    static void data(StringBuilder s, byte[] data) {
        if (data == null || data.length > MAX_DATA) {
            return;
        }
        try {
            String text = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(data)).toString();
            s.append(",\"data\":").append(quote(text));
        } catch (CharacterCodingException e) {
            // not text: /brokers/ids' placeholder bytes and the like, which no check reads
        }
    }

    static String name(int type) {
        switch (type) {
            case OpCode.create: return "create";
            case OpCode.create2: return "create";
            case OpCode.createContainer: return "createContainer";
            case OpCode.createTTL: return "createTTL";
            case OpCode.setData: return "setData";
            case OpCode.delete: return "delete";
            case OpCode.deleteContainer: return "deleteContainer";
            case OpCode.check: return "check";
            case OpCode.error: return "error";
            case OpCode.createSession: return "createSession";
            case OpCode.closeSession: return "closeSession";
            case OpCode.setACL: return "setACL";
            case OpCode.reconfig: return "reconfig";
            default: return "op" + type;
        }
    }

    static String quote(String text) {
        StringBuilder s = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"': s.append("\\\""); break;
                case '\\': s.append("\\\\"); break;
                default:
                    if (c < 0x20) {
                        s.append(String.format("\\u%04x", (int) c));
                    } else {
                        s.append(c);
                    }
            }
        }
        return s.append('"').toString();
    }
}
