package longlook.kwik;

import java.io.BufferedWriter;
import java.io.Closeable;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * longlook endpoint on kwik: an HTTP/0.9 ("hq-interop") client or server driven by the
 * environment of docs/endpoints.md (ROLE, TESTCASE, REQUESTS, LL_*).
 *
 * <p>Exit status: 0 when every request completed (client) or on SIGTERM (server); 127
 * with one stderr line for an option kwik cannot honour; 1 for anything else.
 */
public final class Endpoint {
    static final String VERSION = "0.10.8";
    static final String ALPN = "hq-interop";
    private static final List<Closeable> AT_EXIT = new ArrayList<>();

    /** An option kwik cannot honour: exit 127. */
    static final class Unsupported extends Exception {
        Unsupported(String why) {
            super(why);
        }
    }

    /** The contract's environment, checked once. */
    record Opts(String role, String testcase, List<String> requests, String addr, int port, Path www,
                Path downloads, Path certs, String keylog, String applog, long flowWindow, Duration think,
                boolean upload, Duration timeout) {
        static Opts from(Map<String, String> env) throws Unsupported {
            String role = env.getOrDefault("ROLE", "");
            if (!role.equals("client") && !role.equals("server")) {
                throw new IllegalArgumentException("ROLE=" + role + ": client or server");
            }
            String testcase = env.getOrDefault("TESTCASE", "transfer");
            if (!List.of("transfer", "multiplexing", "appidle").contains(testcase)) {
                throw new Unsupported("TESTCASE=" + testcase + " unsupported (transfer, multiplexing, appidle)");
            }
            String cc = env.getOrDefault("LL_CC", "");
            if (!cc.isEmpty() && !cc.equals("newreno")) {
                throw new Unsupported("kwik has no LL_CC \"" + cc + "\"; known: newreno");
            }
            if (!env.getOrDefault("LL_INITIAL_WINDOW", "").isEmpty()) {
                throw new Unsupported("LL_INITIAL_WINDOW unsupported: kwik's initial window is fixed");
            }
            String mds = env.getOrDefault("LL_MAX_DATAGRAM_SIZE", "");
            if (!mds.isEmpty() && Integer.parseInt(mds) < 1200) {
                throw new Unsupported("LL_MAX_DATAGRAM_SIZE=" + mds + " unsupported: QUIC needs 1200 and kwik sizes its own datagrams");
            }
            String direction = env.getOrDefault("LL_DIRECTION", "download");
            if (!direction.equals("download") && !direction.equals("upload")) {
                throw new Unsupported("LL_DIRECTION=" + direction + " unsupported (download or upload)");
            }
            List<String> requests = new ArrayList<>();
            for (String r : env.getOrDefault("REQUESTS", "").trim().split("\\s+")) {
                if (!r.isEmpty()) {
                    requests.add(r);
                }
            }
            String timeout = env.getOrDefault("LL_TIMEOUT_S", "");
            return new Opts(role, testcase, requests, env.getOrDefault("LL_ADDR", "0.0.0.0"),
                    Integer.parseInt(env.getOrDefault("LL_PORT", "4433")),
                    Path.of(env.getOrDefault("LL_WWW", "/www")), Path.of(env.getOrDefault("LL_DOWNLOADS", "/downloads")),
                    Path.of(env.getOrDefault("LL_CERTS", "/certs")), env.get("SSLKEYLOGFILE"), env.get("LL_APPLOG"),
                    Long.parseLong(env.getOrDefault("LL_FLOW_WINDOW", String.valueOf(64L << 20))),
                    Duration.ofMillis(Long.parseLong(env.getOrDefault("LL_THINK_MS", "1000"))),
                    direction.equals("upload"), timeout.isEmpty() ? null : Duration.ofMillis((long) (Double.parseDouble(timeout) * 1000)));
        }
    }

    /** LL_APPLOG: NDJSON, times in CLOCK_MONOTONIC µs (System.nanoTime on Linux). */
    static final class AppLog {
        private final BufferedWriter out;

        AppLog(String path) throws IOException {
            out = path == null ? null : Files.newBufferedWriter(Path.of(path), StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            if (out != null) {
                closeAtExit(out);
            }
        }

        synchronized void write(String json) {
            if (out == null) {
                return;
            }
            try {
                out.write(json);
                out.write('\n');
                out.flush();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        void version() {
            long wallUs = System.currentTimeMillis() * 1000;
            write("{\"event\":\"version\",\"stack\":\"kwik\",\"version\":\"" + VERSION + "\",\"cc\":\"newreno\","
                    + "\"t_us\":" + System.nanoTime() / 1000 + ",\"wall_us\":" + wallUs + "}");
        }

        void event(String event, long stream, long bytes) {
            write("{\"t_us\":" + System.nanoTime() / 1000 + ",\"event\":\"" + event + "\",\"stream\":" + stream
                    + ",\"bytes\":" + bytes + "}");
        }

        void event(String event, long stream, long bytes, boolean acked) {
            write("{\"t_us\":" + System.nanoTime() / 1000 + ",\"event\":\"" + event + "\",\"stream\":" + stream
                    + ",\"bytes\":" + bytes + (acked ? "" : ",\"acked\":false") + "}");
        }
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    /** Files flushed and closed before any exit (SIGTERM included). */
    static synchronized void closeAtExit(Closeable c) {
        AT_EXIT.add(c);
    }

    private static synchronized void closeAll() {
        for (Closeable c : AT_EXIT) {
            try {
                c.close();
            } catch (IOException e) {
                // exiting anyway
            }
        }
    }

    public static void main(String[] args) {
        Runtime.getRuntime().addShutdownHook(new Thread(Endpoint::closeAll));
        int rc;
        try {
            Opts o = Opts.from(System.getenv());
            AppLog applog = new AppLog(o.applog());
            applog.version();
            if (o.timeout() != null) {
                Thread watchdog = new Thread(() -> {
                    try {
                        Thread.sleep(o.timeout().toMillis());
                        System.err.println("kwik: LL_TIMEOUT_S reached");
                        System.exit(1);
                    } catch (InterruptedException e) {
                        // done first
                    }
                });
                watchdog.setDaemon(true);
                watchdog.start();
            }
            rc = o.role().equals("server") ? Server.serve(o, applog) : Client.fetchAll(o, applog);
        } catch (Unsupported e) {
            System.err.println("kwik: " + e.getMessage());
            rc = 127;
        } catch (Exception e) {
            System.err.println("kwik: " + e);
            rc = 1;
        }
        System.exit(rc);
    }
}
